"""Agent turns and the sandbox lifecycle: a message to a hibernated session resumes it and the
turn runs once it is active."""

from __future__ import annotations

from tests.agent.conftest import AgentApi, wait_state
from tests.agent.test_stop_and_stream import wait_run


def test_a_message_to_a_hibernated_session_resumes_it_and_runs(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    paused = agent_api.post("/api/sandbox/snapshot", {"sessionId": session_id})
    assert paused.status == 202, paused.body
    wait_state(agent_api, session_id, "hibernated")
    agent_api.script.set(
        [
            {"toolCalls": [{"name": "bash", "input": {"command": "echo back > back.txt"}}]},
            {"text": "I am back."},
        ]
    )
    started = agent_api.turn(session_id, chat_id, "are you there?")
    assert started.status == 202, started.body
    run = wait_run(agent_api, session_id, "completed", "failed", timeout=120)
    assert run["status"] == "completed", run
    session = wait_state(agent_api, session_id, "active")
    assert session["lifecycleState"] == "active"
    content = agent_api.get(
        f"/api/sessions/{session_id}/sandbox/files/content", query={"path": "back.txt"}
    )
    assert content.body["content"] == "back\n"
