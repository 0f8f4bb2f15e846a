"""The tools in a real sandbox, through a scripted turn: results and failures reach the model as
tool outputs and errors (never a failed run); risky calls wait for approval."""

from __future__ import annotations

from typing import Any

from tests.agent.conftest import AgentApi
from tests.agent.test_stop_and_stream import wait_run

SKILL = "---\nname: greet\n---\nSay hello politely.\n"


def outputs(api: AgentApi, chat_id: str) -> dict[str, Any]:
    """toolCallId → output (or {"error": errorText})."""
    found: dict[str, Any] = {}
    for event in api.events(chat_id):
        chunk = event["chunk"]
        if chunk["type"] == "tool-output-available":
            found[chunk["toolCallId"]] = chunk["output"]
        elif chunk["type"] == "tool-output-error":
            found[chunk["toolCallId"]] = {"error": chunk["errorText"]}
    return found


def test_every_tool_in_a_turn(agent_api: AgentApi, live_session: tuple[str, str]) -> None:
    session_id, chat_id = live_session
    calls = [
        ("write", {"filePath": ".agents/skills/greet/SKILL.md", "content": SKILL}),
        ("write", {"filePath": "src/a.py", "content": "x = 1\nneedle = 2\n"}),
        ("grep", {"pattern": "need+le", "path": "."}),
        ("glob", {"pattern": "**/*.py"}),
        ("skill", {"skill": "greet", "args": "loudly"}),
        ("todo_write", {"todos": [{"id": "1", "content": "greet", "status": "pending"}]}),
        ("read", {"filePath": "../../etc/passwd"}),
        ("read", {"filePath": "src/a.py", "offset": 2, "limit": 1}),
        ("edit", {"filePath": "src/a.py", "oldString": "missing", "newString": "x"}),
        ("bash", {"command": "exit 3"}),
        ("bash", {"command": "python3 -m http.server 8765", "detached": True}),
        ("web_fetch", {"url": "http://127.0.0.1:8765/src/a.py"}),
        ("nope", {}),
        ("bash", {"command": "yes | head -c 200000"}),
    ]
    agent_api.script.set(
        [
            {"toolCalls": [{"name": name, "input": arguments} for name, arguments in calls]},
            {"text": "All done."},
        ]
    )
    assert agent_api.turn(session_id, chat_id, "use every tool").status == 202
    run = wait_run(agent_api, session_id, "completed", "failed", "waiting", timeout=60)
    assert run["status"] == "completed", run
    results = outputs(agent_api, chat_id)
    got = [results[f"scripted-0-{i}"] for i in range(len(calls))]
    assert got[2] == "src/a.py:2:needle = 2"
    assert got[3].splitlines()[0] == "src/a.py"  # newest first
    assert "app.py" in got[3].splitlines()
    assert "Say hello politely." in got[4]
    assert "Arguments: loudly" in got[4]
    assert got[5] == {"todos": [{"id": "1", "content": "greet", "status": "pending"}]}
    assert "outside the workspace" in got[6]["error"]
    assert got[7] == "     2\tneedle = 2"
    assert "not found" in got[8]["error"]
    assert got[9]["exitCode"] == 3
    assert got[10]["pid"] is not None
    assert got[11]["status"] == 200
    assert got[11]["body"] == "x = 1\nneedle = 2\n"
    assert "Unknown tool" in got[12]["error"]
    assert len(got[13]["stdout"]) < 50_200
    assert "truncated" in got[13]["stdout"]


def test_a_risky_command_waits_for_approval(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set(
        [
            {
                "toolCalls": [
                    {"name": "bash", "input": {"command": "rm -rf build"}},
                    {"name": "read", "input": {"filePath": ".env.local"}},
                    {"name": "bash", "input": {"command": "echo safe"}},
                ]
            },
            {"text": "unreachable until approved"},
        ]
    )
    assert agent_api.turn(session_id, chat_id, "clean up").status == 202
    run = wait_run(agent_api, session_id, "waiting", "completed", "failed")
    assert run["status"] == "waiting"
    kinds = [e["chunk"]["type"] for e in agent_api.events(chat_id)]
    assert kinds.count("tool-approval-request") == 2
    assert kinds[-1] == "finish"
    messages = agent_api.get(f"/api/sessions/{session_id}/chats/{chat_id}/messages").body
    parts = [p for p in messages["messages"][-1]["parts"] if p["type"].startswith("tool-")]
    assert [p["state"] for p in parts] == [
        "approval-requested",
        "approval-requested",
        "output-available",
    ]
    # the chat is free for the answer
    assert agent_api.get(f"/api/chat/{chat_id}/stream", query={"after": "999"}).status == 204


def test_approval_granted_and_denied_continue_the_same_message(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set(
        [
            {
                "toolCalls": [
                    {
                        "name": "bash",
                        "input": {"command": "mkdir -p build && rm -rf build && echo gone"},
                    },
                    {"name": "read", "input": {"filePath": ".env"}},
                ]
            }
        ]
    )
    first = agent_api.turn(session_id, chat_id, "clean").body["runId"]
    wait_run(agent_api, session_id, "waiting")
    respond = f"/api/chat/{chat_id}/respond"
    missing = agent_api.post(respond, {"toolCallId": "scripted-0-0"})
    assert missing.status == 400
    assert missing.error["field"] == "approved"
    unknown = agent_api.post(respond, {"toolCallId": "nope", "approved": True})
    assert unknown.status == 400
    assert unknown.error["field"] == "toolCallId"
    assert (
        agent_api.post(respond, {"toolCallId": "scripted-0-0", "approved": True}, user="bob").status
        == 404
    )
    one = agent_api.post(respond, {"toolCallId": "scripted-0-0", "approved": True})
    assert one.status == 202, one.body
    assert (one.body["runId"], one.body["pending"]) == (first, 1)
    agent_api.script.set([{"text": "Cleaned; I left .env alone."}])
    two = agent_api.post(
        respond, {"toolCallId": "scripted-0-1", "approved": False, "reason": "secrets"}
    )
    assert two.status == 202, two.body
    assert two.body["pending"] == 0
    assert two.body["runId"] != first
    run = wait_run(agent_api, session_id, "completed", "failed")
    assert run["status"] == "completed", run
    messages = agent_api.get(f"/api/sessions/{session_id}/chats/{chat_id}/messages").body
    assert [m["role"] for m in messages["messages"]] == ["user", "assistant"]
    parts = messages["messages"][-1]["parts"]
    tools = [p for p in parts if p["type"].startswith("tool-")]
    assert tools[0]["state"] == "output-available"
    assert tools[0]["output"]["stdout"] == "gone\n"
    assert tools[0]["approval"]["approved"] is True
    assert tools[1]["state"] == "output-denied"
    assert tools[1]["approval"] == {
        "id": "approval-scripted-0-1",
        "reason": "secrets",
        "approved": False,
    }
    assert parts[-1]["text"] == "Cleaned; I left .env alone."
    # answering again: the turn is no longer waiting
    assert agent_api.post(respond, {"toolCallId": "scripted-0-1", "approved": True}).status == 400


def test_a_question_waits_for_the_answer(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    question = {
        "questions": [
            {
                "question": "Which name?",
                "header": "Name",
                "options": [{"label": "add"}, {"label": "plus"}],
                "multiSelect": False,
            }
        ]
    }
    agent_api.script.set([{"toolCalls": [{"name": "ask_user_question", "input": question}]}])
    agent_api.turn(session_id, chat_id, "ask me")
    wait_run(agent_api, session_id, "waiting")
    respond = f"/api/chat/{chat_id}/respond"
    assert agent_api.post(respond, {"toolCallId": "scripted-0-0"}).error["field"] == "answers"
    agent_api.script.set([{"text": "Using plus."}])
    answered = agent_api.post(respond, {"toolCallId": "scripted-0-0", "answers": {"Name": "plus"}})
    assert answered.status == 202
    assert answered.body["pending"] == 0
    wait_run(agent_api, session_id, "completed")
    parts = agent_api.get(f"/api/sessions/{session_id}/chats/{chat_id}/messages").body["messages"][
        -1
    ]["parts"]
    asked = next(p for p in parts if p["type"] == "tool-ask_user_question")
    assert asked["output"] == {"answers": {"Name": "plus"}}
    assert parts[-1]["text"] == "Using plus."
