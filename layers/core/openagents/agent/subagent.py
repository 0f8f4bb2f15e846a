"""Subagents, the ``task`` tool's workers: a model loop of their own, inside one tool call of
the turn, with a subset of the tools and a budget of ``SUBAGENT_MAX_STEPS`` model calls.

- ``explorer`` is read-only research (read, grep, glob, bash for read-only commands);
  ``executor`` implements (read, write, edit, grep, glob, bash).
- A subagent cannot ask the user anything: a call that needs approval, or a client-side tool,
  comes back to it as an error it can work around.
- Its model calls count as the run's (``first_step`` on): the scripted model's k-th response
  stays the run's k-th model call, and the run's usage includes the subagent's.
- What the parent model sees is the subagent's final text; the tool's output also carries
  its steps, model calls, usage and the tools it called. ``progress`` is told after each step
  (the turn streams it as the tool's preliminary output).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from openagents.agent import tool_runner
from openagents.agent.models.cancel import never
from openagents.agent.models.port import (
    CancelCheck,
    ChatModel,
    Finish,
    JsonValue,
    Message,
    ModelError,
    ModelErrorKind,
    ModelRequest,
    StopReason,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from openagents.agent.sandbox import Workspace
from openagents.agent.tools.base import Cancelled, Tool, ToolContext, ToolFailure, cap

log = logging.getLogger(__name__)
SUBAGENT_MAX_STEPS = 100
RESULT_CHARS = 20_000  # what one tool result may give the subagent's model
READ_ONLY = ("read", "grep", "glob", "bash")
FULL = ("read", "write", "edit", "grep", "glob", "bash")

_RULES = """You work autonomously: nobody answers questions, so make reasonable assumptions and
say which. Use workspace-relative paths; commands run in the workspace root.
Your final message is what the parent agent receives: a short **Summary** of what you did and
the **Answer** (or result), with the relevant file paths."""

_PROMPTS = {
    "explorer": "You are an explorer: a fast, READ-ONLY subagent that searches and reads a "
    "codebase to answer a question. Never create, modify or delete files, and run only "
    "read-only commands (ls, cat, git status, git log, git diff, find).",
    "executor": "You are an executor: a subagent that implements a well-specified task in the "
    "workspace (create and edit files, run commands and tests). Verify your work before you "
    "finish.",
}
TOOLSETS: dict[str, tuple[str, ...]] = {"explorer": READ_ONLY, "executor": FULL}


@dataclass(frozen=True)
class SubagentProgress:
    steps: int
    tool_calls: tuple[str, ...]


@dataclass
class SubagentResult:
    kind: str
    summary: str
    model_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    tool_calls: list[str] = field(default_factory=list)
    stopped_at_limit: bool = False

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "subagentType": self.kind,
            "summary": self.summary,
            "modelCalls": self.model_calls,
            "toolCalls": list(self.tool_calls),
            "usage": self.usage.to_json(),
            "reachedStepLimit": self.stopped_at_limit,
        }


def system_prompt(kind: str, task: str, instructions: str) -> str:
    return (
        f"{_PROMPTS[kind]}\n\n{_RULES}\n\nWorking directory: . (the workspace root)\n\n"
        f"## Your task\n{task}\n\n## Detailed instructions\n{instructions}"
    )


class Subagent:
    """One subagent run (``run``), on the turn's model and workspace."""

    def __init__(
        self,
        model: ChatModel,
        tools: dict[str, Tool],
        workspace: Workspace,
        *,
        cancelled: CancelCheck = never,
        bash_timeout_seconds: int = 120,
        max_steps: int = SUBAGENT_MAX_STEPS,
        parent_call_id: str | None = None,
    ) -> None:
        self._model, self._tools, self._workspace = model, tools, workspace
        self._parent = parent_call_id  # the task call's: what the inner calls' ids derive from
        self._cancelled, self._bash_timeout = cancelled, bash_timeout_seconds
        self._max_steps = max_steps
        self.result = SubagentResult("", "")  # so far (the counts survive a stop or a failure)

    def run(
        self,
        kind: str,
        task: str,
        instructions: str,
        *,
        first_step: int,
        progress: Callable[[SubagentProgress], None] = lambda _: None,
    ) -> SubagentResult:
        result = self.result = SubagentResult(kind, "")
        names = TOOLSETS[kind]
        specs = tuple(
            ToolSpec(tool.name, tool.description, tool.input_schema)
            for name in names
            if (tool := self._tools.get(name)) is not None
        )
        system = system_prompt(kind, task, instructions)
        messages: list[Message] = [
            Message.user("Complete this task and give a summary of what you accomplished.")
        ]
        while result.model_calls < self._max_steps:
            if self._cancelled():
                raise Cancelled
            finish = self._call(
                ModelRequest(system, tuple(messages), specs, step=first_step + result.model_calls)
            )
            result.model_calls += 1
            result.usage = result.usage + finish.usage
            messages.append(finish.message)
            if finish.message.text.strip():
                result.summary = finish.message.text.strip()
            if finish.stop_reason is StopReason.CANCELLED:
                raise Cancelled
            failure = finish.stop_reason.failure_message
            if failure is not None:
                raise ToolFailure(f"The subagent's model failed: {failure}")
            calls = finish.message.tool_calls
            if not calls:
                return result
            results = [self._tool(call, names, result, i) for i, call in enumerate(calls)]
            messages.append(Message.tool_results(results))
            progress(SubagentProgress(result.model_calls, tuple(result.tool_calls)))
        result.stopped_at_limit = True
        result.summary = (
            f"The subagent reached its limit of {self._max_steps} steps. Its last words: "
            f"{result.summary or '(none)'}"
        )
        return result

    def _call(self, request: ModelRequest) -> Finish:
        try:
            for event in self._model.stream(request, cancelled=self._cancelled):
                if isinstance(event, Finish):
                    return event
        except ModelError as error:
            raise ToolFailure(f"The subagent's model failed: {error.message}") from None
        raise ToolFailure(
            ModelError(ModelErrorKind.INVALID_RESPONSE, "The model's answer ended early.").message
        )

    def _call_id(self, call: ToolCall, step: int, index: int) -> str:
        """The id an inner call runs under (its ``bash`` exec key, its markers): from the task
        call's id, the subagent's step and the call's place in it, and what it asks, so a task
        step run again after a restart collects the commands its first attempt ran (the model's
        own ids differ from one attempt to the next), and one asking something else runs it."""
        if self._parent is None:
            return call.id
        asked = json.dumps([call.name, call.input], sort_keys=True, default=str).encode()
        return f"{self._parent}/{step}.{index}.{hashlib.sha256(asked).hexdigest()[:12]}"

    def _tool(
        self, call: ToolCall, allowed: tuple[str, ...], result: SubagentResult, index: int = 0
    ) -> ToolResult:
        result.tool_calls.append(call.name)
        tool = self._tools.get(call.name)
        if tool is None or call.name not in allowed:
            return ToolResult(call.id, f"Unknown tool {call.name!r} for this subagent", True)
        reason = tool.approval(call.input)
        if reason is not None or tool.client_side:
            why = f" ({reason})" if reason else ""
            return ToolResult(
                call.id,
                f"This call needs the user's approval{why}, which a subagent cannot ask for. "
                "Do without it, or say in your summary what the parent agent should do.",
                True,
            )
        context = ToolContext(
            workspace=self._workspace,
            cancelled=self._cancelled,
            call_id=self._call_id(call, result.model_calls, index),
            bash_timeout_seconds=self._bash_timeout,
        )
        done = tool_runner.call(tool, call.input, context)  # the turn's error ladder
        if isinstance(done, tool_runner.ToolError):
            return ToolResult(call.id, done.text, True)
        output = done.output
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        return ToolResult(call.id, cap(text, RESULT_CHARS))
