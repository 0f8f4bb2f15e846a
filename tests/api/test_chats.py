"""Chats of a session (reference §2.2, §6.8), through both transports."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import botocore.session
import pynamodb.connection.base as pynamodb_base
import pytest
from openagents.settings import Settings

from tests.support import Api, HttpApi, LambdaApi, Reply

ERROR_KEYS = {"error", "code", "field"}
CHAT_KEYS = {
    "id",
    "sessionId",
    "title",
    "modelId",
    "activeStreamId",
    "activeRunId",
    "lastAssistantMessageAt",
    "createdAt",
    "updatedAt",
    "hasUnread",
    "isStreaming",
}


OFFERED = ("bedrock/model-1", "bedrock/model-2", "bedrock/model-3", "bedrock/claude-test")


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Models the registry offers (Bedrock's adapters are built on first use: none here)."""
    return settings.model_copy(update={"models": OFFERED, "default_model_id": OFFERED[0]})


def settings_of(api: Api) -> Settings:
    assert isinstance(api, LambdaApi | HttpApi)
    return api.settings


@pytest.fixture(autouse=True)
def _one_botocore_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Speed only: PynamoDB builds a new botocore session (reloading the service models,
    ~0.1 s) for every transaction; share one across the test's connections."""
    shared = botocore.session.get_session()
    monkeypatch.setattr(pynamodb_base, "get_session", lambda: shared)


def new_session(api: Api, user: str = "alice", title: str = "T") -> tuple[str, str]:
    created = api.post("/api/sessions", {"title": title}, user=user)
    assert created.status == 201, created.body
    return created.body["session"]["id"], created.body["chat"]["id"]


def chats_path(session_id: str) -> str:
    return f"/api/sessions/{session_id}/chats"


def chat_ids(api: Api, session_id: str, user: str = "alice") -> list[str]:
    listed = api.get(chats_path(session_id), user=user)
    assert listed.status == 200, listed.body
    return [chat["id"] for chat in listed.body["chats"]]


def assert_error(reply: Reply, status: int, code: str, field: str | None = None) -> None:
    assert reply.status == status, reply.body
    assert set(reply.error) == ERROR_KEYS
    assert reply.error["code"] == code
    assert reply.error["field"] == field


def stamp(value: str) -> datetime:
    return datetime.fromisoformat(value)


def user_message(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


# ------------------------------------------------------------------- list


def test_list_and_get_chats(api: Api) -> None:
    sid, first = new_session(api)
    second = api.post(chats_path(sid), {"id": "aaa-created-second"})
    third = api.post(chats_path(sid))
    assert second.status == 200, second.body
    assert third.status == 200, third.body

    listed = api.get(chats_path(sid))

    assert listed.status == 200
    assert set(listed.body) == {"chats", "defaultModelId"}
    assert listed.body["defaultModelId"] == settings_of(api).default_model_id
    chats = listed.body["chats"]
    # creation order, not id order
    assert [c["id"] for c in chats] == [first, "aaa-created-second", third.body["chat"]["id"]]
    for chat in chats:
        assert set(chat) == CHAT_KEYS
        assert chat["sessionId"] == sid
        assert chat["title"] == "New chat"
        assert chat["modelId"] == settings_of(api).default_model_id
        assert chat["hasUnread"] is False
        assert chat["isStreaming"] is False
        assert chat["activeStreamId"] is None
        assert chat["lastAssistantMessageAt"] is None

    got = api.get(f"{chats_path(sid)}/{first}")
    assert got.status == 200
    assert set(got.body) == {"chat"}
    assert got.body["chat"] == chats[0]


def test_default_model_comes_from_preferences(api: Api) -> None:
    sid, _ = new_session(api)
    saved = api.put("/api/user/preferences", {"defaultModelId": "bedrock/claude-test"})
    assert saved.status == 200, saved.body

    listed = api.get(chats_path(sid))
    created = api.post(chats_path(sid))

    assert listed.body["defaultModelId"] == "bedrock/claude-test"
    assert created.body["chat"]["modelId"] == "bedrock/claude-test"
    bob_sid, _ = new_session(api, user="bob")
    bobs = api.get(chats_path(bob_sid), user="bob")
    assert bobs.body["defaultModelId"] == settings_of(api).default_model_id


# ----------------------------------------------------------------- create


def test_create_chat_without_body_and_with_client_id(api: Api) -> None:
    sid, first = new_session(api)
    no_body = api.post(chats_path(sid))
    empty = api.post(chats_path(sid), {})
    null_id = api.post(chats_path(sid), {"id": None})

    for reply in (no_body, empty, null_id):
        assert reply.status == 200, reply.body
        chat = reply.body["chat"]
        assert set(chat) == CHAT_KEYS
        assert chat["title"] == "New chat"
        assert chat["sessionId"] == sid
        assert chat["hasUnread"] is False
    generated = [r.body["chat"]["id"] for r in (no_body, empty, null_id)]
    assert len(set(generated)) == 3
    assert chat_ids(api, sid) == [first, *generated]

    other_sid, other_first = new_session(api, title="Other")
    created = api.post(chats_path(other_sid), {"id": "my-chat-1"})
    again = api.post(chats_path(other_sid), {"id": "my-chat-1"})

    assert created.status == 200, created.body
    assert created.body["chat"]["id"] == "my-chat-1"
    assert again.status == 200, again.body
    assert again.body["chat"] == created.body["chat"]  # the same chat, not a new one
    assert chat_ids(api, other_sid) == [other_first, "my-chat-1"]
    got = api.get(f"{chats_path(other_sid)}/my-chat-1")
    assert got.status == 200
    assert got.body["chat"]["sessionId"] == other_sid


def test_client_chat_id_used_in_another_session_is_a_conflict(api: Api) -> None:
    sid, first = new_session(api)
    other_sid, other_first = new_session(api, title="Other")
    assert api.post(chats_path(sid), {"id": "my-chat-1"}).status == 200

    mine = api.post(chats_path(other_sid), {"id": "my-chat-1"})
    first_chat = api.post(chats_path(other_sid), {"id": first})

    assert_error(mine, 409, "conflict", "id")
    assert_error(first_chat, 409, "conflict", "id")
    assert chat_ids(api, other_sid) == [other_first]


def test_another_users_chat_id_is_a_fresh_id_for_them(api: Api) -> None:
    """Chat ids are unique per user: bob choosing alice's id gets a chat of his own (a 409
    would tell him the id exists), and neither sees the other's."""
    sid, _ = new_session(api)
    bob_sid, bob_first = new_session(api, user="bob")
    assert api.post(chats_path(sid), {"id": "my-chat-1"}).status == 200
    assert api.patch(f"{chats_path(sid)}/my-chat-1", {"title": "Alice's"}).status == 200

    bobs = api.post(chats_path(bob_sid), {"id": "my-chat-1"}, user="bob")
    again = api.post(chats_path(bob_sid), {"id": "my-chat-1"}, user="bob")  # idempotent

    assert bobs.status == 200
    assert bobs.body["chat"]["id"] == "my-chat-1"
    assert bobs.body["chat"]["sessionId"] == bob_sid
    assert bobs.body["chat"]["title"] != "Alice's"
    assert again.status == 200
    assert chat_ids(api, bob_sid, user="bob") == [bob_first, "my-chat-1"]
    assert api.get(f"{chats_path(sid)}/my-chat-1", user="bob").status == 404
    assert api.get(f"{chats_path(bob_sid)}/my-chat-1").status == 404
    assert api.get(f"{chats_path(sid)}/my-chat-1").body["chat"]["title"] == "Alice's"
    assert api.delete(f"{chats_path(bob_sid)}/my-chat-1", user="bob").status == 200
    assert api.get(f"{chats_path(sid)}/my-chat-1").status == 200


def test_invalid_chat_ids(api: Api) -> None:
    sid, first = new_session(api)
    for bad in ("", "a b", "x" * 65, "a/b", "a.b", "a#b", 5, ["x"], {"id": "x"}):
        reply = api.post(chats_path(sid), {"id": bad})
        assert_error(reply, 422, "validation_error", "id")
    assert_error(api.post(chats_path(sid), {"chatId": "x"}), 422, "validation_error", "chatId")
    assert_error(api.post(chats_path("no-such-session"), {"id": "orphan"}), 404, "not_found")
    assert chat_ids(api, sid) == [first]

    assert api.post(chats_path(sid), {"id": "x" * 64}).status == 200
    assert api.post(chats_path(sid), {"id": "Under_score-9"}).status == 200
    assert api.post(chats_path(sid), {"id": "orphan"}).status == 200  # nothing was claimed
    assert chat_ids(api, sid) == [first, "x" * 64, "Under_score-9", "orphan"]


# -------------------------------------------------------------------- one


def test_chat_of_another_session_is_not_found(api: Api) -> None:
    sid, _ = new_session(api)
    other_sid, other_chat = new_session(api, title="Other")

    for reply in (
        api.get(f"{chats_path(sid)}/{other_chat}"),
        api.get(f"{chats_path(sid)}/missing-chat"),
        api.patch(f"{chats_path(sid)}/{other_chat}", {"title": "Stolen"}),
        api.patch(f"{chats_path(sid)}/missing-chat", {"title": "Nope"}),
        api.delete(f"{chats_path(sid)}/{other_chat}"),
        api.get(f"{chats_path(sid)}/{other_chat}/messages"),
        api.post(f"{chats_path(sid)}/{other_chat}/messages", {"message": user_message("x1", "hi")}),
        api.post(f"{chats_path(sid)}/{other_chat}/read"),
    ):
        assert_error(reply, 404, "not_found")
        assert reply.error["error"] == "Chat not found"

    untouched = api.get(f"{chats_path(other_sid)}/{other_chat}")
    assert untouched.status == 200
    assert untouched.body["chat"]["title"] == "New chat"
    assert api.get(f"{chats_path(other_sid)}/{other_chat}/messages").body["messages"] == []


# ------------------------------------------------------------------ patch


def test_update_chat(api: Api) -> None:
    sid, chat = new_session(api)
    path = f"{chats_path(sid)}/{chat}"
    before = api.get(path).body["chat"]

    for body in ({"title": "   ", "modelId": ""}, {}, {"title": None, "modelId": None}):
        reply = api.patch(path, body)
        assert_error(reply, 400, "invalid_input", "title")
        assert reply.error["error"] == "At least one field is required"
    assert_error(api.patch(path, {"title": "t" * 201}), 400, "invalid_input", "title")
    assert_error(api.patch(path, {"title": 5}), 422, "validation_error", "title")
    assert_error(api.patch(path, {"name": "x"}), 422, "validation_error", "name")
    assert api.get(path).body["chat"] == before

    both = api.patch(path, {"title": "  New title  ", "modelId": "  bedrock/model-2 "})

    assert both.status == 200, both.body
    assert both.body["chat"]["title"] == "New title"
    assert both.body["chat"]["modelId"] == "bedrock/model-2"
    assert stamp(both.body["chat"]["updatedAt"]) > stamp(before["updatedAt"])
    got = api.get(path).body["chat"]
    assert (got["title"], got["modelId"]) == ("New title", "bedrock/model-2")

    title_only = api.patch(path, {"title": "Only title", "modelId": "   "})
    assert title_only.status == 200, title_only.body
    assert api.get(path).body["chat"]["modelId"] == "bedrock/model-2"
    model_only = api.patch(path, {"modelId": "bedrock/model-3"})
    assert model_only.status == 200, model_only.body
    got = api.get(path).body["chat"]
    assert (got["title"], got["modelId"]) == ("Only title", "bedrock/model-3")


@pytest.mark.parametrize(
    "model_id", ["evil/x", "openai/not-configured", "bedrock", "scripted/other", "bedrock/nope"]
)
def test_a_chat_takes_only_an_offered_model(api: Api, model_id: str) -> None:
    sid, chat = new_session(api)
    path = f"{chats_path(sid)}/{chat}"
    before = api.get(path).body["chat"]
    refused = api.patch(path, {"modelId": model_id, "title": "Not written either"})
    assert_error(refused, 400, "model_unavailable", "modelId")
    assert api.get(path).body["chat"] == before  # nothing half-written
    theirs = api.patch(path, {"modelId": model_id}, user="bob")
    assert_error(theirs, 404, "not_found")  # another user's chat: not found, whatever the id


@pytest.mark.parametrize("model_id", ["evil/x", "openai/not-configured", "bedrock/nope"])
def test_preferences_take_only_an_offered_model(api: Api, model_id: str) -> None:
    saved = api.put("/api/user/preferences", {"defaultModelId": OFFERED[1]})
    assert saved.status == 200, saved.body
    refused = api.put("/api/user/preferences", {"defaultModelId": model_id, "autoCommitPush": True})
    assert_error(refused, 400, "model_unavailable", "defaultModelId")
    kept = api.get("/api/user/preferences").body
    assert (kept["defaultModelId"], kept["autoCommitPush"]) == (OFFERED[1], False)
    cleared = api.put("/api/user/preferences", {"defaultModelId": None})
    assert cleared.status == 200, cleared.body
    assert cleared.body["defaultModelId"] is None


# ----------------------------------------------------------------- delete


def test_delete_chat_and_its_messages(api: Api) -> None:
    sid, first = new_session(api)
    only = api.delete(f"{chats_path(sid)}/{first}")
    assert only.status == 400, only.body
    assert only.error["code"] == "invalid_input"
    assert only.error["error"] == "Cannot delete the only chat in a session"
    assert chat_ids(api, sid) == [first]

    assert api.post(chats_path(sid), {"id": "second-chat"}).status == 200
    path = f"{chats_path(sid)}/second-chat"
    posted = api.post(f"{path}/messages", {"message": user_message("m-del", "remember me")})
    assert posted.status == 200, posted.body

    deleted = api.delete(path)

    assert deleted.status == 200, deleted.body
    assert deleted.body == {"success": True}
    assert_error(api.get(path), 404, "not_found")
    assert_error(api.delete(path), 404, "not_found")
    assert_error(api.get(f"{path}/messages"), 404, "not_found")
    assert chat_ids(api, sid) == [first]

    # the chat id and its messages' ids are free again; nothing old comes back
    recreated = api.post(chats_path(sid), {"id": "second-chat"})
    assert recreated.status == 200, recreated.body
    assert recreated.body["chat"]["title"] == "New chat"
    assert api.get(f"{path}/messages").body["messages"] == []
    again = api.post(f"{path}/messages", {"message": user_message("m-del", "new text")})
    assert again.body == {"success": True, "status": "inserted"}
    assert api.get(f"{path}/messages").body["messages"] == [user_message("m-del", "new text")]

    assert api.delete(f"{chats_path(sid)}/{first}").status == 200
    last = api.delete(path)
    assert last.status == 400, last.body
    assert last.error["error"] == "Cannot delete the only chat in a session"
    assert chat_ids(api, sid) == ["second-chat"]


# ------------------------------------------------------------ other users


def test_another_user_gets_404_on_every_chat_route(api: Api) -> None:
    sid, chat = new_session(api)
    base = chats_path(sid)
    path = f"{base}/{chat}"

    for reply in (
        api.get(base, user="bob"),
        api.post(base, user="bob"),
        api.post(base, {"id": "bob-chat"}, user="bob"),
        api.get(path, user="bob"),
        api.patch(path, {"title": "Mine now"}, user="bob"),
        api.delete(path, user="bob"),
        api.get(f"{path}/messages", user="bob"),
        api.post(f"{path}/messages", {"message": user_message("b-1", "hi")}, user="bob"),
        api.post(f"{path}/read", user="bob"),
    ):
        assert_error(reply, 404, "not_found")
        assert reply.error["error"] == "Session not found"
    for reply in (
        api.get(base, user=None),
        api.post(base, user=None),
        api.get(f"{path}/messages", user=None),
    ):
        assert_error(reply, 401, "unauthenticated")

    assert chat_ids(api, sid) == [chat]
    assert api.get(path).body["chat"]["title"] == "New chat"
    assert api.get(f"{path}/messages").body["messages"] == []
    # bob's rejected create claimed nothing
    bob_sid, _ = new_session(api, user="bob")
    assert api.post(chats_path(bob_sid), {"id": "bob-chat"}, user="bob").status == 200
