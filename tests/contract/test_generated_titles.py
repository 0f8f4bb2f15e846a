"""Generated titles on both adapters: how a title came to be is stored (``title_source``), and
a generated title replaces only an automatic one — the rename is conditional, so a user's
rename in between wins and a second generated title never applies; the title registry follows
(the old city is free again, the new title used)."""

from __future__ import annotations

from datetime import UTC, datetime

from openagents.composition import Container
from openagents.domain.identity import Identity
from openagents.domain.models import AuditEntry, Role, Session, TitleSource
from openagents.services.sessions import NewSession
from openagents.store.port import Store

from tests.contract.helpers import new_chat

ALICE = Identity(user_id="alice", username="alice")


def renamed(session: Session, title: str) -> AuditEntry:
    return AuditEntry(
        id=f"evt-{title.replace(' ', '-')}",
        session_id=session.id,
        at=datetime.now(UTC),
        type="session.renamed",
        detail={"title": title, "titleSource": "generated"},
    )


def test_a_city_title_is_auto_and_a_given_one_given(app: Container, store: Store) -> None:
    city, chat = app.sessions.create(ALICE, NewSession())
    given, _ = app.sessions.create(ALICE, NewSession(title="My work"))
    assert (store.get_session(city.id) or city).title_source is TitleSource.AUTO
    assert (store.get_session(given.id) or given).title_source is TitleSource.GIVEN
    assert (store.get_chat(city.id, chat.id) or chat).title_source is TitleSource.AUTO


def test_a_generated_title_replaces_the_city_once_and_moves_the_registry(
    app: Container, store: Store
) -> None:
    session, _ = app.sessions.create(ALICE, NewSession())
    city = session.title
    assert store.title_session(session, "Fix the login bug", renamed(session, "Fix the login bug"))
    stored = store.get_session(session.id)
    assert stored is not None
    assert (stored.title, stored.title_source) == ("Fix the login bug", TitleSource.GENERATED)
    assert store.used_titles("alice") == {"Fix the login bug"}  # the city is free again
    assert city not in store.used_titles("alice")
    assert [e.type for e in store.list_events(session.id, 10, None).items][-1] == (
        "session.renamed"
    )
    # a second generated title never applies (the title is no longer the automatic one)
    assert not store.title_session(stored, "Another", renamed(stored, "Another"))
    assert not store.title_session(session, "Another", renamed(session, "Another"))
    assert (store.get_session(session.id) or stored).title == "Fix the login bug"
    assert store.used_titles("alice") == {"Fix the login bug"}


def test_a_user_rename_in_between_wins(app: Container, store: Store) -> None:
    session, chat = app.sessions.create(ALICE, NewSession())
    read = store.get_session(session.id)
    assert read is not None
    app.sessions.update(ALICE, session.id, title="Mine", status=None)
    app.chats.update(ALICE, session.id, chat.id, title="My chat", model_id=None)
    assert not store.title_session(read, "Generated", renamed(read, "Generated"))
    assert not store.title_chat(chat, "Generated")
    stored = store.get_session(session.id)
    assert stored is not None
    assert (stored.title, stored.title_source) == ("Mine", TitleSource.USER)
    stored_chat = store.get_chat(session.id, chat.id)
    assert stored_chat is not None
    assert (stored_chat.title, stored_chat.title_source) == ("My chat", TitleSource.USER)
    assert store.used_titles("alice") == {"Mine"}
    events = store.list_events(session.id, 10, None).items
    assert [e.detail for e in events if e.type == "session.renamed"] == [{"title": "Mine"}]


def test_a_given_title_is_never_replaced(app: Container, store: Store) -> None:
    session, _ = app.sessions.create(ALICE, NewSession(title="My work"))
    assert not store.title_session(session, "Generated", renamed(session, "Generated"))
    assert (store.get_session(session.id) or session).title == "My work"
    assert store.used_titles("alice") == {"My work"}


def test_a_chat_takes_a_generated_title_once(app: Container, store: Store) -> None:
    session, _ = app.sessions.create(ALICE, NewSession())
    chat = new_chat(session.id, "titled-chat")
    store.create_chat(session, chat, 10)
    assert store.title_chat(chat, "Generated")
    stored = store.get_chat(session.id, chat.id)
    assert stored is not None
    assert (stored.title, stored.title_source) == ("Generated", TitleSource.GENERATED)
    assert not store.title_chat(chat, "Again")
    assert not store.title_chat(new_chat(session.id, "no-such-chat"), "Gone")
    assert (store.get_chat(session.id, chat.id) or stored).title == "Generated"


def test_a_forks_title_is_given_and_never_replaced(app: Container, store: Store) -> None:
    session, chat = app.sessions.create(ALICE, NewSession())
    for message_id, role in (("u-1", Role.USER), ("a-1", Role.ASSISTANT)):
        ui = {"id": message_id, "role": role.value, "parts": [{"type": "text", "text": "hi"}]}
        app.chats.post_message(
            ALICE, session.id, chat.id, message_id=message_id, role=role, ui_message=ui
        )
    fork = app.chats.fork(ALICE, session.id, chat.id, "a-1", None)
    stored = store.get_chat(session.id, fork.id)
    assert stored is not None
    assert stored.title_source is TitleSource.GIVEN
    assert not store.title_chat(stored, "Generated")
    assert (store.get_chat(session.id, fork.id) or stored).title == "Fork of hi"
