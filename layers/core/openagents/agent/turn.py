"""The turn's seams: what a step returns (``StepResult``), what the turn needs from the rest of
the product (``TurnHost``), and what an engine drives (``TurnSteps``: ``durable.run_turn``
takes any object with these steps, the loop of ``loop.py`` among them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, Protocol

from openagents.agent.models.port import JsonObject, JsonValue
from openagents.agent.prompt import Project
from openagents.agent.sandbox import Workspace
from openagents.agent.ui import AssistantMessage, UIMessageJson
from openagents.domain.attachments import AttachmentFile
from openagents.store.runs import Run, RunStatus, TurnMessage

Outcome = Literal["tools", "end", "waiting", "aborted", "failed"]
OUTCOMES: frozenset[str] = frozenset({"tools", "end", "waiting", "aborted", "failed"})


@dataclass(frozen=True)
class Answered:
    """An answer recorded on a waiting run's message."""

    pending: int  # calls that still wait for an answer
    parts: int  # the message's parts now (what a run that continues it starts from)


@dataclass(frozen=True)
class StepResult:
    outcome: Outcome
    calls: tuple[str, ...] = ()  # tool call ids to run, in order (outcome "tools")
    error: str | None = None
    title: bool = False  # a model step of the chat's first turn: the title step may name it
    seq: int | None = None  # the run's last seq once the step wrote (None: it wrote nothing)
    # a model step that failed throttled before any output, its failure not written: the turn
    # may wait and run it again (``TurnSteps.throttled``)
    throttled: bool = False
    wait: int | None = None  # ``throttled``: the seconds to wait before the model step again

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "throttled": self.throttled,
            "wait": self.wait,
            "outcome": self.outcome,
            "calls": list(self.calls),
            "error": self.error,
            "title": self.title,
            "seq": self.seq,
        }

    @classmethod
    def from_json(cls, data: JsonObject) -> StepResult:
        outcome = str(data.get("outcome"))
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown step outcome {outcome!r}")
        calls = data.get("calls")
        error = data.get("error")
        seq = data.get("seq")
        wait = data.get("wait")
        return cls(
            outcome,  # type: ignore[arg-type]
            tuple(str(c) for c in calls) if isinstance(calls, list) else (),
            str(error) if error is not None else None,
            data.get("title") is not False,  # a step checkpointed before the flag: may title
            seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
            data.get("throttled") is True,
            wait if isinstance(wait, int) and not isinstance(wait, bool) else None,
        )


@dataclass(frozen=True)
class LoopConfig:
    max_steps: int = 500
    bash_timeout_seconds: int = 120
    retention: timedelta = timedelta(days=7)
    # a throttled model step waits and runs again: backoff doubling from ``throttle_first``
    # seconds up to ``throttle_cap``, jittered, for at most ``throttle_wait_seconds`` in all
    throttle_wait_seconds: int = 900
    throttle_first: int = 10
    throttle_cap: int = 120


class TurnSteps(Protocol):
    """The steps an engine runs, each by run id (``durable.run_turn``)."""

    def begin(self, run_id: str) -> StepResult: ...

    def model_step(self, run_id: str, since: int | None = None) -> StepResult: ...

    def throttled(
        self, run_id: str, error: str, *, attempt: int, waited: int, since: int | None = None
    ) -> StepResult:
        """After a model step that failed throttled (its ``attempt``-th, ``waited`` seconds
        waited so far): how long to wait before it runs again (``wait``, the wait shown on the
        stream), or, past the bound (or on an engine that cannot wait: ``waited`` < 0), the
        turn's failure written; ``aborted`` / ``end`` when the run was stopped or ended."""
        ...

    def title_step(self, run_id: str) -> str | None: ...

    def checkpoint(self, run_id: str) -> dict[str, JsonValue]: ...

    def tool_step(
        self, run_id: str, call_id: str, *, last: bool, since: int | None = None
    ) -> StepResult: ...

    def end(self, run_id: str, outcome: Outcome, error: str | None = None) -> RunStatus: ...

    def follow_up(self, run_id: str) -> str | None: ...


class TurnHost(Protocol):
    """What a turn needs from the rest of the product (services/agent_turns.py)."""

    def messages(self, run: Run) -> list[UIMessageJson]:
        """The chat's UI messages, oldest first (the run's assistant message included)."""
        ...

    def save(self, run: Run, message: AssistantMessage) -> None:
        """Upsert the assistant message."""
        ...

    def stored(self, run: Run, message: AssistantMessage) -> TurnMessage:
        """The assistant message as the run store upserts it, with a step's events."""
        ...

    def workspace(self, run: Run) -> Workspace: ...

    def attachment(self, run: Run, url: str) -> AttachmentFile | None:
        """The run's user's attachment a ``file`` part names (its bytes), or None."""
        ...

    def project(self, run: Run) -> Project: ...

    def heartbeat(self, run: Run) -> None:
        """The turn is alive: keep the sandbox awake."""
        ...

    def approval(self, run: Run, tool: str) -> str | None:
        """Why the session wants the user to approve a ``tool`` call whatever its input (its
        "ask before running" setting), or None."""
        ...

    def ended(self, run: Run) -> None:
        """After the run ended (auto-commit after a natural finish, hibernation released)."""
        ...

    def untitled(self, run: Run) -> str | None:
        """The text of the run's user message when it is its chat's first and the chat or its
        session still has its automatic title (what a generated title replaces); else None."""
        ...

    def retitle(self, run: Run, title: str) -> None:
        """Give the generated ``title`` to the run's chat and session, each only while its
        title is still the automatic one (a rename meanwhile wins)."""
        ...
