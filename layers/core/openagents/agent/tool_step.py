"""The tool step: one tool call of the turn through the tool runner (``tool_runner.py``), with
its context (the run's workspace, its cancel flag, the bash timeout, and the ``task`` tool's
subagents, whose model calls and usage count as the run's and whose progress streams as the
call's preliminary output, and the ``progress`` a running ``bash`` shows its output so far
through, written at once); and, before the run's first tool step, its checkpoint."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from openagents.agent.chunks import FinishStepChunk, ToolOutputAvailableChunk
from openagents.agent.models.port import JsonValue
from openagents.agent.models.registry import ModelRegistry
from openagents.agent.parts import ToolPart
from openagents.agent.sandbox import RunWorkspace, SandboxError
from openagents.agent.step_io import StepIO, Working
from openagents.agent.subagent import Subagent, SubagentProgress
from openagents.agent.tool_runner import CallOutcome, ToolRunner
from openagents.agent.tools import TOOLS, ToolContext
from openagents.agent.tools.base import SubagentRunner
from openagents.agent.turn import Outcome, StepResult, TurnHost
from openagents.agent.ui_stream import UIStream
from openagents.domain.checkpoints import checkpoint_ref
from openagents.store.runs import Run, RunStore, RunUsage

log = logging.getLogger(__name__)


class ToolStep:
    def __init__(
        self,
        io: StepIO,
        runs: RunStore,
        host: TurnHost,
        models: ModelRegistry,
        tools: ToolRunner,
        bash_timeout_seconds: int,
    ) -> None:
        self._io, self._runs, self._host, self._models = io, runs, host, models
        self._tools, self._bash_timeout = tools, bash_timeout_seconds

    def __call__(self, run_id: str, call_id: str, *, last: bool, since: int | None) -> StepResult:
        run = self._io.run(run_id)
        if run is None or run.status.ended:
            return StepResult("end")
        work = self._io.working(run)
        part = work.message.tool_part(call_id)
        if part is None:
            return StepResult("failed", error=f"tool call {call_id} is not in the message")
        stream = self._io.stream(work, since)
        subagents: list[Subagent] = []  # the task tool's (its model calls are the run's)
        outcome = self._run(work, part, stream, subagents)
        if last:
            stream.add(FinishStepChunk())
        self._io.count(
            work,
            model_calls=sum(agent.result.model_calls for agent in subagents),
            usage=sum((agent.result.usage for agent in subagents), RunUsage()),
        )
        return self._io.saved(work, stream, StepResult(outcome))

    def in_model_step(
        self, work: Working, stream: UIStream, calls: Sequence[str]
    ) -> Outcome | None:
        """The model step's calls run in that step when each of them runs there
        (``Tool.in_model_step``), each as its own tool step would (its chunks on the model
        step's stream, ``finish-step`` after the last, a step counted); the outcome the turn
        goes on with, as ``durable.run_turn`` reads the tool steps' (None: they run in tool
        steps, as usual)."""
        parts = [work.message.tool_part(call_id) for call_id in calls]
        if not parts or any(part is None or not self._tools.in_model_step(part) for part in parts):
            return None
        waiting = False
        for i, part in enumerate(parts):
            assert part is not None
            outcome = self._run(work, part, stream, [])
            self._io.count(work, model_calls=0)  # a step of the run's, as its tool step was
            if i == len(parts) - 1:
                stream.add(FinishStepChunk())
            if outcome == "aborted":
                return outcome
            waiting = waiting or outcome == "waiting"
        return "waiting" if waiting else "tools"

    def _run(
        self, work: Working, part: ToolPart, stream: UIStream, subagents: list[Subagent]
    ) -> CallOutcome:
        run, call_id = work.run, part.tool_call_id

        def context() -> ToolContext:
            self._host.heartbeat(run)
            made = ToolContext(
                workspace=RunWorkspace(self._host.workspace(run), run.id),
                cancelled=self._io.cancelled(run.id),
                call_id=call_id,
                bash_timeout_seconds=self._bash_timeout,
                progress=lambda output: stream.send(
                    ToolOutputAvailableChunk(tool_call_id=call_id, output=output, preliminary=True)
                ),
            )
            return replace(made, subagent=self._subagents(run, made, stream, subagents))

        return self._tools.run(
            work.message,
            part,
            stream,
            stopped=run.cancel_requested,
            asked=lambda name: self._host.approval(run, name),
            context=context,
        )

    def _subagents(
        self, run: Run, context: ToolContext, stream: UIStream, made: list[Subagent]
    ) -> SubagentRunner:
        def start(kind: str, task: str, instructions: str) -> JsonValue:
            agent = Subagent(
                self._models.model(run.model_id),
                TOOLS,
                context.workspace,
                cancelled=context.cancelled,
                bash_timeout_seconds=context.bash_timeout_seconds,
                parent_call_id=context.call_id,
            )
            made.append(agent)

            def progress(done: SubagentProgress) -> None:  # the tool's preliminary output
                self._host.heartbeat(run)
                output: JsonValue = {
                    "status": "running",
                    "task": task,
                    "steps": done.steps,
                    "toolCalls": list(done.tool_calls),
                }
                stream.add(
                    ToolOutputAvailableChunk(
                        tool_call_id=context.call_id, output=output, preliminary=True
                    )
                )

            return agent.run(
                kind, task, instructions, first_step=run.model_calls, progress=progress
            ).to_json()

        return start

    def checkpoint(self, run_id: str) -> dict[str, JsonValue]:
        """Before the run's first tool step: the workspace saved on the run's hidden ref and
        recorded on the run, once (a replay keeps the first). A sandbox that cannot take it
        leaves the run without one (it cannot be reverted); the turn goes on."""
        run = self._io.run(run_id)
        if run is None or run.status.ended:
            return {"commit": None}
        if run.checkpoint is None:
            try:
                saved = self._host.workspace(run).checkpoint(checkpoint_ref(run.id))
            except SandboxError as error:
                log.warning("no checkpoint for run %s: %s", run.id, error)
                return {"commit": None}
            run = self._runs.record_checkpoint(run.id, saved) or run
        return {"commit": run.checkpoint.commit if run.checkpoint else None}
