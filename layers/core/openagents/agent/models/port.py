"""The model port: what the agent loop sends a model and what it streams back.

Pure domain types, no SDK. An adapter (``bedrock.py``, ``openai_compat.py``, ``scripted.py``)
turns a ``ModelRequest`` into its provider's wire format and the provider's stream into
``ModelEvent``s. One call of ``ChatModel.stream`` is one model step of a turn:

    for event in model.stream(request, cancelled=check):
        match event:
            case ReasoningDelta(text=t): ...     # reasoning-delta chunk
            case TextDelta(text=t): ...          # text-delta chunk
            case ToolCallComplete() as call: ... # tool-input-available
            case Finish() as finish: ...         # always last; finish.message joins history

Every stream that does not raise ends with exactly one ``Finish``. A stop request (``cancelled()``
turning true; it is polled at least every 100 ms and between chunks) ends the stream within 2 s
with ``Finish(stop_reason=CANCELLED)`` carrying the partial message. Failures raise
``ModelError`` (with ``kind``) — never a provider exception — from the call or while iterating,
so keep both inside one ``try``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol, TypeAlias

from openagents.agent.models.cancel import CancelCheck, never
from openagents.domain.errors import InvalidInput
from openagents.domain.usage import Usage

__all__ = [
    "CancelCheck",  # the port's own: ``ChatModel.stream`` takes one (``cancel.py``)
    "ChatModel",
    "ContentBlock",
    "DocumentBlock",
    "Finish",
    "ImageBlock",
    "ImageType",
    "JsonObject",
    "JsonValue",
    "Message",
    "ModelError",
    "ModelErrorKind",
    "ModelEvent",
    "ModelRequest",
    "ModelUnavailable",
    "ReasoningBlock",
    "ReasoningDelta",
    "StopReason",
    "TextBlock",
    "TextDelta",
    "ToolCall",
    "ToolCallComplete",
    "ToolResult",
    "ToolSpec",
    "Usage",
]

JsonValue: TypeAlias = (
    bool | int | float | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None
)
JsonObject: TypeAlias = Mapping[str, JsonValue]


# --- the request ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TextBlock:
    text: str


@dataclass(frozen=True)
class ReasoningBlock:
    """The model's reasoning. ``signature`` is the provider's proof (Bedrock/Anthropic) needed to
    send the block back in a later step; blocks without one are dropped by adapters that need it."""

    text: str
    signature: str | None = None


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model made (in an assistant message)."""

    id: str
    name: str
    input: JsonObject


@dataclass(frozen=True)
class ToolResult:
    """The outcome of a tool call (in a user message), matched by ``tool_call_id``."""

    tool_call_id: str
    content: str
    is_error: bool = False


ImageType: TypeAlias = Literal["image/png", "image/jpeg", "image/webp", "image/gif"]


@dataclass(frozen=True)
class ImageBlock:
    """An image the user attached (in a user message): its bytes, type sniffed from them."""

    media_type: ImageType
    data: bytes = field(repr=False)

    @property
    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{base64.b64encode(self.data).decode()}"


@dataclass(frozen=True)
class DocumentBlock:
    """A text file the user attached (in a user message): its name, type and UTF-8 text.
    Both adapters send it inline, as ``inline`` text."""

    name: str
    media_type: str
    text: str

    @property
    def inline(self) -> str:
        name = self.name.replace('"', "'")
        return f'<file name="{name}" type="{self.media_type}">\n{self.text}\n</file>'


ContentBlock: TypeAlias = (
    TextBlock | ReasoningBlock | ToolCall | ToolResult | ImageBlock | DocumentBlock
)
Role: TypeAlias = Literal["user", "assistant"]


@dataclass(frozen=True)
class Message:
    """One turn of the conversation. Tool results travel in ``user`` messages (as in Bedrock
    Converse); adapters for APIs with a ``tool`` role split them out."""

    role: Role
    content: tuple[ContentBlock, ...]

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", (TextBlock(text),))

    @classmethod
    def tool_results(cls, results: Sequence[ToolResult]) -> Message:
        return cls("user", tuple(results))

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if isinstance(block, TextBlock))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(block for block in self.content if isinstance(block, ToolCall))


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: JsonObject  # a JSON Schema object: {"type": "object", "properties": ...}


@dataclass(frozen=True)
class ModelRequest:
    """One model step. ``step`` is the index of this model call within the run (0 for the first,
    i.e. the number of model calls the run made before it) and ``purpose`` says whether it is
    a step of the turn, the call that names a new chat (``title``) or a generation the git
    routes ask for (``commit_message``, ``pull_request``); only the scripted model reads them."""

    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 8192
    step: int = 0
    purpose: Literal["turn", "title", "commit_message", "pull_request"] = "turn"


# --- the streamed answer -------------------------------------------------------------------


class StopReason(StrEnum):
    END_TURN = "end_turn"  # the model is done: the turn ends
    TOOL_USE = "tool_use"  # run the tool calls, then call the model again
    MAX_TOKENS = "max_tokens"  # the answer hit max_tokens
    STOP_SEQUENCE = "stop_sequence"
    CONTENT_FILTER = "content_filter"  # a guardrail or content filter stopped the answer
    CONTEXT_WINDOW = "context_window"  # the model's context window is full
    MALFORMED = "malformed"  # the model produced output or a tool call it could not finish
    CANCELLED = "cancelled"  # stop was requested: the partial message is in Finish.message

    @property
    def failure_message(self) -> str | None:
        """A readable reason to fail the run, for the stops that mean the model could not answer;
        None for the normal ones (end_turn, tool_use, max_tokens, stop_sequence, cancelled)."""
        return _FAILURES.get(self)


_FAILURES = {
    StopReason.CONTENT_FILTER: "The model's answer was blocked by a content filter.",
    StopReason.CONTEXT_WINDOW: "The conversation no longer fits in the model's context window.",
    StopReason.MALFORMED: "The model produced malformed output or a malformed tool call.",
}


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallComplete:
    """A tool call whose input has fully arrived (``tool-input-available``)."""

    id: str
    name: str
    input: JsonObject

    @property
    def call(self) -> ToolCall:
        return ToolCall(self.id, self.name, self.input)


@dataclass(frozen=True)
class Finish:
    """The last event of every stream. ``message`` is the whole assistant message of the step
    (reasoning with signatures, text, tool calls), ready to append to the history."""

    stop_reason: StopReason
    usage: Usage
    message: Message = field(default_factory=lambda: Message("assistant", ()))


ModelEvent: TypeAlias = ReasoningDelta | TextDelta | ToolCallComplete | Finish


# --- errors --------------------------------------------------------------------------------


class ModelErrorKind(StrEnum):
    AUTH = "auth"  # bad, missing or expired credentials; no access to the model
    CONTEXT_WINDOW = "context_window"  # the request does not fit the model's context
    CONTENT_FILTER = "content_filter"  # the provider refused the request's content
    THROTTLED = "throttled"  # rate limited or out of quota (after our retries)
    UNAVAILABLE = "unavailable"  # the provider or the model is down, unreachable or unknown
    INVALID_REQUEST = "invalid_request"  # the provider rejected the request
    INVALID_RESPONSE = "invalid_response"  # the provider's answer could not be understood
    SCRIPT = "script"  # the scripted model's file is missing, invalid or exhausted


class ModelError(Exception):
    """A model call failed. ``message`` is readable and safe to show (no keys); ``retryable``
    says whether the same call may succeed later."""

    def __init__(self, kind: ModelErrorKind, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retryable = retryable

    def __repr__(self) -> str:
        return f"ModelError({self.kind.value!r}, {self.message!r})"

    def __reduce__(self) -> tuple[Any, ...]:  # survives pickling (threads, processes, engines)
        return (_model_error, (self.kind.value, self.message, self.retryable))


def _model_error(kind: str, message: str, retryable: bool) -> ModelError:
    return ModelError(ModelErrorKind(kind), message, retryable=retryable)


class ModelUnavailable(InvalidInput):
    """An unknown, malformed or unconfigured model id (the API answers 400 on ``modelId``)."""

    code = "model_unavailable"

    def __init__(self, message: str, *, field: str | None = "modelId") -> None:
        super().__init__(message, field=field)


# --- the port ------------------------------------------------------------------------------


class ChatModel(Protocol):
    """One configured model (``provider/model``). Adapters are cheap to keep and thread-safe:
    the registry hands out one instance per model id."""

    model_id: str

    def stream(
        self, request: ModelRequest, *, cancelled: CancelCheck = never
    ) -> Iterator[ModelEvent]:
        """Stream one model step. Ends with one ``Finish``; raises ``ModelError``."""
        ...
