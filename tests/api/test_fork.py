"""Forking a chat through a message (reference §2.2, §6.3), through both transports."""

from __future__ import annotations

import pytest
from openagents.settings import Settings

from tests.api.chat_support import conversation
from tests.api.test_chats import CHAT_KEYS, assert_error, chats_path, new_session
from tests.support import Api

MAX_CHATS = 3


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"max_chats_per_session": MAX_CHATS})


def fork_path(sid: str, chat_id: str) -> str:
    return f"{chats_path(sid)}/{chat_id}/fork"


def messages_of(api: Api, sid: str, chat_id: str, user: str = "alice") -> list[dict[str, object]]:
    reply = api.get(f"{chats_path(sid)}/{chat_id}/messages", user=user)
    assert reply.status == 200, reply.body
    messages: list[dict[str, object]] = reply.body["messages"]
    return messages


def test_fork_copies_the_messages_through_an_assistant_message(api: Api) -> None:
    sid, chat = new_session(api)
    conversation(api, sid, chat, 2)  # u0 a0 u1 a1: the first user message named the chat
    source = api.get(f"{chats_path(sid)}/{chat}").body["chat"]

    reply = api.post(fork_path(sid, chat), {"messageId": " a0 "})

    assert reply.status == 200, reply.body
    fork = reply.body["chat"]
    assert set(fork) == CHAT_KEYS
    assert fork["title"] == f"Fork of {source['title']}"
    assert fork["modelId"] == source["modelId"]
    assert fork["sessionId"] == sid
    assert fork["id"] != chat
    assert fork["hasUnread"] is False  # a fork starts read
    copies = messages_of(api, sid, fork["id"])
    originals = messages_of(api, sid, chat)[:2]
    assert [m["role"] for m in copies] == ["user", "assistant"]
    assert [m["parts"] for m in copies] == [m["parts"] for m in originals]
    assert {m["id"] for m in copies}.isdisjoint({"u0", "a0"})  # new ids
    listed = api.get(chats_path(sid)).body["chats"]
    assert [c["id"] for c in listed] == [chat, fork["id"]]
    assert listed[1]["lastAssistantMessageAt"] is not None
    assert len(messages_of(api, sid, chat)) == 4  # the source is untouched


def test_fork_with_a_client_id_is_idempotent(api: Api) -> None:
    sid, chat = new_session(api)
    conversation(api, sid, chat, 1)
    first = api.post(fork_path(sid, chat), {"messageId": "a0", "id": "my-fork"})
    again = api.post(fork_path(sid, chat), {"messageId": "a0", "id": "my-fork"})
    assert first.status == again.status == 200, (first.body, again.body)
    assert first.body["chat"]["id"] == again.body["chat"]["id"] == "my-fork"
    assert len(api.get(chats_path(sid)).body["chats"]) == 2
    assert len(messages_of(api, sid, "my-fork")) == 2


def test_a_fork_may_take_another_users_chat_id(api: Api) -> None:
    """Chat ids are unique per user: bob's fork takes alice's chat id as a fresh one."""
    sid, chat = new_session(api)
    bob_sid, bob_chat = new_session(api, user="bob")
    conversation(api, bob_sid, bob_chat, 1, user="bob")
    forked = api.post(fork_path(bob_sid, bob_chat), {"messageId": "a0", "id": chat}, user="bob")
    assert forked.status == 200, forked.body
    assert forked.body["chat"]["id"] == chat
    assert forked.body["chat"]["sessionId"] == bob_sid
    assert len(messages_of(api, bob_sid, chat, user="bob")) == 2
    assert messages_of(api, sid, chat) == []  # alice's chat of that id is untouched
    assert api.get(f"{chats_path(sid)}/{chat}", user="bob").status == 404


def test_fork_errors(api: Api) -> None:
    sid, chat = new_session(api)
    conversation(api, sid, chat, 1)
    other_sid, other_chat = new_session(api, title="Other")
    path = fork_path(sid, chat)
    assert_error(api.post(path, {}), 400, "invalid_input", "messageId")
    assert_error(api.post(path, {"messageId": "  "}), 400, "invalid_input", "messageId")
    assert_error(api.post(path, {"messageId": "nope"}), 404, "not_found", "messageId")
    assert_error(api.post(path, {"messageId": "u0"}), 400, "invalid_input", "messageId")
    taken = api.post(path, {"messageId": "a0", "id": other_chat})
    assert_error(taken, 409, "conflict", "id")
    assert_error(
        api.post(path, {"messageId": "a0", "id": "bad id!"}), 422, "validation_error", "id"
    )
    assert_error(api.post(path, {"messageId": "a0"}, user="bob"), 404, "not_found")
    assert_error(api.post(fork_path(other_sid, chat), {"messageId": "a0"}), 404, "not_found")
    assert [c["id"] for c in api.get(chats_path(sid)).body["chats"]] == [chat]  # none written


def test_fork_respects_the_chat_limit(api: Api) -> None:
    sid, chat = new_session(api)
    conversation(api, sid, chat, 1)
    for _ in range(MAX_CHATS - 1):
        assert api.post(fork_path(sid, chat), {"messageId": "a0"}).status == 200
    assert_error(api.post(fork_path(sid, chat), {"messageId": "a0"}), 409, "conflict")
    assert len(api.get(chats_path(sid)).body["chats"]) == MAX_CHATS
