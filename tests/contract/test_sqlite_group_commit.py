"""Group commit on SQLite (``sqlite_schema.Database``): concurrent transactions of one process
queue in order and share one ``COMMIT``; each caller returns only once it committed; a caller's
failure undoes its own writes only; a failed commit fails every caller of its batch."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from openagents.artifacts.folder import FolderArtifactStore
from openagents.domain.errors import Unavailable
from openagents.domain.models import ListFilter
from openagents.store.sqlite import SqliteStore
from openagents.store.sqlite_schema import Database

from tests.contract.helpers import create

WAIT = 10.0  # the ceiling of every wait on a condition below


def until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.001)


def rows(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return sorted(row[0] for row in db.execute("SELECT id FROM deliveries"))
    finally:
        db.close()


class Queue:
    """Transactions on ``db`` in threads, started behind one that holds the writer."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.release = threading.Event()
        self.errors: dict[str, BaseException] = {}
        self.returned: list[str] = []
        self.threads: list[threading.Thread] = []
        self._held = threading.Event()
        self._start("holder", self._hold)
        until(self._held.is_set)

    def _hold(self, conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO deliveries (id, expires_at) VALUES ('holder', 0)")
        self._held.set()
        assert self.release.wait(WAIT)

    def _start(self, name: str, body: Callable[[sqlite3.Connection], None]) -> None:
        def run() -> None:
            try:
                with self.db.transaction() as conn:
                    body(conn)
                self.returned.append(name)
            except BaseException as exc:
                self.errors[name] = exc

        thread = threading.Thread(target=run, name=name)
        self.threads.append(thread)
        thread.start()

    def add(self, name: str, body: Callable[[sqlite3.Connection], None] | None = None) -> None:
        def insert(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO deliveries (id, expires_at) VALUES (?, 0)", (name,))

        before = self.db.waiting()
        self._start(name, body or insert)
        until(lambda: self.db.waiting() == before + 1)

    def finish(self) -> None:
        self.release.set()
        for thread in self.threads:
            thread.join(WAIT)
            assert not thread.is_alive()


@pytest.fixture
def db(tmp_path: Path) -> Database:
    return Database(tmp_path / "openagents.db")


def test_queued_transactions_share_one_commit_and_return_after_it(db: Database) -> None:
    queue = Queue(db)
    for name in ("a", "b", "c", "d", "e"):
        queue.add(name)
    commits = db.commits
    assert rows(db.path) == []  # nothing is committed while the holder runs
    assert queue.returned == []
    queue.finish()
    assert db.commits == commits + 1  # one commit for the six transactions
    assert sorted(queue.returned) == ["a", "b", "c", "d", "e", "holder"]
    assert rows(db.path) == ["a", "b", "c", "d", "e", "holder"]


def test_a_failing_transaction_undoes_its_own_writes_only(db: Database) -> None:
    queue = Queue(db)

    def fails(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO deliveries (id, expires_at) VALUES ('fails', 0)")
        raise ValueError("refused")

    queue.add("a")
    queue.add("fails", fails)
    queue.add("b")
    queue.finish()
    assert isinstance(queue.errors.pop("fails"), ValueError)
    assert queue.errors == {}
    assert rows(db.path) == ["a", "b", "holder"]


class FailingCommit:
    """The writer's connection, except that its ``COMMIT`` fails (a full disk, say)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT":
            raise sqlite3.OperationalError("database or disk is full")
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_a_failed_commit_fails_every_caller_of_its_batch(db: Database) -> None:
    real = db._writer
    assert real is not None
    db._writer = FailingCommit(real)  # type: ignore[assignment]
    queue = Queue(db)
    queue.add("a")
    queue.add("b")
    queue.finish()
    assert queue.returned == []
    assert sorted(queue.errors) == ["a", "b", "holder"]
    assert all(isinstance(e, sqlite3.OperationalError) for e in queue.errors.values())
    db._writer = real
    assert rows(db.path) == []  # nothing of the batch was written
    with db.transaction() as conn:  # and the writer goes on
        conn.execute("INSERT INTO deliveries (id, expires_at) VALUES ('after', 0)")
    assert rows(db.path) == ["after"]


def test_a_batch_is_cut_at_its_size_limit(tmp_path: Path) -> None:
    db = Database(tmp_path / "openagents.db", max_batch=3)
    queue = Queue(db)
    for name in ("a", "b", "c", "d", "e"):
        queue.add(name)
    commits = db.commits
    queue.finish()
    assert db.commits == commits + 2  # holder, a, b | c, d, e
    assert rows(db.path) == ["a", "b", "c", "d", "e", "holder"]


def test_a_transaction_inside_a_transaction_is_refused(db: Database) -> None:
    with db.transaction(), pytest.raises(RuntimeError), db.transaction():
        pass


def test_concurrent_creates_through_the_store_are_all_written(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "openagents.db", FolderArtifactStore(tmp_path / "a"), 300_000)
    made: list[str] = []
    failures: list[BaseException] = []

    def writer() -> None:
        try:
            for _ in range(10):
                made.append(create(store).id)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    assert failures == []
    listed = {s.id for s in store.list_sessions("alice", ListFilter.ALL, 100, None).items}
    assert listed == set(made)
    assert len(made) == 60
    assert store.db.commits <= 60 + 1  # never more commits than writes (+ the schema's)


def test_a_store_error_inside_a_batch_is_unavailable(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "openagents.db", FolderArtifactStore(tmp_path / "a"), 300_000)
    real = store.db._writer
    assert real is not None
    store.db._writer = FailingCommit(real)  # type: ignore[assignment]
    with pytest.raises(Unavailable):
        create(store)
    store.db._writer = real
    assert store.list_sessions("alice", ListFilter.ALL, 10, None).items == []


def test_in_memory_a_read_waits_for_the_transaction_in_its_way() -> None:
    """The in-memory database has one connection: a read takes its turn, so it never sees a
    transaction that has not committed."""
    db = Database(None)
    queue = Queue(db)  # the holder has written its row, not committed
    seen: list[list[str]] = []
    reader = threading.Thread(
        target=lambda: seen.append(
            [r[0] for r in db.connection().execute("SELECT id FROM deliveries")]
        )
    )
    reader.start()
    until(lambda: db.waiting() == 1)
    assert seen == []  # still waiting behind the open transaction
    queue.finish()
    reader.join(WAIT)
    assert seen == [["holder"]]
