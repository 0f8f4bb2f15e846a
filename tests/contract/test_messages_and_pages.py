"""Messages and their bodies (inline, or a pointer to the artifact store), the item size
limit, and cursors: opaque, checked, and stable under inserts."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from openagents.domain.errors import Unavailable
from openagents.domain.models import Chat, ListFilter, Role, Session
from openagents.store import cursor as cursors
from openagents.store.port import Activity, BadCursor, Gone, MessageIdTaken, Store

from tests.contract.conftest import Backend
from tests.contract.helpers import create, entry, message, new_chat, sandbox_handle


@pytest.fixture
def target(store: Store) -> tuple[Session, Chat]:
    session = create(store)
    (chat,) = store.list_chats(session.id)
    return session, chat


def big(backend: Backend, message_id: str = "big") -> dict[str, Any]:
    text = "x" * (backend.settings.inline_message_bytes + 10)
    return {"id": message_id, "role": "assistant", "parts": [{"type": "text", "text": text}]}


def test_messages_insert_update_and_list_in_order(
    store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    t0 = datetime.now(UTC)
    first = message(chat, "u-1", Role.USER, "Fix the login bug", at=t0)
    assert store.put_message(session, chat, first, activity=None) == "inserted"
    named = store.get_chat(session.id, chat.id)
    assert named is not None
    assert named.title != "New chat"  # the first user message names the chat
    assert named.message_count == 1
    reply = message(chat, "a-1", Role.ASSISTANT, "on it", at=t0 + timedelta(seconds=1))
    assert store.put_message(session, chat, reply, activity=None) == "inserted"
    longer = message(chat, "a-1", Role.ASSISTANT, "done", at=t0 + timedelta(seconds=1))
    assert store.put_message(session, chat, longer, activity=None) == "updated"
    again = message(chat, "u-1", Role.USER, "changed?", at=t0)
    assert store.put_message(session, chat, again, activity=None) == "unchanged"

    page = store.list_messages(chat.session_id, chat.id, 10, None)
    assert [(m.id, m.parts["parts"][0]["text"]) for m in page.items] == [
        ("u-1", "Fix the login bug"),
        ("a-1", "done"),
    ]
    assert page.cursor is None
    stored = store.get_session(session.id)
    assert stored is not None
    mark = stored.chats[chat.id]
    assert mark.last_assistant_message_at == reply.created_at
    assert stored.has_unread
    second_title = store.get_chat(session.id, chat.id)
    assert second_title is not None
    assert second_title.title == named.title  # only the first message names it


def test_message_ids_are_unique_across_chats_and_roles(
    store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    other = new_chat(session.id)
    store.create_chat(session, other, 10)
    store.put_message(session, chat, message(chat, "m"), activity=None)
    with pytest.raises(MessageIdTaken):
        store.put_message(session, other, message(other, "m"), activity=None)
    with pytest.raises(MessageIdTaken):
        store.put_message(session, chat, message(chat, "m", Role.USER), activity=None)
    assert store.list_messages(other.session_id, other.id, 10, None).items == []


def test_a_message_to_a_missing_chat_is_gone(store: Store, target: tuple[Session, Chat]) -> None:
    session, _ = target
    ghost = new_chat(session.id)
    with pytest.raises(Gone):
        store.put_message(session, ghost, message(ghost, "m"), activity=None)


def test_activity_refreshes_the_session_and_its_due_time(
    store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    now = datetime.now(UTC)
    activity = Activity(
        at=now,
        hibernate_after=now + timedelta(minutes=30),
        due_at=now - timedelta(seconds=1),
        due_shard="due#3",
    )
    store.put_message(session, chat, message(chat, "u", Role.USER), activity=activity)
    stored = store.get_session(session.id)
    assert stored is not None
    assert stored.last_activity_at == now
    assert stored.hibernate_after == now + timedelta(minutes=30)
    assert session.id in store.overdue(now)


def test_large_bodies_live_in_the_artifact_store(
    backend: Backend, store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    body = big(backend)
    huge = message(chat, "big").model_copy(update={"parts": body})
    assert store.put_message(session, chat, huge, activity=None) == "inserted"
    (stored,) = backend.files()
    assert json.loads(stored.read_text()) == body
    assert store.list_messages(chat.session_id, chat.id, 10, None).items[0].parts == body

    small = message(chat, "big", text="short")
    assert store.put_message(session, chat, small, activity=None) == "updated"
    assert backend.files() == []  # the replaced body is dropped
    assert store.list_messages(chat.session_id, chat.id, 10, None).items[0].parts == small.parts

    assert store.put_message(session, chat, huge, activity=None) == "updated"
    assert len(backend.files()) == 1
    assert store.list_messages(chat.session_id, chat.id, 10, None).items[0].parts == body


def test_deleting_a_chat_drops_its_messages_and_bodies(
    backend: Backend, store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    huge = message(chat, "big").model_copy(update={"parts": big(backend)})
    store.put_message(session, chat, huge, activity=None)
    store.put_message(session, chat, message(chat, "s"), activity=None)
    second = new_chat(session.id, "second")
    store.create_chat(session, second, 10)
    assert len(backend.files()) == 1

    store.delete_chat(session, chat.id)

    assert backend.files() == []
    assert store.list_messages(chat.session_id, chat.id, 10, None).items == []
    assert store.get_chat(session.id, chat.id) is None
    assert store.get_chat(session.id, "second") is not None
    # the message ids are free again
    assert store.put_message(session, second, message(second, "big"), activity=None) == ("inserted")


def test_a_refused_message_leaves_no_artifact(
    backend: Backend, store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    other = new_chat(session.id)
    store.create_chat(session, other, 10)
    original = message(chat, "m", text="original")
    store.put_message(session, chat, original, activity=None)
    huge = message(other, "m").model_copy(update={"parts": big(backend, "m")})
    with pytest.raises(MessageIdTaken):
        store.put_message(session, other, huge, activity=None)
    assert backend.files() == []
    assert store.list_messages(chat.session_id, chat.id, 10, None).items[0].parts == original.parts


def test_items_over_400_kb_are_refused(store: Store, target: tuple[Session, Chat]) -> None:
    session, _ = target
    fits = entry(session.id).model_copy(update={"detail": {"blob": "y" * 300_000}})
    store.append_entry(fits)
    too_big = entry(session.id).model_copy(update={"detail": {"blob": "y" * 420_000}})
    with pytest.raises(Unavailable):
        store.append_entry(too_big)
    assert [e.id for e in store.list_events(session.id, 10, None).items[1:]] == [fits.id]


def test_session_pages_are_stable_under_inserts(store: Store) -> None:
    base = datetime.now(UTC) - timedelta(hours=1)
    made = [create(store, at=base + timedelta(seconds=i)) for i in range(5)]
    first = store.list_sessions("alice", ListFilter.ALL, 2, None)
    assert [s.id for s in first.items] == [made[4].id, made[3].id]
    assert first.cursor is not None
    create(store)  # newer than all: it must not shift the next pages
    create(store, "bob")
    second = store.list_sessions("alice", ListFilter.ALL, 2, first.cursor)
    third = store.list_sessions("alice", ListFilter.ALL, 2, second.cursor)
    assert [s.id for s in second.items] == [made[2].id, made[1].id]
    assert [s.id for s in third.items] == [made[0].id]
    assert third.cursor is None
    active = store.list_sessions("alice", ListFilter.ACTIVE, 10, None)
    assert len(active.items) == 6
    assert store.list_sessions("alice", ListFilter.ARCHIVED, 10, None).items == []


def test_listed_sessions_carry_the_list_fields_only(store: Store) -> None:
    session = create(store)
    store.transition(
        session.id,
        expect=frozenset({session.lifecycle_state}) if session.lifecycle_state else frozenset(),
        changes={"sandbox": sandbox_handle(session.id), "lines_added": 4},
        entry=None,
    )
    (listed,) = store.list_sessions("alice", ListFilter.ALL, 10, None).items
    assert listed.id == session.id
    assert listed.user_id == "alice"
    assert listed.lines_added == 4
    assert set(listed.chats) == set(session.chats)
    assert listed.sandbox is None  # not projected by the list


def test_message_and_event_pages_are_stable_under_inserts(
    store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    t0 = datetime.now(UTC) - timedelta(minutes=5)
    for i in range(3):
        store.put_message(
            session, chat, message(chat, f"m{i}", at=t0 + timedelta(seconds=i)), activity=None
        )
        store.append_entry(entry(session.id, f"e{i}", at=t0 + timedelta(seconds=i)))
    page = store.list_messages(chat.session_id, chat.id, 2, None)
    events = store.list_events(session.id, 2, None)
    assert page.cursor is not None
    assert events.cursor is not None
    store.put_message(session, chat, message(chat, "m3"), activity=None)
    store.append_entry(entry(session.id, "e3"))
    rest = store.list_messages(chat.session_id, chat.id, 10, page.cursor)
    assert [m.id for m in page.items + rest.items] == ["m0", "m1", "m2", "m3"]
    more = store.list_events(session.id, 10, events.cursor)
    kinds = [e.type for e in events.items + more.items]
    assert kinds == ["e0", "e1", "e2", "session.created", "e3"]


def test_cursors_are_opaque_and_checked(store: Store, target: tuple[Session, Chat]) -> None:
    session, chat = target
    for i in range(3):
        store.put_message(session, chat, message(chat, f"m{i}"), activity=None)
    page = store.list_messages(chat.session_id, chat.id, 1, None)
    assert page.cursor is not None
    assert "m0" not in page.cursor
    assert "M#" not in page.cursor
    with pytest.raises(BadCursor):
        store.list_messages(chat.session_id, chat.id, 1, "garbage")
    with pytest.raises(BadCursor):  # a cursor of another kind
        store.list_sessions("alice", ListFilter.ALL, 1, page.cursor)
    with pytest.raises(BadCursor):
        store.list_events(session.id, 1, cursors.encode("M#0000000000001#x"))
