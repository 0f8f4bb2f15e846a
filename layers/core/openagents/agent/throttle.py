"""The model's capacity: a model step that failed throttled (the provider's quota, after the
adapter's own retries, before any output) is not the turn's end. The turn waits (the engine's
durable wait: no invocation runs meanwhile) and runs the step again, with capped, jittered
exponential backoff (``LoopConfig.throttle_*``), for at most ``throttle_wait_seconds`` in all;
past it the turn fails saying for how long the quota was exhausted. Each wait is shown on the
stream (a ``data-waiting`` part: ``{reason: "model capacity", retryAt}``) and counted
(``ModelThrottled``). This step decides (its random jitter recorded with its result, so a
replay waits the same) and writes; the engine waits (``durable.run_turn``)."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta

from openagents.agent.chunks import DataWaitingChunk, ErrorChunk
from openagents.agent.step_io import StepIO
from openagents.agent.turn import LoopConfig, StepResult

REASON = "model capacity"
METRIC = "ModelThrottled"


def backoff(attempt: int, config: LoopConfig, jitter: float) -> int:
    """The ``attempt``-th wait (0 first): ``throttle_first`` doubling up to ``throttle_cap``,
    between its half and its whole (``jitter`` in [0, 1)), at least a second."""
    full = min(config.throttle_cap, config.throttle_first << min(attempt, 30))
    return max(1, round(full / 2 + full / 2 * jitter))


def exhausted(waited: int, error: str) -> str:
    minutes = max(1, round(waited / 60))
    unit = "minute" if minutes == 1 else "minutes"
    return f"The model's quota was exhausted for {minutes} {unit}: {error}"


class Throttle:
    def __init__(
        self,
        io: StepIO,
        clock: Callable[[], datetime],
        config: LoopConfig,
        count: Callable[[str], None],
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._io, self._clock, self._config = io, clock, config
        self._count, self._jitter = count, jitter

    def __call__(
        self, run_id: str, error: str, *, attempt: int, waited: int, since: int | None
    ) -> StepResult:
        run = self._io.run(run_id)
        if run is None or run.status.ended:
            return StepResult("end")
        if run.cancel_requested:
            return StepResult("aborted")
        work = self._io.working(run)
        stream = self._io.stream(work, since)
        left = self._config.throttle_wait_seconds - waited
        if waited < 0 or left < 1:
            failure = exhausted(max(waited, 0), error) if waited >= 0 else error
            stream.add(ErrorChunk(error_text=failure))
            return self._io.saved(work, stream, StepResult("failed", error=failure))
        wait = min(left, backoff(attempt, self._config, self._jitter()))
        retry_at = self._clock() + timedelta(seconds=wait)
        data = {"reason": REASON, "retryAt": retry_at.isoformat(), "error": error}
        stream.add(DataWaitingChunk(data=data))
        self._count(METRIC)
        return self._io.saved(work, stream, StepResult("tools", wait=wait))
