"""The parts of the assistant UI message a run builds, typed after the AI SDK's ``UIMessage``
parts: ``step-start``; ``text`` and ``reasoning`` (``{text, state: streaming|done}``); and the
tool part ``tool-<name>``, one class per state (a union discriminated on ``state``):

    input-available → approval-requested → approval-responded → output-available
                                         ↘ output-denied        ↘ output-error

A tool part moves on by becoming a part of its next state (``errored``, ``available``,
``denied``, ``asked``, ``responded``): the message replaces it (``AssistantMessage.put``).
Any other part (``file``, ``data-*``, a state this code does not write) is kept as it came
(``OtherPart``). Parts are validated once, when a stored message is loaded (``parse_parts``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, ClassVar, Literal, TypeAlias

from pydantic import Discriminator, Tag, TypeAdapter, ValidationError, field_validator

from openagents.agent.models.port import JsonValue
from openagents.agent.ui_model import Json, UIModel

TOOL_PREFIX = "tool-"
TOOL_STATES = frozenset(
    {
        "input-available",
        "approval-requested",
        "approval-responded",
        "output-available",
        "output-error",
        "output-denied",
    }
)


class StepStartPart(UIModel):
    type: Literal["step-start"] = "step-start"


class _BlockPart(UIModel):
    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"state", "providerMetadata"})
    text: str = ""
    state: Literal["streaming", "done"] | None = None
    provider_metadata: Json = None


class TextPart(_BlockPart):
    type: Literal["text"] = "text"


class ReasoningPart(_BlockPart):
    type: Literal["reasoning"] = "reasoning"

    @property
    def signature(self) -> str | None:
        """Bedrock's reasoning signature, kept to send the block back next step."""
        meta = self.provider_metadata
        ours = meta.get("openagents") if isinstance(meta, dict) else None
        signature = ours.get("signature") if isinstance(ours, dict) else None
        return signature if isinstance(signature, str) else None


class Approval(UIModel):
    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"id", "approved", "reason"})
    id: str | None = None
    approved: bool | None = None
    reason: str | None = None


class ToolPart(UIModel):
    """A tool call's part; its subclass is its state."""

    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"approval"})
    type: str
    tool_call_id: str
    input: Json = None
    approval: Approval | None = None

    @field_validator("type")
    @classmethod
    def _tool_type(cls, value: str) -> str:
        if not value.startswith(TOOL_PREFIX):
            raise ValueError(f"a tool part's type starts with {TOOL_PREFIX!r}")
        return value

    def _nested(self) -> tuple[object, ...]:
        return () if self.approval is None else (self.approval.to_json(),)

    def _json_form(self, nested: tuple[object, ...]) -> dict[str, JsonValue]:
        data = super()._json_form(nested)
        if nested:
            data["approval"] = nested[0]  # type: ignore[assignment]  # the approval's form
        return data

    @property
    def tool_name(self) -> str:
        return self.type.removeprefix(TOOL_PREFIX)

    @property
    def arguments(self) -> dict[str, JsonValue]:
        return dict(self.input) if isinstance(self.input, dict) else {}

    def _next(self) -> dict[str, JsonValue | Approval | None]:
        return {
            "type": self.type,
            "tool_call_id": self.tool_call_id,
            "input": self.input,
            "approval": self.approval,
            **(self.model_extra or {}),
        }

    def errored(self, text: str) -> ToolOutputError:
        return ToolOutputError.model_validate({**self._next(), "error_text": text})

    def available(self, output: JsonValue) -> ToolOutputAvailable:
        return ToolOutputAvailable.model_validate({**self._next(), "output": output})

    def denied(self, approval: Approval | None = None) -> ToolOutputDenied:
        return ToolOutputDenied.model_validate(
            {**self._next(), "approval": approval or self.approval}
        )

    def asked(self, approval: Approval) -> ToolApprovalRequested:
        return ToolApprovalRequested.model_validate({**self._next(), "approval": approval})

    def responded(self, approval: Approval) -> ToolApprovalResponded:
        return ToolApprovalResponded.model_validate({**self._next(), "approval": approval})


class ToolInputAvailable(ToolPart):
    state: Literal["input-available"] = "input-available"


class ToolApprovalRequested(ToolPart):
    state: Literal["approval-requested"] = "approval-requested"


class ToolApprovalResponded(ToolPart):
    state: Literal["approval-responded"] = "approval-responded"


class ToolOutputAvailable(ToolPart):
    state: Literal["output-available"] = "output-available"
    output: Json


class ToolOutputError(ToolPart):
    state: Literal["output-error"] = "output-error"
    error_text: str


class ToolOutputDenied(ToolPart):
    state: Literal["output-denied"] = "output-denied"


ToolState: TypeAlias = (
    ToolInputAvailable
    | ToolApprovalRequested
    | ToolApprovalResponded
    | ToolOutputAvailable
    | ToolOutputError
    | ToolOutputDenied
)


class OtherPart(UIModel):
    """A part this code does not write, kept as it came."""

    type: str


def _kind(value: object) -> str:
    if isinstance(value, Mapping):
        kind, state = value.get("type"), value.get("state")
    else:
        kind, state = getattr(value, "type", None), getattr(value, "state", None)
    if kind in ("step-start", "text", "reasoning"):
        return str(kind)
    if isinstance(kind, str) and kind.startswith(TOOL_PREFIX) and state in TOOL_STATES:
        return str(state)
    return "other"


Part: TypeAlias = Annotated[
    Annotated[StepStartPart, Tag("step-start")]
    | Annotated[TextPart, Tag("text")]
    | Annotated[ReasoningPart, Tag("reasoning")]
    | Annotated[ToolInputAvailable, Tag("input-available")]
    | Annotated[ToolApprovalRequested, Tag("approval-requested")]
    | Annotated[ToolApprovalResponded, Tag("approval-responded")]
    | Annotated[ToolOutputAvailable, Tag("output-available")]
    | Annotated[ToolOutputError, Tag("output-error")]
    | Annotated[ToolOutputDenied, Tag("output-denied")]
    | Annotated[OtherPart, Tag("other")],
    Discriminator(_kind),
]
_PART: TypeAdapter[Part] = TypeAdapter(Part)


def parse_parts(data: Iterable[object]) -> list[Part]:
    """Stored parts, typed; one that is not a valid part of its kind is kept as it came, and
    anything that is not a part at all (no string ``type``) is left out."""
    parts: list[Part] = []
    for raw in data:
        try:
            parts.append(_PART.validate_python(raw))
        except ValidationError:
            try:
                parts.append(OtherPart.model_validate(raw))
            except ValidationError:
                continue
    return parts
