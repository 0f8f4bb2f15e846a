"""todo_write, ask_user_question, web_fetch and skill."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import ClassVar

from openagents.agent.models.port import JsonObject, JsonValue
from openagents.agent.sandbox import SandboxError, sandbox_error_text
from openagents.agent.skills import SKILL_FOLDERS, is_skill_name, skill_path
from openagents.agent.tools.base import BaseTool, ToolContext, ToolFailure, cap, string

MAX_BODY_CHARS = 10_000
FETCH_TIMEOUT_SECONDS = 30
TODO_STATUSES = ("pending", "in_progress", "completed")


class TodoWriteTool(BaseTool):
    name = "todo_write"
    in_model_step = True  # its output is its whole effect
    description = "Replace the task's todo list (each item: id, content, status)."
    input_schema: ClassVar[JsonObject] = {
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "content": {"type": "string"},
                        "status": {"type": "string", "enum": list(TODO_STATUSES)},
                    },
                    "required": ["id", "content", "status"],
                },
            }
        },
        "required": ["todos"],
    }

    def run(self, arguments: JsonObject, context: ToolContext) -> JsonValue:
        todos = arguments.get("todos")
        if not isinstance(todos, Sequence) or isinstance(todos, str):
            raise ToolFailure("todos must be a list")
        kept: list[JsonValue] = []
        for todo in todos:
            if not isinstance(todo, Mapping):
                raise ToolFailure("each todo is {id, content, status}")
            status = todo.get("status")
            if status not in TODO_STATUSES:
                raise ToolFailure(f"a todo's status is one of {', '.join(TODO_STATUSES)}")
            kept.append(
                {
                    "id": str(todo.get("id", "")),
                    "content": str(todo.get("content", "")),
                    "status": status,
                }
            )
        return {"todos": kept}


class AskUserQuestionTool(BaseTool):
    name = "ask_user_question"
    description = (
        "Ask the user 1-4 questions, each with 2-4 options. The turn pauses until they answer."
    )
    client_side = True
    input_schema: ClassVar[JsonObject] = {
        "type": "object",
        "properties": {
            "questions": {
                "type": "array",
                "minItems": 1,
                "maxItems": 4,
                "items": {
                    "type": "object",
                    "properties": {
                        "question": {"type": "string"},
                        "header": {"type": "string"},
                        "options": {
                            "type": "array",
                            "minItems": 2,
                            "maxItems": 4,
                            "items": {
                                "type": "object",
                                "properties": {
                                    "label": {"type": "string"},
                                    "description": {"type": "string"},
                                },
                                "required": ["label"],
                            },
                        },
                        "multiSelect": {"type": "boolean"},
                    },
                    "required": ["question", "options"],
                },
            }
        },
        "required": ["questions"],
    }


_FETCH = r"""
import json, os, urllib.request, urllib.error
url, method = os.environ["OA_URL"], os.environ.get("OA_METHOD") or "GET"
headers = json.loads(os.environ.get("OA_HEADERS") or "{}")
request = urllib.request.Request(url, method=method, headers=headers)
try:
    with urllib.request.urlopen(request, timeout=float(os.environ["OA_TIMEOUT"])) as response:
        status, kind = response.status, response.headers.get("content-type")
        raw = response.read(2_000_000)
except urllib.error.HTTPError as error:
    status, kind, raw = error.code, error.headers.get("content-type"), error.read(2_000_000)
except Exception as error:
    print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
    raise SystemExit(0)
print(json.dumps({"status": status, "contentType": kind, "body": raw.decode("utf-8", "replace")}))
"""


class WebFetchTool(BaseTool):
    name = "web_fetch"
    description = (
        f"Fetch a URL from inside the sandbox (30 s timeout); the body is cut at {MAX_BODY_CHARS} "
        "characters."
    )
    input_schema: ClassVar[JsonObject] = {
        "type": "object",
        "properties": {
            "url": {"type": "string"},
            "method": {"type": "string", "enum": ["GET", "POST", "HEAD"]},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "required": ["url"],
    }

    def run(self, arguments: JsonObject, context: ToolContext) -> JsonValue:
        url = string(arguments, "url").strip()
        if not url.startswith(("http://", "https://")):
            raise ToolFailure("url must start with http:// or https://")
        method = string(arguments, "method", required=False).upper() or "GET"
        headers = arguments.get("headers") or {}
        if not isinstance(headers, Mapping):
            raise ToolFailure("headers must be an object of strings")
        env = {
            "OA_URL": url,
            "OA_METHOD": method,
            "OA_HEADERS": json.dumps({str(k): str(v) for k, v in headers.items()}),
            "OA_TIMEOUT": str(FETCH_TIMEOUT_SECONDS),
        }
        try:
            result = context.workspace.exec(
                argv=["python3", "-c", _FETCH], env=env, timeout_seconds=FETCH_TIMEOUT_SECONDS + 5
            )
        except SandboxError as error:
            raise ToolFailure(sandbox_error_text(error)) from error
        try:
            answer = json.loads(result.stdout)
        except ValueError:
            raise ToolFailure(
                cap(result.stderr.strip() or "the fetch gave no answer", 2000)
            ) from None
        if not isinstance(answer, dict):
            raise ToolFailure("the fetch gave no answer")
        if "error" in answer:
            raise ToolFailure(str(answer["error"]))
        body = str(answer.get("body", ""))
        cut = len(body) > MAX_BODY_CHARS
        return {
            "status": answer.get("status"),
            "contentType": answer.get("contentType"),
            "body": body[:MAX_BODY_CHARS]
            + (f"\n… [truncated: {len(body) - MAX_BODY_CHARS} more characters]" if cut else ""),
        }


class SkillTool(BaseTool):
    name = "skill"
    description = "Load a skill's instructions (SKILL.md) from the repository: " + ", ".join(
        f"{folder}/<skill>/SKILL.md" for folder in SKILL_FOLDERS
    )
    input_schema: ClassVar[JsonObject] = {
        "type": "object",
        "properties": {"skill": {"type": "string"}, "args": {"type": "string"}},
        "required": ["skill"],
    }

    def run(self, arguments: JsonObject, context: ToolContext) -> JsonValue:
        name = string(arguments, "skill").strip()
        if not is_skill_name(name):
            raise ToolFailure("skill is a skill's folder name")
        for folder in SKILL_FOLDERS:
            path = skill_path(folder, name)
            try:
                text = context.workspace.read_text(path, 1 << 20)
            except SandboxError as error:
                if error.status == 404:
                    continue
                raise ToolFailure(sandbox_error_text(error)) from error
            if text.content is None:
                raise ToolFailure(f"{path} is not text")
            args = string(arguments, "args", required=False)
            suffix = f"\n\nArguments: {args}" if args else ""
            return cap(f"Skill {name} ({path}):\n\n{text.content}{suffix}")
        raise ToolFailure(f"No skill {name!r} in this repository")
