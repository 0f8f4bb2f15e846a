"""Model failures and the step limit end the run failed with a readable error; the partial
message is kept."""

from __future__ import annotations

import pytest
from openagents.settings import Settings

from tests.agent.conftest import AgentApi
from tests.agent.test_stop_and_stream import wait_run


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"agent_max_steps": 5})


def test_an_exhausted_script_fails_the_run_readably(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set(
        [{"text": "Listing.", "toolCalls": [{"name": "glob", "input": {"pattern": "*"}}]}]
    )
    agent_api.turn(session_id, chat_id, "go")
    run = wait_run(agent_api, session_id, "failed", "completed")
    assert run["status"] == "failed"
    assert run["error"] == "scripted model has no response for step 1"
    events = [e["chunk"] for e in agent_api.events(chat_id)]
    assert {"type": "error", "errorText": "scripted model has no response for step 1"} in events
    assert events[-1] == {"type": "finish", "finishReason": "error"}
    parts = agent_api.get(f"/api/sessions/{session_id}/chats/{chat_id}/messages").body["messages"][
        -1
    ]["parts"]
    assert {"type": "text", "text": "Listing.", "state": "done"} in parts


def test_the_step_limit_fails_the_run(agent_api: AgentApi, live_session: tuple[str, str]) -> None:
    session_id, chat_id = live_session
    looping = {"toolCalls": [{"name": "bash", "input": {"command": "true"}}]}
    agent_api.script.set([looping] * 10)
    agent_api.turn(session_id, chat_id, "loop forever")
    run = wait_run(agent_api, session_id, "failed", "completed")
    assert run["status"] == "failed"
    assert run["error"] == "The turn reached its limit of 5 steps."
    assert run["steps"] == 10  # five model calls and their five tool calls; the sixth stops
