"""The model port (``port``), the registry of configured models (``registry``) and three
adapters: Bedrock Converse (``bedrock``), OpenAI-compatible chat completions
(``openai_compat``) and the scripted model (``scripted``). Importing this package imports no SDK:
each adapter imports its own when the registry first builds it."""

from openagents.agent.models.cancel import every, never
from openagents.agent.models.port import (
    CancelCheck,
    ChatModel,
    ContentBlock,
    Finish,
    JsonObject,
    JsonValue,
    Message,
    ModelError,
    ModelErrorKind,
    ModelEvent,
    ModelRequest,
    ModelUnavailable,
    ReasoningBlock,
    ReasoningDelta,
    StopReason,
    TextBlock,
    TextDelta,
    ToolCall,
    ToolCallComplete,
    ToolResult,
    ToolSpec,
    Usage,
)
from openagents.agent.models.registry import (
    NO_MODELS,
    SCRIPTED_MODEL_ID,
    ModelId,
    ModelInfo,
    ModelRegistry,
    build_registry,
)
from openagents.agent.models.tokens import estimate_tokens

__all__ = [
    "NO_MODELS",
    "SCRIPTED_MODEL_ID",
    "CancelCheck",
    "ChatModel",
    "ContentBlock",
    "Finish",
    "JsonObject",
    "JsonValue",
    "Message",
    "ModelError",
    "ModelErrorKind",
    "ModelEvent",
    "ModelId",
    "ModelInfo",
    "ModelRegistry",
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
    "build_registry",
    "estimate_tokens",
    "every",
    "never",
]
