"""A shared chat's public transcript: UI messages with `.env` tool contents redacted, and the
same as Markdown (reference §2.2, §6.9)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "[redacted: content from a .env file is not shared]"
# a path or command that names a .env file: `.env`, `.env.local`, `a/.env-prod`, `'.env'`
ENV_FILE = re.compile(r"(?<![\w.-])\.env(?!\w)")
TOOL_PREFIX = "tool-"
DYNAMIC_TOOL = "dynamic-tool"
KEPT = ("type", "toolCallId", "toolName", "state")  # what a redacted tool part still shows


def _is_tool(part: Mapping[str, Any]) -> bool:
    kind = part.get("type")
    return isinstance(kind, str) and (kind.startswith(TOOL_PREFIX) or kind == DYNAMIC_TOOL)


def _names_env_file(value: Any) -> bool:
    if isinstance(value, str):
        return ENV_FILE.search(value) is not None
    if isinstance(value, Mapping):
        return any(_names_env_file(item) for item in value.values())
    if isinstance(value, list):
        return any(_names_env_file(item) for item in value)
    return False


def redact(message: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the UI message whose tool parts that read or run a `.env` file keep only
    their type, call id and state: input, output and error text become a redaction note."""
    parts = message.get("parts")
    if not isinstance(parts, list):
        return dict(message)
    kept: list[Any] = []
    for part in parts:
        if isinstance(part, Mapping) and _is_tool(part) and _names_env_file(part.get("input")):
            part = {
                **{key: part[key] for key in KEPT if key in part},
                "input": REDACTED,
                **({"output": REDACTED} if "output" in part else {}),
                **({"errorText": REDACTED} if "errorText" in part else {}),
            }
        kept.append(part)
    return {**message, "parts": kept}


def _tool_name(part: Mapping[str, Any]) -> str:
    kind = str(part.get("type"))
    return str(part.get("toolName", "tool")) if kind == DYNAMIC_TOOL else kind[len(TOOL_PREFIX) :]


def _block(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
    fence = "````" if "```" in text else "```"
    return f"{fence}\n{text}\n{fence}"


def markdown(title: str, messages: Iterable[Mapping[str, Any]]) -> str:
    """The transcript as Markdown: a heading per message, its text, and its tool calls (input
    and output in fenced blocks); give it redacted messages."""
    out = [f"# {title}"]
    for message in messages:
        out.append("## User" if message.get("role") == "user" else "## Assistant")
        parts = message.get("parts")
        for part in parts if isinstance(parts, list) else []:
            if not isinstance(part, Mapping):
                continue
            if part.get("type") == "text" and str(part.get("text", "")).strip():
                out.append(str(part["text"]).strip())
            elif _is_tool(part):
                out.append(f"**Tool `{_tool_name(part)}`**")
                for key in ("input", "output", "errorText"):
                    if part.get(key) is not None:
                        out.append(_block(part[key]))
    return "\n\n".join(out) + "\n"
