"""The events outbox, on both adapters: every state change's domain event is written in the
same transaction as the change (a failed condition writes neither), and a session's events are
kept in the order of its changes. DynamoDB: outbox items on the session's partition, read back
with a Query; SQLite: the ``outbox`` table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from openagents.domain.models import AuditEntry, LifecycleState, SessionStatus
from openagents.events import from_entry
from openagents.store.port import Gone, StaleState, TitleTaken

from tests.contract.conftest import Backend
from tests.contract.helpers import create, entry, new_objects

ANY_STATE = frozenset(LifecycleState)


def types(backend: Backend, session_id: str) -> list[str]:
    return [event.detail["type"] for event in backend.outbox(session_id)]


def test_every_state_change_writes_its_event_with_it(backend: Backend) -> None:
    store = backend.store
    session, chat, created, rate = new_objects("alice", "Outbox")
    store.create_session(session, chat, created, claim_title=True, rate=rate)
    renamed = entry(session.id, "session.renamed")
    session = store.rename_session(session, "Outbox 2", renamed)
    archived = entry(session.id, "session.archived")
    session = store.set_status(session, SessionStatus.ARCHIVED, LifecycleState.HIBERNATED, archived)
    moved = entry(session.id, "sandbox.lost")
    store.transition(session.id, expect=ANY_STATE, changes={}, entry=moved)
    outcome = entry(session.id, "sandbox.auto_commit")
    store.append_entry(outcome)
    store.transition(session.id, expect=ANY_STATE, changes={}, entry=None)  # no entry, no event

    events = backend.outbox(session.id)
    written = [created, renamed, archived, moved, outcome]
    assert [e.detail for e in events] == [from_entry(w, "alice").detail for w in written]
    assert [e.detail_type for e in events] == [from_entry(w, "alice").detail_type for w in written]
    assert {e.detail["userId"] for e in events} == {"alice"}
    # the outbox holds what the audit log holds: one event per entry
    assert [e.detail["entryId"] for e in events] == [
        e.id for e in store.list_events(session.id, 10, None).items
    ]


def test_a_failed_condition_writes_no_event(backend: Backend) -> None:
    store = backend.store
    session = create(store, title="Taken")
    before = backend.snapshot()

    with pytest.raises(StaleState):  # not in an expected state
        store.transition(
            session.id,
            expect=frozenset({LifecycleState.HIBERNATED}),
            changes={"lifecycle_error": "x"},
            entry=entry(session.id, "sandbox.hibernated"),
        )
    stale = session.model_copy(update={"status": SessionStatus.ARCHIVED})
    with pytest.raises(StaleState):  # the status changed meanwhile
        store.set_status(stale, SessionStatus.RUNNING, None, entry(session.id, "x.unarchived"))
    twin, chat, created, rate = new_objects("alice", "Taken")
    with pytest.raises(TitleTaken):
        store.create_session(twin, chat, created, claim_title=True, rate=rate)
    gone, _, _, _ = new_objects("alice", "Never")
    with pytest.raises(Gone):
        store.rename_session(gone, "Renamed", entry(gone.id, "session.renamed"))

    assert types(backend, session.id) == ["session.created"]
    assert backend.outbox(twin.id) == []
    assert backend.outbox(gone.id) == []
    assert backend.snapshot() == before  # nothing else was written either


def test_events_are_kept_in_order_per_session(backend: Backend) -> None:
    store = backend.store
    start = datetime.now(UTC)
    first, second = create(store, at=start), create(store, at=start)
    expected: dict[str, list[str]] = {first.id: ["session.created"], second.id: ["session.created"]}
    for n in range(6):
        session = (first, second)[n % 2]
        at = start + timedelta(milliseconds=10 * (n + 1))
        kind = f"step.{n}"
        if n % 3 == 2:
            store.append_entry(entry(session.id, kind, at))
        else:
            store.transition(
                session.id, expect=ANY_STATE, changes={}, entry=entry(session.id, kind, at)
            )
        expected[session.id].append(kind)

    for session in (first, second):
        events = backend.outbox(session.id)
        assert [e.detail["type"] for e in events] == expected[session.id]
        times = [e.time for e in events]
        assert times == sorted(times)


def test_an_event_of_an_unknown_owner_still_lands(backend: Backend) -> None:
    """An outcome recorded for a session that is gone keeps its event (owner unknown: "")."""
    gone, _, _, _ = new_objects("alice", "Gone")
    recorded = AuditEntry(
        id="evt-orphan", session_id=gone.id, at=datetime.now(UTC), type="t.orphan"
    )
    backend.store.append_entry(recorded)
    (event,) = backend.outbox(gone.id)
    assert event.detail["userId"] == ""
    assert event.detail["entryId"] == "evt-orphan"
