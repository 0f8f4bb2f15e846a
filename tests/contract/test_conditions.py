"""Conditional writes and the port errors they raise; a failed condition writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

import pytest
from openagents.domain.lifecycle import LifecycleFields
from openagents.domain.models import LifecycleState, SessionStatus
from openagents.store.port import (
    ChatIdTaken,
    Gone,
    LastChat,
    StaleState,
    Store,
    TooManyChats,
)

from tests.contract.helpers import create, entry, new_chat, sandbox_handle

PROVISIONING = frozenset({LifecycleState.PROVISIONING})
ACTIVE = frozenset({LifecycleState.ACTIVE})
HANDLE = sandbox_handle("sess-1")


def activate(store: Store, session_id: str, **changes: object) -> None:
    store.transition(
        session_id,
        expect=PROVISIONING,
        # no due time yet: off the overdue index, where the start had put it
        changes=cast(
            LifecycleFields,
            {"lifecycle_state": LifecycleState.ACTIVE, "due_at": None, "due_shard": None} | changes,
        ),
        entry=None,
    )


def test_transition_only_from_an_expected_state(store: Store) -> None:
    session = create(store)
    first = entry(session.id, "lifecycle.active")
    updated = store.transition(
        session.id,
        expect=PROVISIONING,
        changes={"lifecycle_state": LifecycleState.ACTIVE, "lifecycle_error": "x"},
        entry=first,
        bump_version=True,
    )
    assert updated.lifecycle_state is LifecycleState.ACTIVE
    assert updated.lifecycle_error == "x"
    assert updated.lifecycle_version == session.lifecycle_version + 1
    assert store.get_session(session.id) == updated
    events = store.list_events(session.id, 10, None).items
    with pytest.raises(StaleState):  # no longer provisioning; and nothing is written
        store.transition(
            session.id,
            expect=PROVISIONING,
            changes={"lifecycle_error": "y"},
            entry=entry(session.id, "lost"),
        )
    assert store.list_events(session.id, 10, None).items == events
    assert store.get_session(session.id) == updated
    with pytest.raises(StaleState):
        store.transition("missing", expect=ACTIVE, changes={}, entry=None)
    with pytest.raises(ValueError, match="not lifecycle fields"):
        store.transition(session.id, expect=ACTIVE, changes={"title": "no"}, entry=None)  # type: ignore[typeddict-unknown-key]


def test_transition_checks_generation_and_lease(store: Store) -> None:
    session = create(store)
    assert store.claim_generation(session.id, 1) is True
    activate(store, session.id, lifecycle_run_id="run-1")
    with pytest.raises(StaleState):
        store.transition(session.id, expect=ACTIVE, changes={}, entry=None, generation=2)
    with pytest.raises(StaleState):
        store.transition(session.id, expect=ACTIVE, changes={}, entry=None, lease="run-2")
    done = store.transition(
        session.id,
        expect=ACTIVE,
        changes={"lines_added": 3, "sandbox": HANDLE},
        entry=None,
        generation=1,
        lease="run-1",
    )
    assert done.lines_added == 3
    assert done.sandbox == HANDLE
    cleared = store.transition(session.id, expect=ACTIVE, changes={"sandbox": None}, entry=None)
    assert cleared.sandbox is None


def test_claim_generation(store: Store) -> None:
    session = create(store)
    assert store.claim_generation(session.id, 1) is True
    assert store.claim_generation(session.id, 1) is False  # a retry of the same start
    assert store.claim_generation(session.id, 3) is True
    with pytest.raises(StaleState):
        store.claim_generation(session.id, 2)
    with pytest.raises(Gone):
        store.claim_generation("missing", 1)
    got = store.get_session(session.id)
    assert got is not None
    assert got.sandbox_generation == 3


def test_claim_and_release_the_lifecycle_lease(store: Store) -> None:
    session = create(store)
    now = datetime.now(UTC)
    assert store.claim_lease(session.id, "run-1", now) is False  # provisioning: not running
    activate(store, session.id)
    assert store.claim_lease(session.id, "run-1", now) is True
    assert store.claim_lease(session.id, "run-1", now) is True  # ours already
    assert store.claim_lease(session.id, "run-2", now) is False
    assert store.claim_lease(session.id, "run-2", now, replace_active=True) is True
    store.release_lease(session.id, "run-1")  # not ours any more: nothing happens
    got = store.get_session(session.id)
    assert got is not None
    assert got.lifecycle_run_id == "run-2"
    # a lease held by a run long overdue is taken
    store.transition(
        session.id,
        expect=ACTIVE,
        changes={"due_at": now - timedelta(hours=1), "due_shard": "due#1"},
        entry=None,
    )
    assert store.claim_lease(session.id, "run-3", now - timedelta(minutes=30)) is True
    store.release_lease(session.id, "run-3")
    got = store.get_session(session.id)
    assert got is not None
    assert got.lifecycle_run_id is None
    assert store.claim_lease("missing", "run-1", now) is False


def test_set_status_is_conditional_and_counts_archived(store: Store) -> None:
    session = create(store)
    archived = store.set_status(
        session,
        SessionStatus.ARCHIVED,
        LifecycleState.ARCHIVED,
        entry(session.id, "session.archived"),
        changes={"archive_pending": True, "lifecycle_error": None},
    )
    assert archived.status is SessionStatus.ARCHIVED
    assert archived.archive_pending is True
    assert store.get_user("alice").archived_count == 1
    stored = store.get_session(session.id)
    assert stored is not None
    assert stored.status is SessionStatus.ARCHIVED
    assert stored.lifecycle_state is LifecycleState.ARCHIVED
    with pytest.raises(StaleState):  # the caller's read is stale: still "running" there
        store.set_status(session, SessionStatus.ARCHIVED, None, entry(session.id))
    assert store.get_user("alice").archived_count == 1
    store.set_status(stored, SessionStatus.RUNNING, LifecycleState.HIBERNATED, entry(session.id))
    assert store.get_user("alice").archived_count == 0
    with pytest.raises(StaleState):
        store.set_status(
            session.model_copy(update={"id": "missing"}),
            SessionStatus.ARCHIVED,
            None,
            entry("missing"),
        )


def test_rename_and_delete_of_a_missing_session_are_gone(store: Store) -> None:
    session = create(store)
    store.delete_session(session)
    with pytest.raises(Gone):
        store.rename_session(session, "New", entry(session.id))
    with pytest.raises(Gone):
        store.delete_session(session)
    assert store.get_session(session.id) is None


def test_chat_conditions(store: Store) -> None:
    session = create(store)
    (first,) = store.list_chats(session.id)
    second = new_chat(session.id)
    store.create_chat(session, second, max_chats=3)
    with pytest.raises(ChatIdTaken) as taken:
        store.create_chat(session, second, max_chats=3)
    assert taken.value.session_id == session.id
    other = create(store)
    with pytest.raises(ChatIdTaken):
        store.create_chat(other, new_chat(other.id, second.id), max_chats=3)
    store.create_chat(session, new_chat(session.id), max_chats=3)
    with pytest.raises(TooManyChats):
        store.create_chat(session, new_chat(session.id), max_chats=3)
    assert len(store.list_chats(session.id)) == 3
    stored = store.get_session(session.id)
    assert stored is not None
    assert set(stored.chats) == {c.id for c in store.list_chats(session.id)}

    at = datetime.now(UTC)
    renamed = store.update_chat(second, title="Named", model_id="m-1", at=at)
    assert (renamed.title, renamed.model_id) == ("Named", "m-1")
    got = store.get_chat(session.id, second.id)
    assert got is not None
    assert (got.title, got.model_id, got.updated_at) == ("Named", "m-1", at)
    assert store.get_chat(other.id, second.id) is None  # chats belong to their session

    store.mark_read(session, second.id, at)
    stored = store.get_session(session.id)
    assert stored is not None
    assert stored.chats[second.id].last_read_at == at
    assert stored.chats[second.id].updated_at == at

    for chat in store.list_chats(session.id)[1:]:
        store.delete_chat(session, chat.id)
    with pytest.raises(LastChat):
        store.delete_chat(session, first.id)
    with pytest.raises(Gone):
        store.delete_chat(session, second.id)
    with pytest.raises(Gone):
        store.update_chat(second, title="x", model_id=None, at=at)
    with pytest.raises(Gone):
        store.mark_read(session, second.id, at)
    store.create_chat(session, new_chat(session.id, second.id), max_chats=3)  # id free again
    store.delete_session(session)
    with pytest.raises(Gone):
        store.create_chat(session, new_chat(session.id), max_chats=3)


def test_preferences(store: Store) -> None:
    from openagents.domain.models import Preferences

    assert store.get_user("nobody").preferences == Preferences()
    prefs = Preferences(default_model_id="m", auto_commit_push=True, auto_create_pr=False)
    store.put_preferences("alice", prefs)
    assert store.get_user("alice").preferences == prefs
    store.put_preferences("alice", Preferences())
    assert store.get_user("alice").preferences == Preferences()
