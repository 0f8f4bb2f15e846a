"""Context elision: a request that would fill more than ``FILL`` of the model's context window
goes with its older tool outputs replaced by a note (the conversation's structure kept, the
``KEEP_RECENT_RESULTS`` newest outputs whole)."""

from __future__ import annotations

from dataclasses import replace

from openagents.agent.models.port import Message, ModelRequest, ToolResult
from openagents.agent.models.tokens import estimate_tokens

ELIDED = "[output elided to fit the model's context window]"
KEEP_RECENT_RESULTS = 4
FILL = 0.8


def fitted(request: ModelRequest, context_window: int) -> ModelRequest:
    """``request``, elided when its estimate passes ``FILL`` of ``context_window``."""
    if estimate_tokens(request) > int(context_window * FILL):
        return replace(request, messages=elide(request.messages))
    return request


def elide(messages: tuple[Message, ...]) -> tuple[Message, ...]:
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
