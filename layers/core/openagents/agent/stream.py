"""Stream events of a run: chunks buffered and written to the run store about every 200 ms
(consecutive deltas of one text or reasoning block merged), so a client polling the log sees
the answer grow without one write per token."""

from __future__ import annotations

import time
from collections.abc import Callable

from openagents.store.runs import Chunk, JsonValue, Progress, RunStore, TurnMessage

FLUSH_SECONDS = 0.2
_DELTAS = frozenset({"text-delta", "reasoning-delta"})


class EventWriter:
    def __init__(
        self,
        runs: RunStore,
        run_id: str,
        *,
        flush_seconds: float = FLUSH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._runs, self._run_id = runs, run_id
        self._buffer: list[dict[str, JsonValue]] = []
        self._every, self._clock = flush_seconds, clock
        self._flushed = clock()
        self._last_seq = 0

    def add(self, chunk: Chunk) -> None:
        last = self._buffer[-1] if self._buffer else None
        kind = chunk.get("type")
        if (
            last is not None
            and kind in _DELTAS
            and last.get("type") == kind
            and last.get("id") == chunk.get("id")
        ):
            last["delta"] = str(last.get("delta", "")) + str(chunk.get("delta", ""))
        else:
            self._buffer.append(dict(chunk))
        if self._clock() - self._flushed >= self._every:
            self.flush()

    def flush(self, progress: Progress | None = None, message: TurnMessage | None = None) -> int:
        """Write the buffered chunks (with the run's ``progress`` and its assistant ``message``:
        one write); the run's last seq after it (0 before this writer wrote anything)."""
        if self._buffer or progress is not None or message is not None:
            self._last_seq = self._runs.append(self._run_id, self._buffer, progress, message)
            self._buffer = []
        self._flushed = self._clock()
        return self._last_seq
