"""A request's rough size in tokens: when to elide old tool outputs before the context window
is reached (providers count exactly)."""

from __future__ import annotations

from openagents.agent.models.port import (
    DocumentBlock,
    ImageBlock,
    ModelRequest,
    ToolCall,
    ToolResult,
)

IMAGE_TOKENS = 1600  # what estimate_tokens counts for an image (a ~1.15 MP image, Anthropic's)


def estimate_tokens(request: ModelRequest) -> int:
    """A rough size of ``request`` in tokens (about four characters each), for deciding when to
    elide old tool outputs before the context window is reached; providers count exactly."""
    size = len(request.system) + sum(
        len(tool.name) + len(tool.description) + len(str(tool.input_schema))
        for tool in request.tools
    )
    for message in request.messages:
        for block in message.content:
            if isinstance(block, ToolCall):
                size += len(block.name) + len(str(block.input))
            elif isinstance(block, ToolResult):
                size += len(block.content)
            elif isinstance(block, ImageBlock):
                size += IMAGE_TOKENS * 4
            elif isinstance(block, DocumentBlock):
                size += len(block.inline)
            else:
                size += len(block.text)
    return size // 4 + 1
