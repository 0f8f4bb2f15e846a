"""A chat id names its session (the agent routes take only a chat id), on both adapters."""

from __future__ import annotations

from openagents.store.port import Store

from tests.contract.helpers import create, new_chat


def test_a_chat_id_finds_its_session_and_an_unknown_one_finds_none(store: Store) -> None:
    session = create(store)
    second = new_chat(session.id, "chat-two")
    store.create_chat(session, second, 100)
    first = next(chat for chat in store.list_chats(session.id) if chat.id != second.id)
    assert store.chat_session(first.id) == session.id  # the session's first chat
    assert store.chat_session(second.id) == session.id
    assert store.chat_session("no-such-chat") is None
