"""Chat and message ids are chosen by clients, so they are unique per user and never across
users: a chat id names its session for its own user only (the agent routes take only a chat
id), and another user may choose the same chat and message ids for chats of their own, which
then live independently. On both adapters."""

from __future__ import annotations

import pytest
from openagents.domain.models import Role, Session
from openagents.store.port import ChatIdTaken, Store

from tests.contract.helpers import create, message, new_chat


def test_a_chat_id_finds_its_session_and_an_unknown_one_finds_none(store: Store) -> None:
    session = create(store)
    second = new_chat(session.id, "chat-two")
    store.create_chat(session, second, 100)
    first = next(chat for chat in store.list_chats(session.id) if chat.id != second.id)
    assert store.chat_session("alice", first.id) == session.id  # the session's first chat
    assert store.chat_session("alice", second.id) == session.id
    assert store.chat_session("alice", "no-such-chat") is None
    assert store.chat_session("bob", second.id) is None  # alice's id is not bob's


def _texts(store: Store, session: Session, chat_id: str) -> list[str]:
    page = store.list_messages(session.id, chat_id, 10, None)
    return [str(m.parts["parts"][0]["text"]) for m in page.items]


def test_another_user_may_use_the_same_chat_and_message_ids(store: Store) -> None:
    alice, bob = create(store, "alice"), create(store, "bob")
    for session, text in ((alice, "from alice"), (bob, "from bob")):
        chat = new_chat(session.id, "same-chat")
        store.create_chat(session, chat, 100)
        stored = store.get_session(session.id)
        assert stored is not None
        for message_id in ("same-user-message", "same-reply"):
            role = Role.USER if message_id == "same-user-message" else Role.ASSISTANT
            written = message(chat, message_id, role, text=text)
            assert store.put_message(stored, chat, written, activity=None) == "inserted"
    assert store.chat_session("alice", "same-chat") == alice.id
    assert store.chat_session("bob", "same-chat") == bob.id
    assert _texts(store, alice, "same-chat") == ["from alice", "from alice"]
    assert _texts(store, bob, "same-chat") == ["from bob", "from bob"]
    # an id is still the user's own once: alice's other session cannot take hers again
    other = create(store, "alice")
    with pytest.raises(ChatIdTaken) as taken:
        store.create_chat(other, new_chat(other.id, "same-chat"), 100)
    assert taken.value.session_id == alice.id


def test_a_session_and_a_fork_may_take_another_users_chat_id(store: Store) -> None:
    alice = create(store, "alice", suffix="shared-suffix-a")
    (first_id,) = alice.chats
    bob = create(store, "bob")
    fork = new_chat(bob.id, first_id)
    store.fork_chat(bob, fork, [message(fork, "copied", Role.USER)], 100)
    assert store.chat_session("bob", first_id) == bob.id
    assert store.chat_session("alice", first_id) == alice.id
    assert store.list_messages(alice.id, first_id, 10, None).items == []
    assert [m.id for m in store.list_messages(bob.id, first_id, 10, None).items] == ["copied"]


def test_deleting_one_users_chat_leaves_the_others_same_id_alone(store: Store) -> None:
    alice, bob = create(store, "alice"), create(store, "bob")
    for session in (alice, bob):
        chat = new_chat(session.id, "doomed-id")
        store.create_chat(session, chat, 100)
        stored = store.get_session(session.id)
        assert stored is not None
        store.put_message(stored, chat, message(chat, "m-1", Role.USER), activity=None)
        store.share_chat(chat, f"share-{session.user_id}")
    bob_now = store.get_session(bob.id)
    assert bob_now is not None
    store.delete_chat(bob_now, "doomed-id")
    store.purge_deleted()
    assert store.chat_session("bob", "doomed-id") is None
    assert store.chat_session("alice", "doomed-id") == alice.id
    assert [m.id for m in store.list_messages(alice.id, "doomed-id", 10, None).items] == ["m-1"]
    assert store.shared_chat("share-bob") is None
    shared = store.shared_chat("share-alice")
    assert shared is not None
    assert shared.session_id == alice.id
    # the freed id is bob's again; alice's claim still holds
    bob_now = store.get_session(bob.id)
    assert bob_now is not None
    store.create_chat(bob_now, new_chat(bob.id, "doomed-id"), 100)
    store.delete_session(bob_now)
    store.purge_deleted()
    assert store.chat_session("alice", "doomed-id") == alice.id
    assert [m.id for m in store.list_messages(alice.id, "doomed-id", 10, None).items] == ["m-1"]
