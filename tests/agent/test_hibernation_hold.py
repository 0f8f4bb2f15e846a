"""A live turn holds hibernation off (the engine heartbeats the turn); once it ends, the idle
timeout runs again and the sandbox hibernates."""

from __future__ import annotations

import time

import pytest
from openagents.settings import Settings

from tests.agent.conftest import AgentApi, wait_state
from tests.agent.test_stop_and_stream import wait_run


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"idle_timeout_seconds": 2, "lifecycle_min_sleep_seconds": 0.5}
    )


def test_no_hibernation_while_a_turn_runs(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set(
        [
            {"toolCalls": [{"name": "bash", "input": {"command": "sleep 8; echo slept"}}]},
            {"text": "Rested."},
        ]
    )
    assert agent_api.turn(session_id, chat_id, "take a nap").status == 202
    deadline = time.monotonic() + 7
    while time.monotonic() < deadline:  # well past the 2 s idle timeout
        state = agent_api.get(f"/api/sessions/{session_id}").body["session"]["lifecycleState"]
        assert state == "active"
        time.sleep(0.5)
    run = wait_run(agent_api, session_id, "completed", "failed", timeout=30)
    assert run["status"] == "completed", run
    wait_state(agent_api, session_id, "hibernated")


def test_a_stopped_turn_releases_the_hold_at_once(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set(
        [
            {"toolCalls": [{"name": "bash", "input": {"command": "sleep 60"}}]},
            {"text": "never reached"},
        ]
    )
    started = agent_api.turn(session_id, chat_id, "sleep a minute")
    assert started.status == 202
    time.sleep(2)
    # the live turn shows in the chat summaries and the sidebar's list (from the chat marks)
    assert live_marks(agent_api, session_id, chat_id) == (started.body["runId"], True, True)
    assert agent_api.post(f"/api/chat/{chat_id}/stop").status == 200
    run = wait_run(agent_api, session_id, "aborted", "completed", "failed", timeout=30)
    assert run["status"] == "aborted", run
    assert live_marks(agent_api, session_id, chat_id) == (None, False, False)
    # no heartbeat left holding it: the idle timeout (2 s) hibernates it well before the
    # turn's heartbeat would have lapsed (OPENAGENTS_TURN_HEARTBEAT_SECONDS, 600 s)
    wait_state(agent_api, session_id, "hibernated")


def live_marks(api: AgentApi, session_id: str, chat_id: str) -> tuple[str | None, bool, bool]:
    """(the chat's activeRunId, its isStreaming, the session list's hasStreaming)."""
    chats = api.get(f"/api/sessions/{session_id}/chats").body["chats"]
    (chat,) = [c for c in chats if c["id"] == chat_id]
    assert chat["activeStreamId"] == chat["activeRunId"]
    listed = api.get("/api/sessions").body["sessions"]
    (summary,) = [s for s in listed if s["id"] == session_id]
    return chat["activeRunId"], chat["isStreaming"], summary["hasStreaming"]
