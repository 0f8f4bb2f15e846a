"""The agent's tools (the reference's names, inputs and semantics), by name."""

from __future__ import annotations

from openagents.agent.models.port import ToolSpec
from openagents.agent.tools.base import (
    MAX_OUTPUT_CHARS,
    Cancelled,
    Tool,
    ToolContext,
    ToolFailure,
    cap,
)
from openagents.agent.tools.files import EditTool, ReadTool, WriteTool
from openagents.agent.tools.misc import AskUserQuestionTool, SkillTool, TodoWriteTool, WebFetchTool
from openagents.agent.tools.shell import BashTool, GlobTool, GrepTool
from openagents.agent.tools.task import TaskTool

__all__ = [
    "MAX_OUTPUT_CHARS",
    "TOOLS",
    "Cancelled",
    "Tool",
    "ToolContext",
    "ToolFailure",
    "cap",
    "specs",
]

TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        ReadTool(),
        WriteTool(),
        EditTool(),
        GrepTool(),
        GlobTool(),
        BashTool(),
        TodoWriteTool(),
        AskUserQuestionTool(),
        WebFetchTool(),
        SkillTool(),
        TaskTool(),
    )
}


def specs() -> tuple[ToolSpec, ...]:
    return tuple(ToolSpec(t.name, t.description, t.input_schema) for t in TOOLS.values())
