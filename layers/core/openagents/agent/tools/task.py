"""task: hand a self-contained piece of work to a subagent (``agent/subagent.py``)."""

from __future__ import annotations

from typing import ClassVar

from openagents.agent.models.port import JsonObject, JsonValue
from openagents.agent.tools.base import BaseTool, ToolContext, ToolFailure, string

SUBAGENT_TYPES = ("explorer", "executor")


class TaskTool(BaseTool):
    name = "task"
    description = (
        "Launch a subagent that works autonomously on a self-contained task and returns only a "
        "concise summary (its own steps stay out of this conversation; at most 100 steps).\n"
        "- explorer (READ-ONLY: read, grep, glob, read-only bash): where is X, how does Y work, "
        "find all usages of Z.\n"
        "- executor (read, write, edit, grep, glob, bash): scaffolding, refactors across files, "
        "migrations.\n"
        "Do simple single-file edits yourself. Subagents cannot ask questions: give concrete "
        "instructions (goal, steps, constraints, how to verify, the paths and names involved)."
    )
    input_schema: ClassVar[JsonObject] = {
        "type": "object",
        "properties": {
            "subagentType": {
                "type": "string",
                "enum": list(SUBAGENT_TYPES),
                "description": "explorer for read-only research, executor for implementation",
            },
            "task": {"type": "string", "description": "A short description (shown to the user)"},
            "instructions": {
                "type": "string",
                "description": "Detailed instructions: goal, steps, constraints, verification",
            },
        },
        "required": ["subagentType", "task", "instructions"],
    }

    def run(self, arguments: JsonObject, context: ToolContext) -> JsonValue:
        kind = string(arguments, "subagentType")
        if kind not in SUBAGENT_TYPES:
            raise ToolFailure(f"subagentType is one of {', '.join(SUBAGENT_TYPES)}")
        task = string(arguments, "task")
        instructions = string(arguments, "instructions")
        if context.subagent is None:
            raise ToolFailure("A subagent cannot start another subagent")
        return context.subagent(kind, task, instructions)
