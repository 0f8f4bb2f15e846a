"""What every step of a turn reads and writes: the run, the chat's messages (kept between the
steps of one process while the run is as the last step left it), the step's UI stream (one
that does not log again what an interrupted attempt logged), and the step's end: its events,
the run's counts and the assistant message in one write."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from openagents.agent.chunks import StartChunk
from openagents.agent.kept import PerRun
from openagents.agent.models.cancel import every
from openagents.agent.models.port import CancelCheck, JsonValue
from openagents.agent.replay import ReplayWriter
from openagents.agent.stream import EventWriter
from openagents.agent.turn import StepResult, TurnHost
from openagents.agent.ui import AssistantMessage, UIMessageJson
from openagents.agent.ui_stream import UIStream
from openagents.store.runs import Chunk, Progress, Run, RunStore, RunUsage

CANCEL_POLL_SECONDS = 0.25


@dataclass(frozen=True)
class _Kept:
    """A run's messages as its last step wrote them, for its next step in this process."""

    version: tuple[int, int]  # the run's (steps, last_seq) right after that write
    others: list[UIMessageJson]
    message: AssistantMessage
    stored: Sequence[JsonValue]  # the message's parts as that write stored them


@dataclass
class Working:
    """A step's run and messages: the chat's other messages and the run's own, typed, with
    its parts as the store holds them (the step writes only what it changed after them)."""

    run: Run
    others: list[UIMessageJson]
    message: AssistantMessage
    stored: Sequence[JsonValue] = ()


class StepIO:
    def __init__(self, runs: RunStore, host: TurnHost) -> None:
        self._runs, self._host = runs, host
        # the chat's messages as the run's last step wrote them: the next step in this process
        # starts from them instead of reading the chat again (see ``working``)
        self._kept: PerRun[_Kept] = PerRun()

    def run(self, run_id: str) -> Run | None:
        return self._runs.get(run_id)

    def cancelled(self, run_id: str) -> CancelCheck:
        return every(CANCEL_POLL_SECONDS, lambda: self._runs.cancel_requested(run_id))

    def message(self, run: Run) -> tuple[list[UIMessageJson], AssistantMessage]:
        """The chat's other messages and the run's assistant message, read from the chat."""
        work = self._read(run)
        return work.others, work.message

    def _read(self, run: Run) -> Working:
        messages = self._host.messages(run)
        own = next((m for m in messages if m.get("id") == run.assistant_message_id), None)
        others = [m for m in messages if m.get("id") != run.assistant_message_id]
        parts = own.get("parts") if own is not None else None
        stored = parts if isinstance(parts, Sequence) and not isinstance(parts, str) else ()
        return Working(run, others, AssistantMessage.load(own, run.assistant_message_id), stored)

    def working(self, run: Run) -> Working:
        """The messages a step starts from: those the run's previous step wrote in this process
        while the run is still as that write left it (its steps and last event: no other
        invocation went on meanwhile), else read from the chat. Taken out while the step
        changes them: a step that raises leaves nothing kept, its retry reads the chat."""
        kept = self._kept.pop(run.id)
        if kept is not None and kept.version == (run.steps, run.last_seq):
            return Working(run, kept.others, kept.message, kept.stored)
        return self._read(run)

    def stream(self, work: Working, since: int | None) -> UIStream:
        """The step's stream: after a previous attempt's events (``since`` its previous step's
        seq), one that does not log them again; the message's ``start`` first in the run."""
        run = work.run
        if since is None or run.last_seq <= since:
            writer = EventWriter(self._runs, run.id)
        else:
            logged: list[Chunk] = []
            while page := self._runs.events(run.id, since + len(logged)):
                logged += [event.chunk for event in page]
            writer = ReplayWriter(self._runs, run.id, logged)
        stream = UIStream(writer)
        if (run.last_seq if since is None else since) == 0:
            stream.add(StartChunk(message_id=work.message.id))
        return stream

    @staticmethod
    def count(work: Working, *, model_calls: int, usage: RunUsage | None = None) -> None:
        """One more step, with the model calls (and usage) it made (``saved`` writes it)."""
        run = work.run
        work.run = run.progressed(
            Progress(
                steps=run.steps + 1,
                model_calls=run.model_calls + model_calls,
                usage=run.usage + usage if usage else run.usage,
            )
        )

    def saved(self, work: Working, stream: UIStream, result: StepResult) -> StepResult:
        """The step's end: the message upserted with its events and the run's counts (one
        write: of the message, its parts from the first the step changed), then kept for the
        run's next step."""
        run = work.run
        progress = Progress(run.steps, run.model_calls, run.usage)
        turn = self._host.stored(run, work.message)
        parts = turn.message.parts.get("parts")
        written = list(parts) if isinstance(parts, list) else []
        kept = unchanged(work.stored, written)
        seq = stream.flush(progress, replace(turn, kept_parts=kept))
        self._kept.put(run.id, _Kept((run.steps, seq), work.others, work.message, written))
        return replace(result, seq=seq)

    def merge(self, run: Run) -> None:
        """The turn's end: the run's assistant message written whole once, in place of the
        segments its steps wrote (none when the run never wrote it) — as its last step in this
        process left it, else read from the chat."""
        work = self.working(run)
        if work.stored:
            self._host.save(run, work.message)

    def forget(self, run_id: str) -> None:
        self._kept.pop(run_id)


def unchanged(stored: Sequence[JsonValue], parts: Sequence[JsonValue]) -> int:
    """How many of ``parts`` lead unchanged from ``stored`` (the parts a write may keep)."""
    kept = 0
    for old, new in zip(stored, parts, strict=False):
        if old != new:
            break
        kept += 1
    return kept
