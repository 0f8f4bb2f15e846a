"""The agent turn as durable steps, each by run id (the ``TurnSteps`` an engine drives:
``durable.run_turn``):

    start = loop.begin(run_id)
    while outcome is "tools": model step, then a tool step per call
        (the first tool step of the run after ``loop.checkpoint(run_id)``)
    loop.end(run_id, outcome); loop.follow_up(run_id)

Each step reads what it needs from the stores and returns a small ``StepResult``. A step may
run again (a crash, a retry): each is given the seq its previous step ended at (``since``), and
the events its interrupted attempt logged after it are not logged again (``agent/replay.py``).

Here: the turn's beginning and end, and the answer to a waiting call (the API's ``respond``).
The steps live beside it: ``model_step.py``, ``tool_step.py`` (calls through
``tool_runner.py``), ``titles.py``; what they share, ``step_io.py``; the UI message they build,
``parts.py``, ``chunks.py``, ``ui.py`` and ``ui_stream.py``; the seams, ``turn.py``.

Nothing here imports an SDK: models, stores and the sandbox come in through ports.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from datetime import datetime

from openagents.agent.chunks import AbortChunk, FinishChunk, FinishReason, UIChunk
from openagents.agent.model_step import ModelStep
from openagents.agent.models.port import JsonValue
from openagents.agent.models.registry import ModelRegistry
from openagents.agent.step_io import StepIO
from openagents.agent.throttle import Throttle
from openagents.agent.titles import Titles
from openagents.agent.tool_runner import ToolRunner
from openagents.agent.tool_step import ToolStep
from openagents.agent.tools import TOOLS
from openagents.agent.turn import (
    Answered,
    LoopConfig,
    Outcome,
    StepResult,
    TurnHost,
    TurnSteps,
)
from openagents.agent.ui import AssistantMessage, UIMessageJson
from openagents.domain.errors import DomainError
from openagents.store.runs import Run, RunStatus, RunStore

__all__ = ["AgentLoop", "Answered", "LoopConfig", "Outcome", "StepResult", "TurnHost", "TurnSteps"]

log = logging.getLogger(__name__)
FINISH_REASONS: dict[RunStatus, FinishReason] = {
    RunStatus.COMPLETED: "stop",
    RunStatus.WAITING: "tool-calls",
    RunStatus.ABORTED: "other",
    RunStatus.FAILED: "error",
}
STATUSES: dict[Outcome, RunStatus] = {
    "end": RunStatus.COMPLETED,
    "tools": RunStatus.COMPLETED,
    "waiting": RunStatus.WAITING,
    "aborted": RunStatus.ABORTED,
    "failed": RunStatus.FAILED,
}


class AgentLoop:
    def __init__(
        self,
        runs: RunStore,
        host: TurnHost,
        models: ModelRegistry,
        clock: Callable[[], datetime],
        config: LoopConfig,
        *,
        count: Callable[[str], None] = lambda _name: None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._runs, self._host, self._models = runs, host, models
        self._clock, self._config = clock, config
        self._io = StepIO(runs, host)
        self._tools = ToolRunner(TOOLS)
        self._tool = ToolStep(
            self._io, runs, host, models, self._tools, config.bash_timeout_seconds
        )
        self._model = ModelStep(
            self._io, host, models, config.max_steps, in_step=self._tool.in_model_step
        )
        self._throttle = Throttle(self._io, clock, config, count, jitter)
        self._titles = Titles(runs, host, models, self._io.cancelled)

    def _message(self, run: Run) -> tuple[list[UIMessageJson], AssistantMessage]:
        return self._io.message(run)

    def begin(self, run_id: str) -> StepResult:
        """A run that continues a message (after ``respond``) first runs the approved calls."""
        run = self._io.run(run_id)
        if run is None or run.status.ended:
            return StepResult("end")
        _, message = self._io.message(run)
        return StepResult("tools", self._tools.approved(message), seq=run.last_seq)

    def model_step(self, run_id: str, since: int | None = None) -> StepResult:
        return self._model(run_id, since)

    def throttled(
        self, run_id: str, error: str, *, attempt: int, waited: int, since: int | None = None
    ) -> StepResult:
        """After a throttled model step: the wait before it runs again, or the turn's failure
        past the bound (``throttle.py``)."""
        return self._throttle(run_id, error, attempt=attempt, waited=waited, since=since)

    def title_step(self, run_id: str) -> str | None:
        """Name a new chat (and its session) from its first user message (``titles.py``)."""
        return self._titles.name(run_id)

    def checkpoint(self, run_id: str) -> dict[str, JsonValue]:
        return self._tool.checkpoint(run_id)

    def tool_step(
        self, run_id: str, call_id: str, *, last: bool, since: int | None = None
    ) -> StepResult:
        return self._tool(run_id, call_id, last=last, since=since)

    def answer(
        self,
        run: Run,
        call_id: str,
        *,
        approved: bool | None,
        reason: str | None,
        answers: JsonValue | None,
    ) -> Answered:
        """Record the user's answer to an approval or a question on the waiting ``run``'s
        message."""
        _, message = self._io.message(run)
        answered = self._tools.answer(
            message, call_id, approved=approved, reason=reason, answers=answers
        )
        self._host.save(run, message)
        return answered

    def finalize(self, run_id: str, outcome: Outcome, error: str | None = None) -> RunStatus:
        """End the run and, when this call ended it, its follow-ups (for callers outside the
        turn's execution: a stop that was not honoured; the turn itself has a step for each)."""
        run = self._io.run(run_id)
        status = self.end(run_id, outcome, error)
        if run is not None and not run.status.ended:
            self.follow_up(run_id)
        return status

    def follow_up(self, run_id: str) -> str | None:
        """After the run ended: the turn-end follow-ups (audit entry, auto-commit and push,
        auto-PR, diff cache, PR state, hibernation released) through the host, each idempotent,
        so a replay of this step may run them again; the run's status (None: not ended)."""
        run = self._io.run(run_id)
        if run is None or not run.status.ended:
            return None
        try:
            self._host.ended(run)
        except Exception:  # the run's outcome stands; the follow-ups log their own failures
            log.exception("after run %s", run_id)
        return run.status.value

    def end(self, run_id: str, outcome: Outcome, error: str | None = None) -> RunStatus:
        """End the run: the closing chunks, the status, the chat released (idempotent)."""
        run = self._io.run(run_id)
        if run is None:
            return RunStatus.FAILED
        if run.status.ended:
            return run.status
        status = STATUSES[outcome]
        if status is RunStatus.COMPLETED and run.cancel_requested:
            status = RunStatus.ABORTED
        chunks: list[UIChunk] = []
        if status is RunStatus.ABORTED:
            chunks.append(AbortChunk(reason="stopped by the user"))
        chunks.append(FinishChunk(finish_reason=FINISH_REASONS[status]))
        try:
            self._io.merge(run)
        except Exception:  # the segments stand for it as well: the run still ends
            log.exception("merging run %s's message", run_id)
        # never refused for storage: a turn that filled the user's storage still ends
        self._runs.append(run_id, [chunk.to_json() for chunk in chunks], bounded=False)
        self._model.forget(run_id)
        self._io.forget(run_id)
        ended = self._runs.finish(
            run_id,
            status,
            at=self._clock(),
            error=error if status is RunStatus.FAILED else None,
            cost_usd=self._cost(run),
            retention=self._config.retention,
        )
        return ended.status

    def _cost(self, run: Run) -> float | None:
        """The run's estimated cost, from its model's price (None without one)."""
        try:
            return self._models.info(run.model_id).cost(run.usage)
        except DomainError:  # the model is no longer configured
            return None
