"""Every error path of the agent routes, in the API's error shape ({error, code, field})."""

from __future__ import annotations

from openagents.domain.models import LifecycleState
from openagents.store.sqlite import SqliteStore

from tests.agent.conftest import AgentApi
from tests.agent.test_stop_and_stream import wait_run

USER_MESSAGE = {"id": "m-err", "role": "user", "parts": [{"type": "text", "text": "hi"}]}


def body(session_id: str, chat_id: str, **extra: object) -> dict[str, object]:
    return {"sessionId": session_id, "chatId": chat_id, "message": USER_MESSAGE, **extra}


def set_state(api: AgentApi, session_id: str, old: LifecycleState, new: LifecycleState) -> None:
    store = SqliteStore(api.settings.sqlite_path, None, api.settings.inline_message_bytes)  # type: ignore[arg-type]
    try:
        store.transition(
            session_id, expect=frozenset({old}), changes={"lifecycle_state": new}, entry=None
        )
    finally:
        store.db.close()


def test_post_chat_guards_in_order(agent_api: AgentApi, live_session: tuple[str, str]) -> None:
    session_id, chat_id = live_session
    assert agent_api.post("/api/chat", body(session_id, chat_id), user=None).status == 401
    bot = agent_api.post(
        "/api/chat", body(session_id, chat_id), headers={"user-agent": "HeadlessChrome/120"}
    )
    assert bot.status == 403
    assert bot.error["code"] == "access_denied"
    broken = agent_api.request(
        "POST", "/api/chat", raw_body=b"{", headers={"content-type": "application/json"}
    )
    assert broken.status == 400
    assert broken.error["code"] == "invalid_json"
    missing = agent_api.post("/api/chat", {"sessionId": session_id, "chatId": chat_id})
    assert missing.status == 422
    assert missing.error["field"] == "message"
    no_id = agent_api.post(
        "/api/chat", body(session_id, chat_id, message={"role": "user", "parts": []})
    )
    assert no_id.status == 422
    assert no_id.error["field"] == "message.id"
    assistant = agent_api.post(
        "/api/chat", body(session_id, chat_id, message={**USER_MESSAGE, "role": "assistant"})
    )
    assert assistant.status == 400
    assert assistant.error["field"] == "message.role"
    for who, session, chat in (("bob", session_id, chat_id), ("alice", session_id, "nope")):
        hidden = agent_api.post("/api/chat", body(session, chat), user=who)
        assert hidden.status == 404, (who, chat)
        assert hidden.error["code"] == "not_found"
    for model in ("openai/not-configured", "nonsense", "bedrock"):
        bad = agent_api.post("/api/chat", body(session_id, chat_id, modelId=model))
        assert bad.status == 400, model
        assert bad.error["code"] == "model_unavailable"
        assert bad.error["field"] == "modelId"
    set_state(agent_api, session_id, LifecycleState.ACTIVE, LifecycleState.FAILED)
    failed = agent_api.post("/api/chat", body(session_id, chat_id))
    assert failed.status == 409
    assert failed.error["code"] == "sandbox_unavailable"
    set_state(agent_api, session_id, LifecycleState.FAILED, LifecycleState.ACTIVE)
    archived = agent_api.patch(f"/api/sessions/{session_id}", {"status": "archived"})
    assert archived.status == 200, archived.body
    refused = agent_api.post("/api/chat", body(session_id, chat_id))
    assert refused.status == 409
    assert refused.error["code"] == "session_archived"
    # nothing was half-written: no run, no message
    assert agent_api.get(f"/api/sessions/{session_id}/runs").body["runs"] == []
    messages = agent_api.get(f"/api/sessions/{session_id}/chats/{chat_id}/messages").body
    assert messages["messages"] == []


def test_stream_stop_runs_and_models_errors(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    stream = f"/api/chat/{chat_id}/stream"
    assert agent_api.get(stream, user=None).status == 401
    assert agent_api.get(stream).status == 204  # no run yet
    assert agent_api.post(f"/api/chat/{chat_id}/stop").body == {
        "success": True,
        "runId": None,
        "status": None,
    }
    for query in ({"after": "-1"}, {"wait": "26"}, {"after": "x"}):
        bad = agent_api.get(stream, query=query)
        assert bad.status == 422, query
        assert bad.error["field"] == next(iter(query))
    agent_api.script.set([{"text": "hello there"}])
    assert agent_api.post("/api/chat", body(session_id, chat_id)).status == 202
    wait_run(agent_api, session_id, "completed")
    assert agent_api.get(stream, user="bob").status == 404
    assert agent_api.post(f"/api/chat/{chat_id}/stop", user="bob").status == 404
    assert agent_api.post(f"/api/chat/{chat_id}/stop").body["status"] == "completed"
    runs = f"/api/sessions/{session_id}/runs"
    assert agent_api.get(runs, user=None).status == 401
    assert agent_api.get(runs, user="bob").status == 404
    cursor = agent_api.get(runs, query={"cursor": "garbage"})
    assert cursor.status == 400
    assert cursor.error["field"] == "cursor"
    assert agent_api.get("/api/models", user=None).status == 401
    models = agent_api.get("/api/models").body
    assert models["defaultModelId"] == "scripted/default"
    assert [m["id"] for m in models["models"]] == ["scripted/default"]
    assert models["message"] is None
