"""A re-run step's events: what its interrupted attempt already logged is not logged again.

A step that was in flight at a crash (or raised and is retried) runs again from the messages the
run's previous step wrote; its interrupted attempt may have left events after that step's last
seq, which clients have read. ``ReplayWriter`` compares the re-run's chunks with those: while
they repeat them (a deterministic model, a tool whose result sandboxd kept) nothing is written,
and the re-run's first new chunk continues the stream where the attempt stopped, in the same
blocks (a text part keeps growing). Should the re-run answer differently, the attempt's open
blocks are ended where they stopped and the re-run goes on in blocks of its own (ids with
``-r``), the text it had streamed so far sent again in them; the stored message is the re-run's
either way (docs/agent.md, "What a restart replays").

A preliminary tool output (a running command's output so far, a subagent's progress) is
progress, not a fact: each one replaces the last on the client. A re-run's stands in for the
attempt's it meets (that one stays what clients show; the re-run's is not written), and one
the re-run does not repeat is passed over: a keyed command collected after a restart answers
its final output alone, which is then written once, after what clients already have.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from openagents.agent.stream import EventWriter
from openagents.store.runs import Chunk, JsonValue, RunStore

_DELTAS = frozenset({"text-delta", "reasoning-delta"})
_STARTS = {"text-start": "text", "reasoning-start": "reasoning"}
_ENDS = frozenset({"text-end", "reasoning-end"})
RERUN = "-r"


def merged(chunks: Sequence[Chunk]) -> list[dict[str, JsonValue]]:
    """``chunks`` with consecutive deltas of one block joined (how they were cut into events
    depends on timing, not on what was said)."""
    out: list[dict[str, JsonValue]] = []
    for chunk in chunks:
        last = out[-1] if out else None
        if (
            last is not None
            and chunk.get("type") in _DELTAS
            and last.get("type") == chunk.get("type")
            and last.get("id") == chunk.get("id")
        ):
            last["delta"] = str(last.get("delta", "")) + str(chunk.get("delta", ""))
        else:
            out.append(dict(chunk))
    return out


class ReplayWriter(EventWriter):
    def __init__(self, runs: RunStore, run_id: str, logged: Sequence[Chunk]) -> None:
        super().__init__(runs, run_id)
        self._ahead = deque(merged(logged))  # the attempt's chunks not matched yet
        self._logged_ids = {str(c["id"]) for c in self._ahead if "id" in c}
        self._left_open = _open_blocks(self._ahead)  # the attempt's blocks, as clients have them
        self._live: dict[str, str] = {}  # the re-run's open blocks: id -> kind
        self._texts: dict[str, str] = {}  # the re-run's text so far, per open block
        self._diverged = False

    def add(self, chunk: Chunk) -> None:
        self._track(chunk)
        if self._diverged:
            super().add(self._renamed(chunk))
        elif not self._ahead:
            super().add(chunk)
        elif not self._matched(dict(chunk)):
            self._diverge()
            super().add(self._renamed(chunk))

    def _matched(self, chunk: dict[str, JsonValue]) -> bool:
        """Consume what ``chunk`` repeats of the attempt; False at the first difference (a
        delta longer than the logged one writes its remainder)."""
        head = self._ahead[0]
        if _preliminary(head) and head != chunk:
            return self._progress(chunk)
        if chunk.get("type") not in _DELTAS:
            if head != chunk:
                return False
            self._ahead.popleft()
            return True
        if head.get("type") != chunk.get("type") or head.get("id") != chunk.get("id"):
            return False
        logged, new = str(head.get("delta", "")), str(chunk.get("delta", ""))
        if logged.startswith(new):
            head["delta"] = logged[len(new) :]
            if not head["delta"]:
                self._ahead.popleft()
            return True
        if not new.startswith(logged):
            return False
        self._ahead.popleft()
        rest = {**chunk, "delta": new[len(logged) :]}
        if not self._ahead:
            super().add(rest)
            return True
        return self._matched(rest)

    def _progress(self, chunk: dict[str, JsonValue]) -> bool:
        """The attempt's preliminary output is next and ``chunk`` does not repeat it."""
        head = self._ahead[0]
        if _preliminary(chunk) and chunk.get("toolCallId") == head.get("toolCallId"):
            self._ahead.popleft()  # the re-run's output so far, in place of the attempt's
            return True
        while self._ahead and _preliminary(self._ahead[0]):
            self._ahead.popleft()
        if not self._ahead:
            super().add(chunk)
            return True
        return self._matched(chunk)

    def _diverge(self) -> None:
        self._diverged = True
        for block_id, kind in self._left_open.items():
            super().add({"type": f"{kind}-end", "id": block_id})
        for block_id, kind in self._live.items():  # the re-run's open blocks, in blocks of its own
            if block_id in self._logged_ids:
                super().add({"type": f"{kind}-start", "id": block_id + RERUN})
                text = self._texts.get(block_id, "")
                if text:
                    super().add({"type": f"{kind}-delta", "id": block_id + RERUN, "delta": text})

    def _renamed(self, chunk: Chunk) -> Chunk:
        block_id = chunk.get("id")
        if isinstance(block_id, str) and block_id in self._logged_ids:
            return {**chunk, "id": block_id + RERUN}
        return chunk

    def _track(self, chunk: Chunk) -> None:
        kind, block_id = str(chunk.get("type")), str(chunk.get("id"))
        if kind in _STARTS:
            self._live[block_id] = _STARTS[kind]
            self._texts[block_id] = ""
        elif kind in _ENDS:
            self._live.pop(block_id, None)
            self._texts.pop(block_id, None)
        elif kind in _DELTAS and block_id in self._texts:
            self._texts[block_id] += str(chunk.get("delta", ""))


def _preliminary(chunk: Chunk) -> bool:
    return chunk.get("type") == "tool-output-available" and chunk.get("preliminary") is True


def _open_blocks(chunks: Sequence[Chunk]) -> dict[str, str]:
    """The text and reasoning blocks ``chunks`` start and do not end: id -> kind."""
    open_: dict[str, str] = {}
    for chunk in chunks:
        kind, block_id = str(chunk.get("type")), str(chunk.get("id"))
        if kind in _STARTS:
            open_[block_id] = _STARTS[kind]
        elif kind in _ENDS:
            open_.pop(block_id, None)
    return open_
