"""Delete-from-here, upward paging, forks and share links, on both adapters."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from openagents.domain.models import Chat, Message, Role, Session
from openagents.store.port import (
    BadCursor,
    ChatIdTaken,
    Gone,
    NoSuchMessage,
    NotUserMessage,
    Store,
    TooManyChats,
)

from tests.contract.conftest import Backend
from tests.contract.helpers import create, message, new_chat

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@pytest.fixture
def target(store: Store) -> tuple[Session, Chat]:
    session = create(store)
    (chat,) = store.list_chats(session.id)
    return session, chat


def conversation(store: Store, session: Session, chat: Chat, turns: int) -> list[Message]:
    """``turns`` user/assistant pairs, a second apart."""
    written: list[Message] = []
    for n in range(turns):
        for offset, role in ((0, Role.USER), (1, Role.ASSISTANT)):
            at = T0 + timedelta(seconds=2 * n + offset)
            kept = message(chat, f"{role.value[0]}{n}-{chat.id}", role, f"text {n}", at=at)
            store.put_message(session, chat, kept, activity=None)
            written.append(kept)
    return written


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def big_body(backend: Backend, message_id: str) -> dict[str, Any]:
    text = "x" * (backend.settings.inline_message_bytes + 10)
    return {"id": message_id, "role": "assistant", "parts": [{"type": "text", "text": text}]}


# ------------------------------------------------------------------ delete from here


def test_delete_from_a_user_message_drops_it_and_every_later_one(
    store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    written = conversation(store, session, chat, 3)  # u0 a0 u1 a1 u2 a2
    at = T0 + timedelta(minutes=5)

    deleted = store.delete_messages_from(session, chat, written[2].id, at)

    assert deleted == ids(written[2:])
    assert ids(store.list_messages(chat.session_id, chat.id, 10, None).items) == ids(written[:2])
    stored = store.get_chat(session.id, chat.id)
    assert stored is not None
    assert stored.last_assistant_message_at == written[1].created_at  # a0 is the latest left
    assert stored.message_count == 2
    assert stored.updated_at == at
    mark = (store.get_session(session.id) or session).chats[chat.id]
    assert mark.last_assistant_message_at == written[1].created_at
    # the ids are free again: the same user message can be sent anew
    assert store.put_message(session, chat, written[2], activity=None) == "inserted"


def test_delete_from_the_first_message_leaves_no_assistant_time(
    store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    written = conversation(store, session, chat, 2)
    assert store.delete_messages_from(session, chat, written[0].id, T0) == ids(written)
    stored = store.get_chat(session.id, chat.id)
    assert stored is not None
    assert stored.last_assistant_message_at is None
    assert stored.message_count == 0
    mark = (store.get_session(session.id) or session).chats[chat.id]
    assert mark.last_assistant_message_at is None
    assert store.list_messages(chat.session_id, chat.id, 10, None).items == []


def test_delete_from_refuses_assistant_unknown_and_foreign_messages(
    backend: Backend, store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    written = conversation(store, session, chat, 2)
    other = new_chat(session.id)
    store.create_chat(session, other, 10)
    foreign = conversation(store, session, other, 1)
    before = backend.snapshot()
    with pytest.raises(NotUserMessage):
        store.delete_messages_from(session, chat, written[1].id, T0)
    with pytest.raises(NoSuchMessage):
        store.delete_messages_from(session, chat, "no-such-message", T0)
    with pytest.raises(NoSuchMessage):
        store.delete_messages_from(session, chat, foreign[0].id, T0)  # another chat's
    assert backend.snapshot() == before  # nothing written


def test_delete_from_drops_large_bodies(
    backend: Backend, store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    store.put_message(session, chat, message(chat, "u", Role.USER, at=T0), activity=None)
    huge = message(chat, "big", at=T0 + timedelta(seconds=1))
    huge = huge.model_copy(update={"parts": big_body(backend, "big")})
    store.put_message(session, chat, huge, activity=None)
    assert len(backend.files()) == 1
    assert store.delete_messages_from(session, chat, "u", T0) == ["u", "big"]
    assert backend.files() == []


# ------------------------------------------------------------------ upward paging


def test_paging_up_from_the_end_returns_pages_newest_last(
    store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    written = conversation(store, session, chat, 4)  # 8 messages

    last = store.list_messages(chat.session_id, chat.id, 3, None, before=True)
    assert ids(last.items) == ids(written[5:])
    assert last.cursor is not None
    middle = store.list_messages(chat.session_id, chat.id, 3, last.cursor, before=True)
    assert ids(middle.items) == ids(written[2:5])
    first = store.list_messages(chat.session_id, chat.id, 3, middle.cursor, before=True)
    assert ids(first.items) == ids(written[:2])
    assert first.cursor is None  # nothing older

    # a page's cursor names its oldest message: forward from it is the rest of the chat
    rest = store.list_messages(chat.session_id, chat.id, 10, middle.cursor)
    assert ids(rest.items) == ids(written[3:])


def test_paging_up_a_short_chat_is_one_page_and_bad_cursors_are_refused(
    store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    written = conversation(store, session, chat, 1)
    page = store.list_messages(chat.session_id, chat.id, 10, None, before=True)
    assert ids(page.items) == ids(written)
    assert page.cursor is None
    assert store.list_messages(chat.session_id, "no-such-chat", 10, None, before=True).items == []
    with pytest.raises(BadCursor):
        store.list_messages(chat.session_id, chat.id, 10, "not-a-cursor", before=True)


# ------------------------------------------------------------------------ forks


def fork_of(
    chat: Chat, messages: list[Message], fork_id: str | None = None
) -> tuple[Chat, list[Message]]:
    now = datetime.now(UTC)
    fork = Chat(
        id=fork_id or f"fork-{uuid.uuid4().hex[:8]}",
        session_id=chat.session_id,
        title=f"Fork of {chat.title}",
        model_id=chat.model_id,
        last_assistant_message_at=messages[-1].created_at,
        message_count=len(messages),
        created_at=now,
        updated_at=now,
    )
    copies = []
    for original in messages:
        new_id = uuid.uuid4().hex
        parts = {**original.parts, "id": new_id}
        copies.append(
            original.model_copy(update={"id": new_id, "chat_id": fork.id, "parts": parts})
        )
    return fork, copies


def test_a_fork_holds_its_copies_and_starts_read(
    backend: Backend, store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    written = conversation(store, session, chat, 2)
    written[1] = written[1].model_copy(update={"parts": big_body(backend, written[1].id)})
    store.put_message(session, chat, written[1], activity=None)  # a large body, copied too
    fork, copies = fork_of(chat, written[:2])

    store.fork_chat(session, fork, copies, 10)

    listed = store.list_messages(fork.session_id, fork.id, 10, None).items
    assert [(m.id, m.role, m.created_at, m.parts) for m in listed] == [
        (c.id, c.role, c.created_at, c.parts) for c in copies
    ]
    stored = store.get_chat(session.id, fork.id)
    assert stored is not None
    assert (stored.title, stored.message_count) == (fork.title, 2)
    assert stored.last_assistant_message_at == written[1].created_at
    mark = (store.get_session(session.id) or session).chats[fork.id]
    assert not mark.has_unread
    assert ids(store.list_messages(chat.session_id, chat.id, 10, None).items) == ids(
        written
    )  # source unchanged
    assert len(backend.files()) == 2  # the source's body and the copy's


def test_a_refused_fork_leaves_nothing(
    backend: Backend, store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    written = conversation(store, session, chat, 1)
    before = backend.snapshot()
    files = backend.files()
    taken, copies = fork_of(chat, written, fork_id=chat.id)
    with pytest.raises(ChatIdTaken):
        store.fork_chat(session, taken, copies, 10)
    full, copies = fork_of(chat, written)
    with pytest.raises(TooManyChats):
        store.fork_chat(session, full, copies, 1)
    assert backend.snapshot() == before
    assert backend.files() == files
    ghost = session.model_copy(update={"id": "no-such-session"})
    lost, copies = fork_of(chat.model_copy(update={"session_id": ghost.id}), written)
    with pytest.raises(Gone):
        store.fork_chat(ghost, lost, copies, 10)


# ------------------------------------------------------------------ share links


def test_a_share_link_is_created_once_and_resolves_to_its_chat(
    store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    assert store.shared_chat("nope") is None
    assert store.share_chat(chat, "share-one") == "share-one"
    assert store.share_chat(chat, "share-two") == "share-one"  # created once
    assert store.shared_chat("share-two") is None
    shared = store.shared_chat("share-one")
    assert shared is not None
    assert (shared.id, shared.share_id) == (chat.id, "share-one")
    stored = store.get_chat(session.id, chat.id)
    assert stored is not None
    assert stored.share_id == "share-one"


def test_revoking_a_link_ends_it_and_a_new_one_can_follow(
    store: Store, target: tuple[Session, Chat]
) -> None:
    _, chat = target
    store.share_chat(chat, "first")
    store.unshare_chat(chat)
    store.unshare_chat(chat)  # idempotent
    assert store.shared_chat("first") is None
    assert store.share_chat(chat, "second") == "second"
    assert store.shared_chat("second") is not None


def test_deleting_the_chat_or_the_session_revokes_its_link(
    store: Store, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    second = new_chat(session.id)
    store.create_chat(session, second, 10)
    store.share_chat(chat, "of-chat")
    store.share_chat(second, "of-second")
    store.delete_chat(session, chat.id)
    assert store.shared_chat("of-chat") is None
    assert store.shared_chat("of-second") is not None
    store.delete_session(store.get_session(session.id) or session)
    assert store.shared_chat("of-second") is None


def test_sharing_a_missing_chat_is_gone(store: Store, target: tuple[Session, Chat]) -> None:
    session, _ = target
    with pytest.raises(Gone):
        store.share_chat(new_chat(session.id), "ghost")
    assert store.shared_chat("ghost") is None
