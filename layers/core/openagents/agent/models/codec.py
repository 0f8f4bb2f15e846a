"""The model-visible history as JSON (the scripted model's request log; a recorded request read
back): ``{"role", "content": [{"type": "text" | "reasoning" | "toolCall" | "toolResult" |
"image" | "document", ...}]}``, an image's bytes in base64."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from openagents.agent.models.port import (
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    JsonValue,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCall,
    ToolResult,
)


def message_json(message: Message) -> dict[str, JsonValue]:
    return {"role": message.role, "content": [_block_json(block) for block in message.content]}


def message_from_json(data: Mapping[str, Any]) -> Message:
    role = data["role"]
    if role not in ("user", "assistant"):
        raise ValueError(f"unknown role {role!r}")
    return Message(role, tuple(_block_from_json(block) for block in data["content"]))


_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})


def _block_json(block: ContentBlock) -> dict[str, JsonValue]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ReasoningBlock):
        return {"type": "reasoning", "text": block.text, "signature": block.signature}
    if isinstance(block, ToolCall):
        return {"type": "toolCall", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, ImageBlock):
        data = base64.b64encode(block.data).decode()
        return {"type": "image", "mediaType": block.media_type, "data": data}
    if isinstance(block, DocumentBlock):
        return {
            "type": "document",
            "name": block.name,
            "mediaType": block.media_type,
            "text": block.text,
        }
    return {
        "type": "toolResult",
        "toolCallId": block.tool_call_id,
        "content": block.content,
        "isError": block.is_error,
    }


def _block_from_json(data: Mapping[str, Any]) -> ContentBlock:
    kind = data["type"]
    if kind == "text":
        return TextBlock(str(data["text"]))
    if kind == "reasoning":
        return ReasoningBlock(str(data["text"]), data.get("signature"))
    if kind == "toolCall":
        return ToolCall(str(data["id"]), str(data["name"]), dict(data["input"]))
    if kind == "toolResult":
        return ToolResult(str(data["toolCallId"]), str(data["content"]), bool(data["isError"]))
    if kind == "image" and data["mediaType"] in _IMAGE_TYPES:
        return ImageBlock(data["mediaType"], base64.b64decode(str(data["data"])))
    if kind == "document":
        return DocumentBlock(str(data["name"]), str(data["mediaType"]), str(data["text"]))
    raise ValueError(f"unknown content block type {kind!r}")
