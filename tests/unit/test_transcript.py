"""The public transcript: which tool parts are redacted, and the Markdown."""

from __future__ import annotations

from typing import Any

import pytest
from openagents.domain.transcript import REDACTED, markdown, redact


def tool(tool_input: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool-bash", "toolCallId": "t", "state": "output-available",
            "input": tool_input, "output": "SECRET", **extra}  # fmt: skip


@pytest.mark.parametrize(
    "tool_input",
    [
        {"path": ".env"},
        {"path": "/workspace/app/.env.production"},
        {"filePath": "config/.env-local"},
        {"command": "cat .env | grep KEY"},
        {"command": "source '.env'"},
        {"argv": ["cat", "sub/.env"]},
    ],
)
def test_tool_parts_naming_an_env_file_are_redacted(tool_input: Any) -> None:
    stored = tool(tool_input, errorText="boom")
    message = {"id": "a", "role": "assistant", "parts": [stored]}
    (part,) = redact(message)["parts"]
    assert part == {
        "type": "tool-bash",
        "toolCallId": "t",
        "state": "output-available",
        "input": REDACTED,
        "output": REDACTED,
        "errorText": REDACTED,
    }
    assert stored["output"] == "SECRET"  # the stored message is not touched


@pytest.mark.parametrize(
    "tool_input",
    [
        {"path": "src/environment.ts"},
        {"path": "docs/.environment"},
        {"command": "echo $PATH"},
        {"command": "node -e 'console.log(process.env.HOME)'"},
        "free text",
        None,
    ],
)
def test_other_tool_parts_and_text_are_kept(tool_input: Any) -> None:
    parts = [tool(tool_input), {"type": "text", "text": "see .env"}]
    assert redact({"id": "a", "role": "assistant", "parts": parts})["parts"] == parts


def test_markdown_shows_text_and_tool_calls() -> None:
    messages = [
        {"role": "user", "parts": [{"type": "text", "text": " Hi "}, {"type": "step-start"}]},
        {"role": "assistant", "parts": [tool({"command": "ls"}), {"type": "text", "text": "ok"}]},
    ]
    assert markdown("Lisbon", messages) == (
        "# Lisbon\n\n## User\n\nHi\n\n## Assistant\n\n**Tool `bash`**\n\n"
        '```\n{\n  "command": "ls"\n}\n```\n\n```\nSECRET\n```\n\nok\n'
    )
