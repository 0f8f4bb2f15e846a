"""The chunks of a run's UI message stream, typed after the AI SDK's ``UIMessageChunk`` (a
union discriminated on ``type``): the ones a turn writes, each validated where it is made and
turned to JSON once, where it leaves for the run's event log (``ui_stream.UIStream``). The
recorded runs the web app checks against ``ai``'s ``uiMessageChunkSchema``
(``web/src/agent/fixtures/``) parse as these (``tests/agent/test_ui_types.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal, TypeAlias

from pydantic import Field, TypeAdapter

from openagents.agent.models.port import JsonValue
from openagents.agent.ui_model import Json, UIModel

FinishReason = Literal["stop", "length", "content-filter", "tool-calls", "error", "other"]


class DataWaitingChunk(UIModel):
    """The turn waits (the model's capacity: its quota throttled every retry) until
    ``data.retryAt``; one part per message (the same ``id``), updated in place by each wait."""

    type: Literal["data-waiting"] = "data-waiting"
    id: str = "waiting"
    data: Json


class StartChunk(UIModel):
    type: Literal["start"] = "start"
    message_id: str


class StartStepChunk(UIModel):
    type: Literal["start-step"] = "start-step"


class FinishStepChunk(UIModel):
    type: Literal["finish-step"] = "finish-step"


class FinishChunk(UIModel):
    type: Literal["finish"] = "finish"
    finish_reason: FinishReason


class AbortChunk(UIModel):
    type: Literal["abort"] = "abort"
    reason: str


class ErrorChunk(UIModel):
    type: Literal["error"] = "error"
    error_text: str


class TextStartChunk(UIModel):
    type: Literal["text-start"] = "text-start"
    id: str


class TextDeltaChunk(UIModel):
    type: Literal["text-delta"] = "text-delta"
    id: str
    delta: str


class TextEndChunk(UIModel):
    type: Literal["text-end"] = "text-end"
    id: str


class ReasoningStartChunk(UIModel):
    type: Literal["reasoning-start"] = "reasoning-start"
    id: str


class ReasoningDeltaChunk(UIModel):
    type: Literal["reasoning-delta"] = "reasoning-delta"
    id: str
    delta: str


class ReasoningEndChunk(UIModel):
    type: Literal["reasoning-end"] = "reasoning-end"
    id: str


class ToolInputAvailableChunk(UIModel):
    type: Literal["tool-input-available"] = "tool-input-available"
    tool_call_id: str
    tool_name: str
    input: Json


class ToolApprovalRequestChunk(UIModel):
    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"reason"})
    type: Literal["tool-approval-request"] = "tool-approval-request"
    approval_id: str
    tool_call_id: str
    reason: str | None = None  # ours (a loose key to the SDK): why it asks


class ToolOutputAvailableChunk(UIModel):
    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"preliminary"})
    type: Literal["tool-output-available"] = "tool-output-available"
    tool_call_id: str
    output: Json
    preliminary: bool | None = None


class ToolOutputErrorChunk(UIModel):
    type: Literal["tool-output-error"] = "tool-output-error"
    tool_call_id: str
    error_text: str


class ToolOutputDeniedChunk(UIModel):
    type: Literal["tool-output-denied"] = "tool-output-denied"
    tool_call_id: str


UIChunk: TypeAlias = Annotated[
    StartChunk
    | StartStepChunk
    | FinishStepChunk
    | FinishChunk
    | AbortChunk
    | ErrorChunk
    | TextStartChunk
    | TextDeltaChunk
    | TextEndChunk
    | ReasoningStartChunk
    | ReasoningDeltaChunk
    | ReasoningEndChunk
    | ToolInputAvailableChunk
    | ToolApprovalRequestChunk
    | ToolOutputAvailableChunk
    | ToolOutputErrorChunk
    | ToolOutputDeniedChunk
    | DataWaitingChunk,
    Field(discriminator="type"),
]
_CHUNK: TypeAdapter[UIChunk] = TypeAdapter(UIChunk)
BLOCK_STARTS: dict[str, type[TextStartChunk | ReasoningStartChunk]] = {
    "text": TextStartChunk,
    "reasoning": ReasoningStartChunk,
}
BLOCK_DELTAS: dict[str, type[TextDeltaChunk | ReasoningDeltaChunk]] = {
    "text": TextDeltaChunk,
    "reasoning": ReasoningDeltaChunk,
}
BLOCK_ENDS: dict[str, type[TextEndChunk | ReasoningEndChunk]] = {
    "text": TextEndChunk,
    "reasoning": ReasoningEndChunk,
}


def parse_chunk(data: Mapping[str, JsonValue]) -> UIChunk:
    """A chunk read back (a run's log, a recording), typed (pydantic's ``ValidationError`` for
    one that is not a chunk a turn writes)."""
    return _CHUNK.validate_python(data)
