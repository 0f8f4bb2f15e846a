"""SQLite under a held write lock: readers never wait (WAL); a writer waits for the busy
timeout, then fails ``Unavailable`` (503, retryable) and writes nothing."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from openagents.artifacts.folder import FolderArtifactStore
from openagents.domain.errors import Unavailable
from openagents.domain.models import ListFilter
from openagents.store.sqlite import SqliteStore

from tests.contract.helpers import create, entry


def test_a_held_lock_makes_writes_unavailable_and_reads_go_on(tmp_path: Path) -> None:
    path = tmp_path / "openagents.db"
    store = SqliteStore(path, FolderArtifactStore(tmp_path / "a"), 300_000, busy_timeout=0.2)
    session = create(store)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    try:
        started = time.monotonic()
        with pytest.raises(Unavailable):
            create(store)
        assert time.monotonic() - started >= 0.2
        with pytest.raises(Unavailable):
            store.append_entry(entry(session.id))
        assert store.get_session(session.id) is not None  # readers do not wait
        assert len(store.list_sessions("alice", ListFilter.ALL, 10, None).items) == 1
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert len(store.list_events(session.id, 10, None).items) == 1  # nothing was written
    create(store)  # the lock is free: writes go through again
    assert len(store.list_sessions("alice", ListFilter.ALL, 10, None).items) == 2
