"""Chat and message ids are unique per user: another user's turn in a chat of the same id, with
the same message id, is a turn of their own (202, not a 409 telling them the ids exist), and
the agent routes that take only a chat id answer each user for their own chat."""

from __future__ import annotations

from pathlib import Path

from tests.agent.conftest import AgentApi, wait_state
from tests.agent.test_stop_and_stream import wait_run
from tests.support import make_origin


def test_another_users_turn_with_the_same_chat_and_message_ids_is_their_own(
    agent_api: AgentApi, live_session: tuple[str, str], tmp_path: Path
) -> None:
    session_id, chat_id = live_session
    (tmp_path / "bob").mkdir()
    origin = make_origin(tmp_path / "bob")
    created = agent_api.post(
        "/api/sessions", {"repoUrl": f"file://{origin}", "branch": "feature"}, user="bob"
    )
    assert created.status == 201, created.body
    bob_session = str(created.body["session"]["id"])
    assert (
        wait_state(agent_api, bob_session, "active", "failed", user="bob")["lifecycleState"]
        == "active"
    )
    bobs_chat = agent_api.post(
        f"/api/sessions/{bob_session}/chats", {"id": chat_id}, user="bob"
    )  # alice's chat id
    assert bobs_chat.status == 200, bobs_chat.body

    agent_api.script.set([{"text": "for alice"}])
    assert agent_api.turn(session_id, chat_id, "alice asks", message_id="same").status == 202
    wait_run(agent_api, session_id, "completed")
    agent_api.script.set([{"text": "for bob"}])
    bobs = agent_api.turn(bob_session, chat_id, "bob asks", message_id="same", user="bob")
    assert bobs.status == 202, bobs.body
    (bobs_run,) = agent_api.get(f"/api/sessions/{bob_session}/runs", user="bob").body["runs"]
    assert bobs_run["runId"] == bobs.body["runId"]
    assert bobs_run["messageId"] == "same"

    stream = f"/api/chat/{chat_id}/stream"
    bob_stream = agent_api.get(stream, user="bob")
    alice_stream = agent_api.get(stream)
    assert bob_stream.status == 200, bob_stream.body
    assert bob_stream.body["runId"] == bobs.body["runId"]
    assert alice_stream.body["runId"] != bobs.body["runId"]
    for user, session, text in (
        ("alice", session_id, "alice asks"),
        ("bob", bob_session, "bob asks"),
    ):
        listed = agent_api.get(f"/api/sessions/{session}/chats/{chat_id}/messages", user=user).body[
            "messages"
        ]
        assert listed[0]["id"] == "same"
        assert listed[0]["parts"][0]["text"] == text
