"""The SQLite store's events outbox: each event is written in the transaction of the change it
reports, then published in order per session, at least once, and after a restart."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from openagents.artifacts.folder import FolderArtifactStore
from openagents.domain.models import LifecycleState
from openagents.events import Event
from openagents.store.port import StaleState
from openagents.store.sqlite import SqliteStore
from openagents.store.sqlite_outbox import Outbox, OutboxDrainer
from openagents.store.sqlite_schema import Database

from tests.contract.helpers import create, entry

ANY_STATE = frozenset(LifecycleState)


class Recorder:
    def __init__(self, fail: int = 0) -> None:
        self.events: list[Event] = []
        self.fail = fail  # refuse this many publishes first
        self.lock = threading.Lock()

    def __call__(self, events: Sequence[Event]) -> None:
        with self.lock:
            if self.fail:
                self.fail -= 1
                raise RuntimeError("bus down")
            self.events.extend(events)

    def types(self, session_id: str | None = None) -> list[str]:
        return [
            e.detail["type"]
            for e in self.events
            if session_id is None or e.detail["sessionId"] == session_id
        ]


def store_at(path: Path, publish: Recorder | None = None) -> SqliteStore:
    artifacts = FolderArtifactStore(path.parent / "artifacts")
    return SqliteStore(path, artifacts, 300_000, publish=publish)


def test_events_are_published_when_their_change_commits(tmp_path: Path) -> None:
    bus = Recorder()
    store = store_at(tmp_path / "db.sqlite", bus)
    session = create(store)
    assert bus.types() == ["session.created"]
    assert bus.events[0].detail["userId"] == "alice"
    store.transition(session.id, expect=ANY_STATE, changes={}, entry=entry(session.id, "a"))
    store.append_entry(entry(session.id, "b"))
    assert bus.types(session.id) == ["session.created", "a", "b"]
    assert store.outbox is not None
    assert store.outbox.pending() == 0


def test_a_change_that_does_not_commit_records_no_event(tmp_path: Path) -> None:
    bus = Recorder()
    store = store_at(tmp_path / "db.sqlite", bus)
    session = create(store)
    with pytest.raises(StaleState):
        store.transition(
            session.id,
            expect=frozenset({LifecycleState.ARCHIVED}),
            changes={},
            entry=entry(session.id, "never"),
        )
    assert bus.types() == ["session.created"]
    assert store.outbox is not None
    assert store.outbox.pending() == 0


def test_a_failed_publish_is_retried_in_order(tmp_path: Path) -> None:
    bus = Recorder(fail=2)
    store = store_at(tmp_path / "db.sqlite", bus)
    session = create(store)  # publish fails: the event waits
    store.append_entry(entry(session.id, "second"))  # fails again: both wait
    assert bus.events == []
    assert store.outbox is not None
    assert store.outbox.pending() == 2
    store.append_entry(entry(session.id, "third"))  # the bus is back: all three, in order
    assert bus.types() == ["session.created", "second", "third"]
    assert store.outbox.pending() == 0


def test_events_committed_before_a_crash_are_published_after_the_restart(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db.sqlite"
    crashed = store_at(path)  # no publisher: as if the process died right after the commits
    session = create(crashed)
    crashed.append_entry(entry(session.id, "before the crash"))
    crashed.db.close()

    bus = Recorder()
    drainer = OutboxDrainer(Outbox(Database(path), bus), interval=0.05)
    drainer.start()
    try:
        drainer.outbox.drain()  # the first round runs at start; this one waits for it
    finally:
        drainer.stop()
    assert bus.types() == ["session.created", "before the crash"]
    assert drainer.outbox.pending() == 0


def test_at_least_once_when_the_delete_is_lost(tmp_path: Path) -> None:
    """A crash after the publish but before the delete publishes again (consumers tolerate
    replays): simulated by a bus that takes the events and then fails the drain."""
    path = tmp_path / "db.sqlite"
    session = create(store_at(path))
    seen: list[str] = []

    def publish_then_crash(events: Sequence[Event]) -> None:
        seen.extend(e.detail["entryId"] for e in events)
        raise RuntimeError("crash after publish")

    Outbox(Database(path), publish_then_crash).try_drain()
    bus = Recorder()
    Outbox(Database(path), bus).drain()
    assert [e.detail["entryId"] for e in bus.events] == seen
    assert bus.types(session.id) == ["session.created"]


def test_concurrent_writers_publish_each_session_in_commit_order(tmp_path: Path) -> None:
    bus = Recorder()
    store = store_at(tmp_path / "db.sqlite", bus)
    sessions = [create(store) for _ in range(4)]
    barrier = threading.Barrier(len(sessions))

    def write(session_id: str) -> None:
        barrier.wait(timeout=30)
        for n in range(10):
            store.append_entry(entry(session_id, f"step-{n}"))

    threads = [threading.Thread(target=write, args=(s.id,)) for s in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for session in sessions:
        assert bus.types(session.id) == ["session.created"] + [f"step-{n}" for n in range(10)]
    assert store.outbox is not None
    assert store.outbox.pending() == 0
