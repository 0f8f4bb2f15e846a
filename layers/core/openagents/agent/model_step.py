"""The model step: one model call of the turn, streamed into the run's events and the assistant
message, ending in the tools it called (``"tools"``) or the turn's end (finished, stopped, or a
readable failure: the model's, the sandbox's, a model no longer configured)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from openagents.agent.chunks import ErrorChunk, FinishStepChunk, StartStepChunk
from openagents.agent.context import fitted
from openagents.agent.kept import PerRun
from openagents.agent.models.port import (
    Finish,
    ModelError,
    ModelErrorKind,
    ModelRequest,
    StopReason,
)
from openagents.agent.models.registry import ModelRegistry
from openagents.agent.parts import StepStartPart
from openagents.agent.prompt import project_instructions, system_prompt
from openagents.agent.sandbox import SandboxError
from openagents.agent.step_io import StepIO, Working
from openagents.agent.tools import specs
from openagents.agent.turn import Outcome, StepResult, TurnHost
from openagents.agent.ui import AssistantMessage, History, UIMessageJson
from openagents.agent.ui_stream import ModelStreamer, UIStream
from openagents.domain.errors import DomainError
from openagents.store.runs import Run, RunUsage


@dataclass(frozen=True)
class _Throttled:
    message: str


InStep = Callable[[Working, UIStream, Sequence[str]], Outcome | None]
"""Runs a model step's calls in that step when they all run there (``ToolStep.in_model_step``):
the outcome the turn goes on with, None when they run in tool steps."""


def _never(_work: Working, _stream: UIStream, _calls: Sequence[str]) -> Outcome | None:
    return None


class ModelStep:
    def __init__(
        self,
        io: StepIO,
        host: TurnHost,
        models: ModelRegistry,
        max_steps: int,
        *,
        in_step: InStep = _never,
    ) -> None:
        self._io, self._host, self._models, self._max_steps = io, host, models, max_steps
        # from the run's second model step on (its checkpoint taken before the first tool
        # step), calls that run in the model step do so: one durable step and one write for
        # the model call and its calls instead of one each
        self._in_step = in_step
        # the system prompt (the project's AGENTS.md / CLAUDE.md, the repository and branch),
        # built once per run in this process: it stays the same for the whole turn (as the
        # reference builds it once per request; a stable prefix is what the model's prompt
        # cache matches), and a step pays no sandbox reads nor a session read. A new invocation
        # (another Lambda) builds it again.
        self._systems: PerRun[str] = PerRun()
        # the run's model-visible history as its previous model step in this process built
        # it: only the messages and steps changed since are converted again (``History``)
        self._histories: PerRun[History] = PerRun()

    def __call__(self, run_id: str, since: int | None) -> StepResult:
        run = self._io.run(run_id)
        if run is None or run.status.ended:
            return StepResult("end")
        if run.cancel_requested:
            return StepResult("aborted")
        if run.model_calls >= self._max_steps:  # a step: one model call and its tools
            return StepResult(
                "failed", error=f"The turn reached its limit of {self._max_steps} steps."
            )
        self._host.heartbeat(run)
        work = self._io.working(run)
        others, message = work.others, work.message
        title = bool(others) and others[0].get("id") == run.message_id  # the chat's first turn
        stream = self._io.stream(work, since)
        stream.add(StartStepChunk())
        message.parts.append(StepStartPart())
        finish = self._stream(run, others, message, stream)
        message.finish_streaming()
        if isinstance(finish, _Throttled) and isinstance(message.parts[-1], StepStartPart):
            # nothing streamed: the step is closed unwritten; the turn may wait and run it again
            message.parts.pop()
            stream.add(FinishStepChunk())
            result = StepResult("failed", error=finish.message, throttled=True)
            return self._io.saved(work, stream, result)
        if isinstance(finish, _Throttled):
            finish = finish.message
        if isinstance(finish, str):
            stream.add(ErrorChunk(error_text=finish))
            stream.add(FinishStepChunk())
            self._io.count(work, model_calls=1)
            return self._io.saved(work, stream, StepResult("failed", error=finish))
        self._io.count(work, model_calls=1, usage=_usage(finish))
        metadata = message.metadata
        metadata.step_finish_reasons = [
            *(metadata.step_finish_reasons or []),
            finish.stop_reason.value,
        ]
        metadata.model_id = run.model_id
        metadata.usage = work.run.usage.to_json()
        result = self._outcome(finish, stream, title)
        if result.outcome == "tools" and run.model_calls > 0:
            ran = self._in_step(work, stream, result.calls)
            if ran is not None:
                result = replace(result, outcome=ran, calls=())
        return self._io.saved(work, stream, result)

    @staticmethod
    def _outcome(finish: Finish, stream: UIStream, title: bool) -> StepResult:
        calls = tuple(call.id for call in finish.message.tool_calls)
        if finish.stop_reason is StopReason.CANCELLED:
            stream.add(FinishStepChunk())
            return StepResult("aborted", title=title)
        if (failure := finish.stop_reason.failure_message) is not None:
            stream.add(ErrorChunk(error_text=failure))
            stream.add(FinishStepChunk())
            return StepResult("failed", error=failure, title=title)
        if calls:
            return StepResult("tools", calls, title=title)
        stream.add(FinishStepChunk())
        return StepResult("end", title=title)

    def _stream(
        self, run: Run, others: Sequence[UIMessageJson], message: AssistantMessage, stream: UIStream
    ) -> Finish | str | _Throttled:
        """The model call streamed into ``stream`` and ``message``; a readable error instead
        (``_Throttled``: the model's quota, after the adapter's own retries)."""
        try:
            model = self._models.model(run.model_id)
            request = self._request(run, others, message)
            return ModelStreamer(stream, message, run.model_calls).play(
                model.stream(request, cancelled=self._io.cancelled(run.id))
            )
        except ModelError as error:
            if error.kind is ModelErrorKind.THROTTLED and error.retryable:
                return _Throttled(error.message)
            return error.message
        except SandboxError as error:
            return f"The sandbox is unavailable: {error}"
        except DomainError as error:  # e.g. the run's model is no longer configured
            return error.message

    def _request(
        self, run: Run, others: Sequence[UIMessageJson], message: AssistantMessage
    ) -> ModelRequest:
        made = self._histories.get(run.id)
        if made is None:
            made = History()
            self._histories.put(run.id, made)
        messages = made([*others, message.to_json()], lambda url: self._host.attachment(run, url))
        request = ModelRequest(self._system(run), messages, specs(), step=run.model_calls)
        return fitted(request, self._models.info(run.model_id).context_window)

    def _system(self, run: Run) -> str:
        system = self._systems.get(run.id)
        if system is None:
            instructions = project_instructions(self._host.workspace(run))
            system = system_prompt(self._host.project(run), instructions)
            self._systems.put(run.id, system)
        return system

    def forget(self, run_id: str) -> None:
        self._systems.pop(run_id)
        self._histories.pop(run_id)


def _usage(finish: Finish) -> RunUsage:
    usage = finish.usage
    return RunUsage(
        usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens
    )
