"""The agent turn as durable steps: ``model_step`` (one model call, streamed into the run's
events and the assistant message), ``tool_step`` (one tool call) and ``finalize``. Each step
reads what it needs from the stores and returns a small ``StepResult``; an engine (the durable
handler, ``functions/agent/handler.py``) drives them:

    start = loop.begin(run_id)
    while outcome is "tools": model step, then a tool step per call
        (the first tool step of the run after ``loop.checkpoint(run_id)``)
    loop.end(run_id, outcome); loop.follow_up(run_id)

A step may run again (a crash, a retry): each is given the seq its previous step ended at
(``since``), and the events its interrupted attempt logged after it are not logged again
(``agent/replay.py``).

Nothing here imports an SDK: models, stores and the sandbox come in through ports.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal, Protocol

from openagents.agent.kept import PerRun
from openagents.agent.models.port import (
    CancelCheck,
    Finish,
    JsonObject,
    JsonValue,
    Message,
    ModelError,
    ModelErrorKind,
    ModelEvent,
    ModelRequest,
    ReasoningBlock,
    ReasoningDelta,
    StopReason,
    TextBlock,
    TextDelta,
    ToolCallComplete,
    ToolResult,
    estimate_tokens,
    every,
)
from openagents.agent.models.registry import ModelRegistry
from openagents.agent.prompt import Project, project_instructions, system_prompt
from openagents.agent.replay import ReplayWriter
from openagents.agent.sandbox import RunWorkspace, SandboxError, Workspace
from openagents.agent.stream import EventWriter
from openagents.agent.subagent import Subagent, SubagentProgress
from openagents.agent.tools import TOOLS, Cancelled, ToolContext, ToolFailure, specs
from openagents.agent.tools.base import SubagentRunner
from openagents.agent.ui import (
    AssistantMessage,
    Part,
    UIMessageJson,
    history,
    is_tool_part,
    tool_name,
)
from openagents.domain import naming
from openagents.domain.checkpoints import checkpoint_ref
from openagents.domain.errors import DomainError, InvalidInput
from openagents.store.runs import (
    Chunk,
    Progress,
    Run,
    RunStatus,
    RunStore,
    RunUsage,
    TurnMessage,
)

log = logging.getLogger(__name__)
# the reference's prompt (apps/web/app/api/generate-title/route.ts), its input cut as there
TITLE_PROMPT = (
    "You are a developer tool that names coding sessions. Generate a concise title (max 5 "
    "words) for a coding session based on the user's first message below. The title should "
    "help the user quickly identify what this session is about at a glance. Do NOT use quotes "
    "or punctuation around the title. Respond with ONLY the title, nothing else.\n\n"
    "User message:\n"
)
TITLE_INPUT = 2000
Outcome = Literal["tools", "end", "waiting", "aborted", "failed"]
CANCEL_POLL_SECONDS = 0.25
ELIDED = "[output elided to fit the model's context window]"
KEEP_RECENT_RESULTS = 4
STOPPED = "Stopped by the user."
FINISH_REASONS: dict[RunStatus, str] = {
    RunStatus.COMPLETED: "stop",
    RunStatus.WAITING: "tool-calls",
    RunStatus.ABORTED: "other",
    RunStatus.FAILED: "error",
}


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

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "outcome": self.outcome,
            "calls": list(self.calls),
            "error": self.error,
            "title": self.title,
            "seq": self.seq,
        }

    @classmethod
    def from_json(cls, data: JsonObject) -> StepResult:
        outcome = str(data.get("outcome"))
        if outcome not in ("tools", "end", "waiting", "aborted", "failed"):
            raise ValueError(f"unknown step outcome {outcome!r}")
        calls = data.get("calls")
        error = data.get("error")
        seq = data.get("seq")
        return cls(
            outcome,  # type: ignore[arg-type]
            tuple(str(c) for c in calls) if isinstance(calls, list) else (),
            str(error) if error is not None else None,
            data.get("title") is not False,  # a step checkpointed before the flag: may title
            seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
        )


@dataclass(frozen=True)
class _Kept:
    """A run's messages as its last step wrote them, for its next step in this process."""

    version: tuple[int, int]  # the run's (steps, last_seq) right after that write
    others: list[UIMessageJson]
    message: AssistantMessage


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


@dataclass(frozen=True)
class LoopConfig:
    max_steps: int = 500
    bash_timeout_seconds: int = 120
    retention: timedelta = timedelta(days=7)


class AgentLoop:
    def __init__(
        self,
        runs: RunStore,
        host: TurnHost,
        models: ModelRegistry,
        clock: Callable[[], datetime],
        config: LoopConfig,
    ) -> None:
        self._runs, self._host, self._models = runs, host, models
        self._clock, self._config = clock, config
        # the system prompt (the project's AGENTS.md / CLAUDE.md, the repository and branch),
        # built once per run in this process: it stays the same for the whole turn (as the
        # reference builds it once per request; a stable prefix is what the model's prompt
        # cache matches), and a step pays no sandbox reads nor a session read. A new invocation
        # (another Lambda) builds it again.
        self._systems: PerRun[str] = PerRun()
        # the chat's messages as the run's last step wrote them: the next step in this process
        # starts from them instead of reading the chat again (see ``_working``)
        self._kept: PerRun[_Kept] = PerRun()

    # ------------------------------------------------------------------ helpers

    def _run(self, run_id: str) -> Run | None:
        return self._runs.get(run_id)

    def _cancelled(self, run_id: str) -> CancelCheck:
        return every(CANCEL_POLL_SECONDS, lambda: self._runs.cancel_requested(run_id))

    def _message(self, run: Run) -> tuple[list[UIMessageJson], AssistantMessage]:
        messages = self._host.messages(run)
        own = next((m for m in messages if m.get("id") == run.assistant_message_id), None)
        others = [m for m in messages if m.get("id") != run.assistant_message_id]
        return others, AssistantMessage.load(own, run.assistant_message_id)

    def _working(self, run: Run) -> tuple[list[UIMessageJson], AssistantMessage]:
        """The messages a step starts from: those the run's previous step wrote in this process
        while the run is still as that write left it (its steps and last event: no other
        invocation went on meanwhile), else read from the chat. Taken out while the step
        changes them: a step that raises leaves nothing kept, its retry reads the chat."""
        kept = self._kept.pop(run.id)
        if kept is not None and kept.version == (run.steps, run.last_seq):
            return kept.others, kept.message
        return self._message(run)

    @staticmethod
    def _count(run: Run, *, model_calls: int, usage: RunUsage | None = None) -> Run:
        """One more step, with the model calls (and usage) it made (``_saved`` writes it)."""
        return run.progressed(
            Progress(
                steps=run.steps + 1,
                model_calls=run.model_calls + model_calls,
                usage=run.usage + usage if usage else run.usage,
            )
        )

    # ------------------------------------------------------------------ the steps

    def _writer(self, run: Run, since: int | None) -> EventWriter:
        """The step's writer: after a previous attempt's events (``since`` its previous step's
        seq), one that does not log them again."""
        if since is None or run.last_seq <= since:
            return EventWriter(self._runs, run.id)
        logged: list[Chunk] = []
        while page := self._runs.events(run.id, since + len(logged)):
            logged += [event.chunk for event in page]
        return ReplayWriter(self._runs, run.id, logged)

    def model_step(self, run_id: str, since: int | None = None) -> StepResult:
        run = self._run(run_id)
        if run is None or run.status.ended:
            return StepResult("end")
        if run.cancel_requested:
            return StepResult("aborted")
        if run.model_calls >= self._config.max_steps:  # a step: one model call and its tools
            return StepResult(
                "failed", error=f"The turn reached its limit of {self._config.max_steps} steps."
            )
        self._host.heartbeat(run)
        others, message = self._working(run)
        title = bool(others) and others[0].get("id") == run.message_id  # the chat's first turn
        writer = self._writer(run, since)
        if (run.last_seq if since is None else since) == 0:
            writer.add({"type": "start", "messageId": message.id})
        writer.add({"type": "start-step"})
        message.parts.append({"type": "step-start"})
        finish = self._stream(run, others, message, writer)
        if isinstance(finish, str):
            return self._model_failed(run, others, message, writer, finish)
        message.finish_streaming()
        reasons = message.metadata.get("stepFinishReasons")
        message.metadata["stepFinishReasons"] = [
            *(reasons if isinstance(reasons, list) else []),
            finish.stop_reason.value,
        ]
        message.metadata["modelId"] = run.model_id
        run = self._count(run, model_calls=1, usage=_usage(finish))
        message.metadata["usage"] = run.usage.to_json()
        calls = tuple(call.id for call in finish.message.tool_calls)
        if finish.stop_reason is StopReason.CANCELLED:
            writer.add({"type": "finish-step"})
            result = StepResult("aborted", title=title)
        elif (failure := finish.stop_reason.failure_message) is not None:
            writer.add({"type": "error", "errorText": failure})
            writer.add({"type": "finish-step"})
            result = StepResult("failed", error=failure, title=title)
        elif calls:
            result = StepResult("tools", calls, title=title)
        else:
            writer.add({"type": "finish-step"})
            result = StepResult("end", title=title)
        return self._saved(run, others, message, writer, result)

    def _stream(
        self,
        run: Run,
        others: Sequence[UIMessageJson],
        message: AssistantMessage,
        writer: EventWriter,
    ) -> Finish | str:
        """The model call streamed into ``writer`` and ``message``; a readable error instead."""
        try:
            model = self._models.model(run.model_id)
            request = self._request(run, others, message)
            return _Streamer(writer, message, run.model_calls).play(
                model.stream(request, cancelled=self._cancelled(run.id))
            )
        except ModelError as error:
            return error.message
        except SandboxError as error:
            return f"The sandbox is unavailable: {error}"
        except DomainError as error:  # e.g. the run's model is no longer configured
            return error.message

    def _saved(
        self,
        run: Run,
        others: list[UIMessageJson],
        message: AssistantMessage,
        writer: EventWriter,
        result: StepResult,
    ) -> StepResult:
        """The step's end: the message upserted with its events and the run's counts (one
        write), then kept for the run's next step."""
        seq = writer.flush(
            Progress(run.steps, run.model_calls, run.usage), self._host.stored(run, message)
        )
        self._kept.put(run.id, _Kept((run.steps, seq), others, message))
        return replace(result, seq=seq)

    def _model_failed(
        self,
        run: Run,
        others: list[UIMessageJson],
        message: AssistantMessage,
        writer: EventWriter,
        error: str,
    ) -> StepResult:
        message.finish_streaming()
        writer.add({"type": "error", "errorText": error})
        writer.add({"type": "finish-step"})
        run = self._count(run, model_calls=1)
        return self._saved(run, others, message, writer, StepResult("failed", error=error))

    def _request(
        self, run: Run, others: Sequence[UIMessageJson], message: AssistantMessage
    ) -> ModelRequest:
        system = self._system(run)
        messages = history([*others, message.to_json()])
        request = ModelRequest(system, messages, specs(), step=run.model_calls)
        window = self._models.info(run.model_id).context_window
        if estimate_tokens(request) > int(window * 0.8):
            request = replace(request, messages=_elide(request.messages))
        return request

    def _system(self, run: Run) -> str:
        system = self._systems.get(run.id)
        if system is None:
            instructions = project_instructions(self._host.workspace(run))
            system = system_prompt(self._host.project(run), instructions)
            self._systems.put(run.id, system)
        return system

    def title_step(self, run_id: str) -> str | None:
        """Name a new chat (and its session) from its first user message through the run's
        model: the title applied, or None (not a first turn, nothing automatic left to
        replace, no model, a model error, an empty answer). Never raises: the turn goes on."""
        try:
            run = self._run(run_id)
            text = self._host.untitled(run) if run is not None else None
            if run is None or not text:
                return None
            title = naming.generated_title(self._complete(run, TITLE_PROMPT + text[:TITLE_INPUT]))
            if title is not None:
                self._host.retitle(run, title)
            return title
        except Exception as error:  # a title is a nicety: the automatic one stays
            log.warning("run %s: no generated title: %s", run_id, error)
            return None

    def _complete(self, run: Run, prompt: str) -> str:
        """One tool-less model call's text (``ModelError`` for a call that did not finish)."""
        model = self._models.model(run.model_id)
        request = ModelRequest(
            "", (Message("user", (TextBlock(prompt),)),), max_tokens=64, purpose="title"
        )
        text: list[str] = []
        for event in model.stream(request, cancelled=self._cancelled(run.id)):
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, Finish) and event.stop_reason.failure_message is not None:
                raise ModelError(ModelErrorKind.INVALID_RESPONSE, event.stop_reason.failure_message)
        return "".join(text)

    def begin(self, run_id: str) -> StepResult:
        """A run that continues a message (after ``respond``) first runs the approved calls."""
        run = self._run(run_id)
        if run is None or run.status.ended:
            return StepResult("end")
        _, message = self._message(run)
        calls = tuple(
            str(part.get("toolCallId"))
            for part in message.parts
            if is_tool_part(part) and part.get("state") == "approval-responded"
        )
        return StepResult("tools", calls, seq=run.last_seq)

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
        _, message = self._message(run)
        part = message.tool_part(call_id)
        if part is None:
            raise InvalidInput("No such tool call in the chat's last turn", field="toolCallId")
        tool = TOOLS.get(tool_name(part))
        state = part.get("state")
        if state == "approval-requested":
            if approved is None:
                raise InvalidInput("approved is required to answer an approval", field="approved")
            previous = part.get("approval")
            approval: dict[str, JsonValue] = dict(previous) if isinstance(previous, dict) else {}
            approval["approved"] = approved
            if reason:
                approval["reason"] = reason
            part["approval"] = approval
            part["state"] = "approval-responded" if approved else "output-denied"
        elif state == "input-available" and tool is not None and tool.client_side:
            if answers is None:
                raise InvalidInput("answers is required to answer a question", field="answers")
            part["state"] = "output-available"
            part["output"] = {"answers": answers}
        else:
            raise InvalidInput("This tool call is not waiting for an answer", field="toolCallId")
        self._host.save(run, message)
        return Answered(sum(_pending(p) for p in message.parts), len(message.parts))

    def checkpoint(self, run_id: str) -> dict[str, JsonValue]:
        """Before the run's first tool step: the workspace saved on the run's hidden ref and
        recorded on the run, once (a replay keeps the first). A sandbox that cannot take it
        leaves the run without one (it cannot be reverted); the turn goes on."""
        run = self._run(run_id)
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

    def tool_step(
        self, run_id: str, call_id: str, *, last: bool, since: int | None = None
    ) -> StepResult:
        run = self._run(run_id)
        if run is None or run.status.ended:
            return StepResult("end")
        others, message = self._working(run)
        part = message.tool_part(call_id)
        if part is None:
            return StepResult("failed", error=f"tool call {call_id} is not in the message")
        writer = self._writer(run, since)
        if (run.last_seq if since is None else since) == 0:
            writer.add({"type": "start", "messageId": message.id})
        subagents: list[Subagent] = []  # the task tool's (its model calls are the run's)
        result = self._tool(run, part, writer, subagents)
        if last:
            writer.add({"type": "finish-step"})
        run = self._count(
            run,
            model_calls=sum(agent.result.model_calls for agent in subagents),
            usage=sum((agent.result.usage for agent in subagents), RunUsage()),
        )
        return self._saved(run, others, message, writer, result)

    def _subagent_runner(
        self, run: Run, context: ToolContext, writer: EventWriter, made: list[Subagent]
    ) -> SubagentRunner:
        def start(kind: str, task: str, instructions: str) -> JsonValue:
            agent = Subagent(
                self._models.model(run.model_id),
                TOOLS,
                context.workspace,
                cancelled=context.cancelled,
                bash_timeout_seconds=context.bash_timeout_seconds,
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
                writer.add(
                    {
                        "type": "tool-output-available",
                        "toolCallId": context.call_id,
                        "output": output,
                        "preliminary": True,
                    }
                )

            return agent.run(
                kind, task, instructions, first_step=run.model_calls, progress=progress
            ).to_json()

        return start

    def _tool(
        self, run: Run, part: Part, writer: EventWriter, subagents: list[Subagent]
    ) -> StepResult:
        call_id = str(part.get("toolCallId"))
        name = str(part.get("type", "")).removeprefix("tool-")
        arguments = part.get("input")
        arguments = dict(arguments) if isinstance(arguments, dict) else {}
        tool = TOOLS.get(name)
        if run.cancel_requested:
            return self._error(part, writer, STOPPED, StepResult("aborted"))
        if tool is None:
            return self._error(part, writer, f"Unknown tool {name!r}", StepResult("tools"))
        if tool.client_side:
            return StepResult("waiting")  # ask_user_question: answered through respond
        approval = part.get("approval")
        if isinstance(approval, dict) and approval.get("approved") is False:
            part["state"] = "output-denied"
            writer.add({"type": "tool-output-denied", "toolCallId": call_id})
            return StepResult("tools")
        approved = isinstance(approval, dict) and approval.get("approved") is True
        reason = tool.approval(arguments) or self._host.approval(run, name)
        if reason is not None and not approved:
            approval_id = f"approval-{call_id}"
            part["state"] = "approval-requested"
            part["approval"] = {"id": approval_id, "reason": reason}
            writer.add(
                {
                    "type": "tool-approval-request",
                    "approvalId": approval_id,
                    "toolCallId": call_id,
                    "reason": reason,
                }
            )
            return StepResult("waiting")
        self._host.heartbeat(run)
        context = ToolContext(
            workspace=RunWorkspace(self._host.workspace(run), run.id),
            cancelled=self._cancelled(run.id),
            call_id=call_id,
            bash_timeout_seconds=self._config.bash_timeout_seconds,
        )
        context = replace(context, subagent=self._subagent_runner(run, context, writer, subagents))
        try:
            output = tool.run(arguments, context)
        except Cancelled:
            return self._error(part, writer, STOPPED, StepResult("aborted"))
        except ToolFailure as failure:
            return self._error(part, writer, failure.message, StepResult("tools"))
        except SandboxError as error:
            return self._error(part, writer, str(error), StepResult("tools"))
        except Exception as error:  # a tool's bug is the model's error output, not a dead run
            log.exception("tool %s failed", name)
            return self._error(
                part, writer, f"{type(error).__name__}: {error}", StepResult("tools")
            )
        part["state"] = "output-available"
        part["output"] = output
        writer.add({"type": "tool-output-available", "toolCallId": call_id, "output": output})
        return StepResult("tools")

    @staticmethod
    def _error(part: Part, writer: EventWriter, text: str, result: StepResult) -> StepResult:
        part["state"] = "output-error"
        part["errorText"] = text
        writer.add(
            {"type": "tool-output-error", "toolCallId": part.get("toolCallId"), "errorText": text}
        )
        return result

    def _cost(self, run: Run) -> float | None:
        """The run's estimated cost, from its model's price (None without one)."""
        try:
            return self._models.info(run.model_id).cost(run.usage)
        except DomainError:  # the model is no longer configured
            return None

    def finalize(self, run_id: str, outcome: Outcome, error: str | None = None) -> RunStatus:
        """End the run and, when this call ended it, its follow-ups (for callers outside the
        turn's execution: a stop that was not honoured; the turn itself has a step for each)."""
        run = self._run(run_id)
        status = self.end(run_id, outcome, error)
        if run is not None and not run.status.ended:
            self.follow_up(run_id)
        return status

    def follow_up(self, run_id: str) -> str | None:
        """After the run ended: the turn-end follow-ups (audit entry, auto-commit and push,
        auto-PR, diff cache, PR state, hibernation released) through the host, each idempotent,
        so a replay of this step may run them again; the run's status (None: not ended)."""
        run = self._run(run_id)
        if run is None or not run.status.ended:
            return None
        try:
            self._host.ended(run)
        except Exception:  # the run's outcome stands; the follow-ups log their own failures
            log.exception("after run %s", run_id)
        return run.status.value

    def end(self, run_id: str, outcome: Outcome, error: str | None = None) -> RunStatus:
        """End the run: the closing chunks, the status, the chat released (idempotent)."""
        run = self._run(run_id)
        if run is None:
            return RunStatus.FAILED
        if run.status.ended:
            return run.status
        status = {
            "end": RunStatus.COMPLETED,
            "tools": RunStatus.COMPLETED,
            "waiting": RunStatus.WAITING,
            "aborted": RunStatus.ABORTED,
            "failed": RunStatus.FAILED,
        }[outcome]
        if status is RunStatus.COMPLETED and run.cancel_requested:
            status = RunStatus.ABORTED
        chunks: list[dict[str, JsonValue]] = []
        if status is RunStatus.ABORTED:
            chunks.append({"type": "abort", "reason": "stopped by the user"})
        chunks.append({"type": "finish", "finishReason": FINISH_REASONS[status]})
        self._runs.append(run_id, chunks)
        self._systems.pop(run_id)
        self._kept.pop(run_id)
        ended = self._runs.finish(
            run_id,
            status,
            at=self._clock(),
            error=error if status is RunStatus.FAILED else None,
            cost_usd=self._cost(run),
            retention=self._config.retention,
        )
        return ended.status


def _pending(part: Part) -> bool:
    """Waiting for the user: an approval, or a question (a client-side tool) not answered."""
    if not is_tool_part(part):
        return False
    if part.get("state") == "approval-requested":
        return True
    tool = TOOLS.get(tool_name(part))
    return part.get("state") == "input-available" and tool is not None and tool.client_side


def _usage(finish: Finish) -> RunUsage:
    usage = finish.usage
    return RunUsage(
        usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens
    )


def _elide(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """Older tool outputs replaced by a note (the message structure kept)."""
    total = sum(isinstance(b, ToolResult) for m in messages for b in m.content)
    seen = 0
    out: list[Message] = []
    for message in messages:
        blocks = []
        for block in message.content:
            if isinstance(block, ToolResult):
                seen += 1
                if seen <= total - KEEP_RECENT_RESULTS:
                    block = ToolResult(block.tool_call_id, ELIDED, block.is_error)
            blocks.append(block)
        out.append(Message(message.role, tuple(blocks)))
    return tuple(out)


class _Streamer:
    """Model events → chunks and parts, with the AI SDK's block ids."""

    def __init__(self, writer: EventWriter, message: AssistantMessage, step: int) -> None:
        self._writer, self._message, self._step = writer, message, step
        self._open: tuple[str, str, Part] | None = None  # (kind, id, part)
        self._blocks = 0
        self._reasoning: list[Part] = []

    def _close(self) -> None:
        if self._open is not None:
            kind, block_id, part = self._open
            part["state"] = "done"
            self._writer.add({"type": f"{kind}-end", "id": block_id})
            self._open = None

    def _delta(self, kind: str, text: str) -> None:
        if self._open is None or self._open[0] != kind:
            self._close()
            block_id = f"{kind[0]}-{self._step}-{self._blocks}"
            self._blocks += 1
            part: Part = {"type": kind, "text": "", "state": "streaming"}
            self._message.parts.append(part)
            if kind == "reasoning":
                self._reasoning.append(part)
            self._writer.add({"type": f"{kind}-start", "id": block_id})
            self._open = (kind, block_id, part)
        _, block_id, part = self._open
        part["text"] = str(part["text"]) + text
        self._writer.add({"type": f"{kind}-delta", "id": block_id, "delta": text})

    def play(self, events: Iterator[ModelEvent]) -> Finish:
        for event in events:
            if isinstance(event, ReasoningDelta):
                self._delta("reasoning", event.text)
            elif isinstance(event, TextDelta):
                self._delta("text", event.text)
            elif isinstance(event, ToolCallComplete):
                self._close()
                self._message.parts.append(
                    {
                        "type": f"tool-{event.name}",
                        "toolCallId": event.id,
                        "state": "input-available",
                        "input": dict(event.input),
                    }
                )
                self._writer.add(
                    {
                        "type": "tool-input-available",
                        "toolCallId": event.id,
                        "toolName": event.name,
                        "input": dict(event.input),
                    }
                )
            elif isinstance(event, Finish):
                self._close()
                self._sign(event)
                return event
        raise ModelError(ModelErrorKind.INVALID_RESPONSE, "The model's answer ended early.")

    def _sign(self, finish: Finish) -> None:
        """Keep reasoning signatures (Bedrock) on the parts, to send them back next step."""
        blocks = [b for b in finish.message.content if isinstance(b, ReasoningBlock)]
        for part, block in zip(self._reasoning, blocks, strict=False):
            if block.signature:
                part["providerMetadata"] = {"openagents": {"signature": block.signature}}
