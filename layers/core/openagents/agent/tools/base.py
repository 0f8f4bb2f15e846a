"""What a tool is: a name, a description and a JSON input schema for the model, an optional
approval rule, and ``run`` against the session's workspace.

A tool's failure is ``ToolFailure`` (its message is what the model sees as the
``tool-output-error``); it never fails the run. Outputs are JSON values; text is capped at
``MAX_OUTPUT_CHARS`` with a note saying how much was cut.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Protocol, TypeAlias

from openagents.agent.models.cancel import never
from openagents.agent.models.port import CancelCheck, JsonObject, JsonValue
from openagents.agent.sandbox import Workspace

MAX_OUTPUT_CHARS = 50_000


class ToolFailure(Exception):
    """The tool could not do what was asked; ``message`` goes back to the model."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Cancelled(Exception):
    """Stop was requested while the tool ran (its sandbox command was killed)."""


SubagentRunner: TypeAlias = Callable[[str, str, str], JsonValue]
"""Runs a subagent: (subagentType, task, instructions) → the task tool's output."""

ToolProgress: TypeAlias = Callable[[JsonValue], None]
"""Shows the call's output so far (the stream's preliminary ``tool-output-available``): never
stored in the message, replaced by the next one and, at the end, by the tool's output."""


@dataclass(frozen=True)
class ToolContext:
    workspace: Workspace
    cancelled: CancelCheck = never
    call_id: str = "call"
    bash_timeout_seconds: int = 120
    subagent: SubagentRunner | None = None  # the turn's, for the task tool (not in subagents)
    progress: ToolProgress | None = None  # the turn's call's preliminary output (not subagents')


class Tool(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def input_schema(self) -> JsonObject: ...
    @property
    def client_side(self) -> bool:
        """Answered by the user (ask_user_question): the run waits."""
        ...

    @property
    def in_model_step(self) -> bool:
        """Run inside the model step that called it, not in a durable step of its own: the
        call's output is all it makes (no sandbox command, nothing outside the run), so running
        it again with its model step after a crash changes nothing (todo_write)."""
        ...

    def approval(self, arguments: JsonObject) -> str | None:
        """Why this call needs the user's approval first, or None."""
        ...

    def run(self, arguments: JsonObject, context: ToolContext) -> JsonValue: ...


class BaseTool:
    """Defaults: runs on the server, needs no approval."""

    name = ""
    description = ""
    input_schema: ClassVar[JsonObject] = {"type": "object", "properties": {}}
    client_side = False
    in_model_step = False

    def approval(self, arguments: JsonObject) -> str | None:
        return None

    def run(self, arguments: JsonObject, context: ToolContext) -> JsonValue:
        raise ToolFailure(f"{self.name} cannot run on the server")


def cap(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [truncated: {len(text) - limit} more characters not shown]"


def workspace_path(raw: object, *, name: str = "filePath", default: str | None = None) -> str:
    """A workspace-relative, normalised path; absolute paths, ``..`` escapes and NUL refused
    (sandboxd checks again, symlinks included)."""
    if raw is None or raw == "":
        if default is not None:
            return default
        raise ToolFailure(f"{name} is required")
    if not isinstance(raw, str):
        raise ToolFailure(f"{name} must be a string")
    text = raw.strip()
    if "\x00" in text:
        raise ToolFailure(f"{name} contains a NUL byte")
    for prefix in ("/workspace/", "./"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    if text in ("/workspace", ".", ""):
        return "."
    if text.startswith("/"):
        raise ToolFailure(f"{name} {raw!r} must be relative to the workspace")
    normal = posixpath.normpath(text)
    if normal == ".." or normal.startswith("../"):
        raise ToolFailure(f"{name} {raw!r} is outside the workspace")
    return normal


def string(arguments: Mapping[str, JsonValue], key: str, *, required: bool = True) -> str:
    value = arguments.get(key)
    if value is None:
        if required:
            raise ToolFailure(f"{key} is required")
        return ""
    if not isinstance(value, str):
        raise ToolFailure(f"{key} must be a string")
    return value


def integer(arguments: Mapping[str, JsonValue], key: str, default: int, *, low: int = 0) -> int:
    value = arguments.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolFailure(f"{key} must be a number")
    if int(value) < low:
        raise ToolFailure(f"{key} must be at least {low}")
    return int(value)


def flag(arguments: Mapping[str, JsonValue], key: str) -> bool:
    value = arguments.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ToolFailure(f"{key} must be true or false")
    return value
