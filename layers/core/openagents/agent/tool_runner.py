"""Tool calls, for the turn and for its subagents: dispatch by name, the approval policy, the
error ladder, and the user's answer to an approval or a question (the API's ``respond``).

The error ladder (``call``): a tool's ``ToolFailure``, a sandbox error and a tool's own bug are
the model's error output, never a dead run; only ``Cancelled`` (the user stopped the turn)
goes up. The turn (``ToolRunner.run``) asks before a call its tool or the session wants
approved, waits for a client-side tool's answer, and records each state on the call's part
with its chunk; a subagent, which cannot ask, gets those as errors (``subagent.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from openagents.agent.chunks import (
    ToolApprovalRequestChunk,
    ToolOutputAvailableChunk,
    ToolOutputDeniedChunk,
    ToolOutputErrorChunk,
)
from openagents.agent.models.port import JsonObject, JsonValue
from openagents.agent.parts import (
    Approval,
    ToolApprovalRequested,
    ToolApprovalResponded,
    ToolInputAvailable,
    ToolPart,
)
from openagents.agent.sandbox import SandboxError
from openagents.agent.tools.base import Cancelled, Tool, ToolContext, ToolFailure
from openagents.agent.turn import Answered
from openagents.agent.ui import AssistantMessage
from openagents.agent.ui_stream import UIStream
from openagents.domain.errors import InvalidInput

log = logging.getLogger(__name__)
STOPPED = "Stopped by the user."
CallOutcome = Literal["tools", "waiting", "aborted"]


@dataclass(frozen=True)
class ToolOutput:
    output: JsonValue


@dataclass(frozen=True)
class ToolError:
    text: str


def call(tool: Tool, arguments: JsonObject, context: ToolContext) -> ToolOutput | ToolError:
    """Run ``tool``: its output, or the error its caller's model sees (``Cancelled`` raised)."""
    try:
        return ToolOutput(tool.run(arguments, context))
    except Cancelled:
        raise
    except ToolFailure as failure:
        return ToolError(failure.message)
    except SandboxError as error:
        return ToolError(str(error))
    except Exception as error:  # a tool's bug is the model's error output, not a dead run
        log.exception("tool %s failed", tool.name)
        return ToolError(f"{type(error).__name__}: {error}")


class ToolRunner:
    def __init__(self, tools: Mapping[str, Tool]) -> None:
        self._tools = tools

    def run(
        self,
        message: AssistantMessage,
        part: ToolPart,
        stream: UIStream,
        *,
        stopped: bool,
        asked: Callable[[str], str | None],
        context: Callable[[], ToolContext],
    ) -> CallOutcome:
        """The turn's call of ``part``: its next state on ``message``, its chunk on
        ``stream``. ``asked(name)``: why the session wants any call of that tool approved;
        ``context()``: the call's context, made only when the tool runs."""
        tool = self._tools.get(part.tool_name)
        if stopped:
            return self._error(message, part, stream, STOPPED, "aborted")
        if tool is None:
            text = f"Unknown tool {part.tool_name!r}"
            return self._error(message, part, stream, text, "tools")
        if tool.client_side:
            return "waiting"  # ask_user_question: answered through respond
        approval = part.approval
        if approval is not None and approval.approved is False:
            message.put(part.denied())
            stream.add(ToolOutputDeniedChunk(tool_call_id=part.tool_call_id))
            return "tools"
        approved = approval is not None and approval.approved is True
        reason = tool.approval(part.arguments) or asked(part.tool_name)
        if reason is not None and not approved:
            approval_id = f"approval-{part.tool_call_id}"
            message.put(part.asked(Approval(id=approval_id, reason=reason)))
            stream.add(
                ToolApprovalRequestChunk(
                    approval_id=approval_id, tool_call_id=part.tool_call_id, reason=reason
                )
            )
            return "waiting"
        try:
            done = call(tool, part.arguments, context())
        except Cancelled:
            return self._error(message, part, stream, STOPPED, "aborted")
        if isinstance(done, ToolError):
            return self._error(message, part, stream, done.text, "tools")
        message.put(part.available(done.output))
        stream.add(ToolOutputAvailableChunk(tool_call_id=part.tool_call_id, output=done.output))
        return "tools"

    @staticmethod
    def _error(
        message: AssistantMessage,
        part: ToolPart,
        stream: UIStream,
        text: str,
        outcome: CallOutcome,
    ) -> CallOutcome:
        message.put(part.errored(text))
        stream.add(ToolOutputErrorChunk(tool_call_id=part.tool_call_id, error_text=text))
        return outcome

    def approved(self, message: AssistantMessage) -> tuple[str, ...]:
        """The calls the user approved, to run first when a run continues the message."""
        return tuple(
            part.tool_call_id for part in message.parts if isinstance(part, ToolApprovalResponded)
        )

    def answer(
        self,
        message: AssistantMessage,
        call_id: str,
        *,
        approved: bool | None,
        reason: str | None,
        answers: JsonValue | None,
    ) -> Answered:
        """Record the user's answer to an approval or a question on ``message``."""
        part = message.tool_part(call_id)
        if part is None:
            raise InvalidInput("No such tool call in the chat's last turn", field="toolCallId")
        if isinstance(part, ToolApprovalRequested):
            if approved is None:
                raise InvalidInput("approved is required to answer an approval", field="approved")
            previous = part.approval or Approval()
            approval = previous.model_copy(
                update={"approved": approved, "reason": reason or previous.reason}
            )
            message.put(part.responded(approval) if approved else part.denied(approval))
        elif isinstance(part, ToolInputAvailable) and self._client_side(part):
            if answers is None:
                raise InvalidInput("answers is required to answer a question", field="answers")
            message.put(part.available({"answers": answers}))
        else:
            raise InvalidInput("This tool call is not waiting for an answer", field="toolCallId")
        return Answered(self.pending(message), len(message.parts))

    def pending(self, message: AssistantMessage) -> int:
        """The calls waiting for the user: an approval, or a question not answered."""
        return sum(
            isinstance(part, ToolApprovalRequested)
            or (isinstance(part, ToolInputAvailable) and self._client_side(part))
            for part in message.parts
        )

    def in_model_step(self, part: ToolPart) -> bool:
        """The call runs in the model step that made it (``Tool.in_model_step``)."""
        tool = self._tools.get(part.tool_name)
        return tool is not None and tool.in_model_step and not tool.client_side

    def _client_side(self, part: ToolPart) -> bool:
        tool = self._tools.get(part.tool_name)
        return tool is not None and tool.client_side
