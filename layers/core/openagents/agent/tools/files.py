"""read, write, edit: files of the workspace through sandboxd's files API."""

from __future__ import annotations

import posixpath
from typing import ClassVar

from openagents.agent.models.port import JsonObject, JsonValue
from openagents.agent.sandbox import SandboxError, sandbox_error_text
from openagents.agent.tools.base import (
    BaseTool,
    ToolContext,
    ToolFailure,
    cap,
    flag,
    integer,
    string,
    workspace_path,
)

DEFAULT_LINES = 2000
MAX_LINE_CHARS = 2000
MAX_READ_BYTES = 10 << 20
_PATH = {"type": "string", "description": "Path relative to the workspace root"}


def is_env_file(path: str) -> bool:
    return posixpath.basename(path).lower().startswith(".env")


def under_env_file(path: str) -> bool:
    """``path`` is an ``.env*`` file or lies in an ``.env*`` folder (any component)."""
    return any(is_env_file(part) for part in path.split("/"))


def env_file_approval(arguments: JsonObject, doing: str) -> str | None:
    """Why a call on an ``.env*`` file needs approval: judged on the path the tool will use
    (normalised: ``.env/``, ``.env/.``, ``a/../.env`` are ``.env``), never on its spelling."""
    try:
        path = workspace_path(arguments.get("filePath"))
    except ToolFailure:
        return None  # the call fails before it touches a file
    return f"{doing} {path} may expose or change secrets" if is_env_file(path) else None


def _read(context: ToolContext, path: str) -> str:
    try:
        text = context.workspace.read_text(path, MAX_READ_BYTES)
    except SandboxError as error:
        raise ToolFailure(sandbox_error_text(error)) from error
    if text.content is None:
        raise ToolFailure(f"{path} is not a text file ({text.size} bytes)")
    if text.truncated:
        raise ToolFailure(f"{path} is larger than {MAX_READ_BYTES} bytes")
    return text.content


def _write(context: ToolContext, path: str, content: str) -> None:
    try:
        context.workspace.write_text(path, content)
    except SandboxError as error:
        raise ToolFailure(sandbox_error_text(error)) from error


class ReadTool(BaseTool):
    name = "read"
    description = (
        "Read a text file of the workspace. Returns numbered lines (cat -n style). "
        f"Reads {DEFAULT_LINES} lines from the start unless offset/limit say otherwise."
    )
    input_schema: ClassVar[JsonObject] = {
        "type": "object",
        "properties": {
            "filePath": _PATH,
            "offset": {"type": "integer", "description": "First line to read (1-based)"},
            "limit": {"type": "integer", "description": f"Lines to read (default {DEFAULT_LINES})"},
        },
        "required": ["filePath"],
    }

    def approval(self, arguments: JsonObject) -> str | None:
        return env_file_approval(arguments, "Reading")

    def run(self, arguments: JsonObject, context: ToolContext) -> JsonValue:
        path = workspace_path(arguments.get("filePath"))
        offset = integer(arguments, "offset", 1, low=1)
        limit = integer(arguments, "limit", DEFAULT_LINES, low=1)
        lines = _read(context, path).splitlines()
        chosen = lines[offset - 1 : offset - 1 + limit]
        numbered = "\n".join(
            f"{number:6d}\t{line[:MAX_LINE_CHARS]}"
            for number, line in enumerate(chosen, start=offset)
        )
        if not lines:
            return f"{path} is empty"
        rest = len(lines) - (offset - 1 + len(chosen))
        note = (
            f"\n… {rest} more lines (read on with offset={offset + len(chosen)})"
            if rest > 0
            else ""
        )
        return cap(numbered + note)


class WriteTool(BaseTool):
    name = "write"
    description = "Create or overwrite a file of the workspace (parent folders are made)."
    input_schema: ClassVar[JsonObject] = {
        "type": "object",
        "properties": {"filePath": _PATH, "content": {"type": "string"}},
        "required": ["filePath", "content"],
    }

    def approval(self, arguments: JsonObject) -> str | None:
        return env_file_approval(arguments, "Writing")

    def run(self, arguments: JsonObject, context: ToolContext) -> JsonValue:
        path = workspace_path(arguments.get("filePath"))
        content = string(arguments, "content")
        _write(context, path, content)
        return f"Wrote {len(content.encode())} bytes to {path}"


class EditTool(BaseTool):
    name = "edit"
    description = (
        "Replace an exact string in a file. oldString must occur exactly once unless "
        "replaceAll is true."
    )
    input_schema: ClassVar[JsonObject] = {
        "type": "object",
        "properties": {
            "filePath": _PATH,
            "oldString": {"type": "string"},
            "newString": {"type": "string"},
            "replaceAll": {"type": "boolean"},
        },
        "required": ["filePath", "oldString", "newString"],
    }

    def approval(self, arguments: JsonObject) -> str | None:
        return env_file_approval(arguments, "Editing")

    def run(self, arguments: JsonObject, context: ToolContext) -> JsonValue:
        path = workspace_path(arguments.get("filePath"))
        old, new = string(arguments, "oldString"), string(arguments, "newString")
        every = flag(arguments, "replaceAll")
        if not old:
            raise ToolFailure("oldString must not be empty")
        if old == new:
            raise ToolFailure("oldString and newString are the same")
        content = _read(context, path)
        count = content.count(old)
        if count == 0:
            raise ToolFailure(f"oldString was not found in {path}")
        if count > 1 and not every:
            raise ToolFailure(
                f"oldString occurs {count} times in {path}; give more context or set replaceAll"
            )
        _write(context, path, content.replace(old, new) if every else content.replace(old, new, 1))
        return f"Replaced {count if every else 1} occurrence(s) in {path}"
