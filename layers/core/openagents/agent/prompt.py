"""The system prompt: core instructions, the repository, branch and working folder, and the
repository's own instructions (AGENTS.md, else CLAUDE.md) when present."""

from __future__ import annotations

from dataclasses import dataclass

from openagents.agent.sandbox import SandboxError, Workspace

WORKDIR = "/workspace"
PROJECT_FILES = ("AGENTS.md", "CLAUDE.md")
MAX_PROJECT_CHARS = 20_000

CORE = """You are a coding agent working in a sandboxed copy of the user's repository.
Work in small, verified steps: read before you edit, keep changes minimal and in the style of the
code around them, and run the tests or the program to check your work.
Tools: read, write, edit, grep, glob and bash act on the workspace (paths are relative to its
root); todo_write keeps a task list; ask_user_question asks the user when a choice is theirs;
web_fetch fetches a URL; skill loads a skill's SKILL.md from the repository.
Commands that delete recursively (rm -rf) or touch .env files need the user's approval.
When you are done, say briefly what you changed and how you checked it."""


@dataclass(frozen=True)
class Project:
    repository: str | None
    branch: str | None


def project_instructions(workspace: Workspace) -> tuple[str, str] | None:
    """``(file name, text)`` of the first of AGENTS.md / CLAUDE.md the workspace has."""
    for name in PROJECT_FILES:
        try:
            found = workspace.read_text(name, 1 << 20)
        except SandboxError:
            continue
        if found.content:
            return name, found.content[:MAX_PROJECT_CHARS]
    return None


def system_prompt(project: Project, instructions: tuple[str, str] | None) -> str:
    lines = [
        CORE,
        "",
        f"Repository: {project.repository or '(none: a fresh git repository)'}",
        f"Branch: {project.branch or '(default)'}",
        f"Working directory: {WORKDIR}",
    ]
    if instructions is not None:
        name, text = instructions
        lines += ["", f"The repository's {name}:", "", text]
    return "\n".join(lines)
