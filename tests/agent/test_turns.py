"""A turn end to end: the scripted model writes, edits and commits in a real sandbox."""

from __future__ import annotations

import time
from typing import Any

import pytest
from openagents.agent import model_step, prompt
from openagents.agent.models.port import ModelRequest
from openagents.agent.models.scripted import ScriptedModel

from tests.agent.conftest import AgentApi

TURN: list[dict[str, Any]] = [
    {
        "reasoning": "Write the module first.",
        "text": "Writing calc.py.",
        "toolCalls": [
            {
                "name": "write",
                "input": {"filePath": "calc.py", "content": "def add(a, b):\n    return a - b\n"},
            }
        ],
    },
    {
        "text": "Fixing the bug.",
        "toolCalls": [
            {
                "name": "edit",
                "input": {"filePath": "calc.py", "oldString": "a - b", "newString": "a + b"},
            },
            {"name": "read", "input": {"filePath": "calc.py"}},
        ],
    },
    {
        "toolCalls": [
            {
                "name": "bash",
                "input": {
                    "command": "git add -A && git commit -qm 'Add calc' && git log --oneline -1"
                },
            }
        ]
    },
    {"text": "Done: calc.add is committed."},
]


def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["chunk"]["type"] for event in events]


def test_a_turn_changes_files_commits_and_ends_with_text(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set(TURN)
    started = agent_api.turn(session_id, chat_id, "add an add function, then commit")
    assert started.status == 202, started.body
    run_id = started.body["runId"]
    events = agent_api.events(chat_id)
    kinds = types(events)
    assert kinds[0] == "start"
    assert kinds[-1] == "finish"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    for expected in (
        "start-step",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
        "text-delta",
        "text-end",
        "tool-input-available",
        "tool-output-available",
        "finish-step",
    ):
        assert expected in kinds, expected
    outputs = [e["chunk"] for e in events if e["chunk"]["type"] == "tool-output-available"]
    final = [chunk for chunk in outputs if not chunk.get("preliminary")]  # bash's live output aside
    assert len(final) == 4
    live = [chunk for chunk in outputs if chunk.get("preliminary")]
    assert all(chunk["toolCallId"] == final[-1]["toolCallId"] for chunk in live)  # the bash call's
    assert final[-1]["output"]["exitCode"] == 0
    # the files changed in the sandbox, and the commit is there
    tools = f"/api/sessions/{session_id}/sandbox"
    content = agent_api.get(f"{tools}/files/content", query={"path": "calc.py"})
    assert content.body["content"] == "def add(a, b):\n    return a + b\n"
    log = agent_api.post(f"{tools}/exec", {"command": "git log --oneline -1"})
    assert "Add calc" in log.body["stdout"]
    # the assistant message's parts and the run's usage are stored
    messages = agent_api.get(f"/api/sessions/{session_id}/chats/{chat_id}/messages").body[
        "messages"
    ]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    parts = messages[1]["parts"]
    assert [p["type"] for p in parts if p["type"].startswith("tool-")] == [
        "tool-write",
        "tool-edit",
        "tool-read",
        "tool-bash",
    ]
    assert all(p["state"] == "output-available" for p in parts if p["type"].startswith("tool-"))
    assert sum(p["type"] == "step-start" for p in parts) == 4
    assert parts[-1] == {"type": "text", "text": "Done: calc.add is committed.", "state": "done"}
    runs = agent_api.get(f"/api/sessions/{session_id}/runs").body["runs"]
    assert [r["runId"] for r in runs] == [run_id]
    run = runs[0]
    assert run["assistantMessageId"] == messages[1]["id"]  # the footer's cost goes there
    assert run["status"] == "completed"
    assert run["steps"] == 8  # 4 model steps + 4 tool steps
    assert run["usage"]["outputTokens"] > 0
    assert run["usage"]["inputTokens"] > 0
    assert run["finishedAt"] is not None
    deadline = time.monotonic() + 10  # recorded just after the run ended
    while True:
        audit = agent_api.get(f"/api/sessions/{session_id}/events").body["events"]
        kinds = [entry["type"] for entry in audit]
        if "agent.turn_finished" in kinds or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert "agent.turn_started" in kinds
    finished = next(entry for entry in audit if entry["type"] == "agent.turn_finished")
    assert finished["detail"]["runId"] == run_id
    assert finished["detail"]["status"] == "completed"
    assert finished["detail"]["usage"] == run["usage"]
    # a natural finish refreshed the cached diff (the committed calc.py is in it)
    cached = agent_api.get(f"{tools}/diff/cached")
    assert cached.status == 200, cached.body
    assert "calc.py" in {f["path"] for f in cached.body["data"]["files"]}


def test_the_project_instructions_are_read_once_per_turn(
    agent_api: AgentApi, live_session: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """AGENTS.md is in every model call's system prompt, read from the sandbox once per turn
    (the prompt stays the same for the turn); the next turn reads the file as it is then."""
    session_id, chat_id = live_session
    exec_path = f"/api/sessions/{session_id}/sandbox/exec"
    written = agent_api.post(exec_path, {"command": "echo 'Use tabs.' > AGENTS.md"})
    assert written.status == 200, written.body
    systems: list[str] = []
    reads: list[str] = []
    streamed = ScriptedModel.stream
    read = prompt.project_instructions

    def recording(self: ScriptedModel, request: ModelRequest, **kw: Any) -> Any:
        if request.purpose == "turn":  # not the call that names the new chat
            systems.append(request.system)
        return streamed(self, request, **kw)

    def counted(workspace: Any) -> Any:
        found = read(workspace)
        reads.append(found[1] if found else "")
        return found

    monkeypatch.setattr(ScriptedModel, "stream", recording)
    monkeypatch.setattr(model_step, "project_instructions", counted)
    todo = {"name": "todo_write", "input": {"todos": []}}
    agent_api.script.set([{"toolCalls": [todo]}, {"toolCalls": [todo]}, {"text": "Done."}])

    assert agent_api.turn(session_id, chat_id, "go").status == 202
    agent_api.events(chat_id)
    assert len(systems) == 3
    assert all("Use tabs." in system for system in systems)
    assert reads == ["Use tabs.\n"]

    agent_api.post(exec_path, {"command": "echo 'Use spaces.' > AGENTS.md"})
    agent_api.script.set([{"text": "Again."}])
    assert agent_api.turn(session_id, chat_id, "again").status == 202
    agent_api.events(chat_id)
    assert reads == ["Use tabs.\n", "Use spaces.\n"]
    assert "Use spaces." in systems[-1]
