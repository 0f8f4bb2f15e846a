"""The SQLite database under the one-machine store: schema, connections and transactions.

Durable and concurrent: WAL (readers never wait for the writer), ``synchronous=FULL`` (a
committed transaction survives a crash or power loss), a reading connection per thread, and
every write a transaction on the one writing connection inside a ``BEGIN IMMEDIATE`` that
holds SQLite's write lock, so a read-check-write inside it is atomic; concurrent writers of
one process queue in order and share one commit (group commit, ``Database``).
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from openagents.domain.errors import Unavailable

P = ParamSpec("P")
R = TypeVar("R")

SCHEMA_VERSION = 7  # 2: the events outbox; 3: webhook deliveries; 4: share links;
# 5: chat and message ids unique per user (``migrate_to_v5``); 6: public previews;
# 7: message segments
BUSY_TIMEOUT_SECONDS = 30.0

# Chat and message ids are chosen by clients: unique per user (another user's same id is
# theirs, and never answers that it is taken); a chat is its session and id.
CHATS_TABLE = """CREATE TABLE IF NOT EXISTS chats (
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    id TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, id),
    UNIQUE (user_id, id)
) WITHOUT ROWID"""
MESSAGES_TABLE = """CREATE TABLE IF NOT EXISTS messages (
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    sk TEXT NOT NULL,
    id TEXT NOT NULL,
    role TEXT NOT NULL,
    body TEXT,
    body_ref TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (session_id, chat_id, sk),
    UNIQUE (user_id, id)
) WITHOUT ROWID"""
# a live assistant message's segments (``shared.Segment``), laid over its body in ``n`` order;
# its ``bytes`` count theirs too
SEGMENTS_TABLE = """CREATE TABLE IF NOT EXISTS message_segments (
    session_id TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    n INTEGER NOT NULL,
    start INTEGER NOT NULL,
    body TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    PRIMARY KEY (session_id, chat_id, message_id, n)
) WITHOUT ROWID"""
# public share links: at most one per chat (the chat's data names it too)
SHARES_TABLE = """CREATE TABLE IF NOT EXISTS shares (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    UNIQUE (session_id, chat_id)
)"""
# the run store's (``runs_sqlite``): a chat's live run, and the run each user message started
RUN_CLAIMS_TABLE = """CREATE TABLE IF NOT EXISTS agent_chat_claims (
    session_id TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    active_run_id TEXT,
    PRIMARY KEY (session_id, chat_id)
)"""
RUN_MESSAGES_TABLE = """CREATE TABLE IF NOT EXISTS agent_run_messages (
    session_id TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (session_id, chat_id, message_id)
)"""
TABLES = {
    "chats": CHATS_TABLE,
    "messages": MESSAGES_TABLE,
    "shares": SHARES_TABLE,
    "agent_chat_claims": RUN_CLAIMS_TABLE,
    "agent_run_messages": RUN_MESSAGES_TABLE,
}

# One table per kind of item; the domain object as JSON in ``data``, and as columns only what
# is looked up, ordered or indexed. The partial indexes are the sparse indexes of DynamoDB.
SCHEMA = (
    """CREATE TABLE IF NOT EXISTS sessions (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        status TEXT NOT NULL,
        created_key TEXT NOT NULL,
        due_shard TEXT,
        due_at TEXT,
        idle_shard TEXT,
        hibernated_at TEXT,
        pr_key TEXT,
        data TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS sessions_by_user ON sessions (user_id, created_key)",
    "CREATE INDEX IF NOT EXISTS sessions_by_user_status ON sessions (user_id, status, created_key)",
    """CREATE INDEX IF NOT EXISTS sessions_overdue ON sessions (due_at)
        WHERE due_shard IS NOT NULL AND due_at IS NOT NULL""",
    """CREATE INDEX IF NOT EXISTS sessions_idle ON sessions (hibernated_at)
        WHERE idle_shard IS NOT NULL AND hibernated_at IS NOT NULL""",
    "CREATE INDEX IF NOT EXISTS sessions_by_pr ON sessions (pr_key) WHERE pr_key IS NOT NULL",
    CHATS_TABLE,
    MESSAGES_TABLE,
    SEGMENTS_TABLE,
    """CREATE TABLE IF NOT EXISTS audit (
        session_id TEXT NOT NULL,
        sk TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (session_id, sk)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS profiles (
        user_id TEXT PRIMARY KEY,
        default_model_id TEXT,
        auto_commit_push INTEGER NOT NULL DEFAULT 0,
        auto_create_pr INTEGER NOT NULL DEFAULT 0,
        archived_count INTEGER NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE IF NOT EXISTS titles (
        user_id TEXT NOT NULL,
        title TEXT NOT NULL,
        session_id TEXT NOT NULL,
        PRIMARY KEY (user_id, title, session_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS counters (
        user_id TEXT NOT NULL,
        key TEXT NOT NULL,
        hits INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (user_id, key)
    ) WITHOUT ROWID""",
    # domain events, written in the transaction of the change they report; drained in order
    """CREATE TABLE IF NOT EXISTS outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        entry TEXT NOT NULL
    )""",
    # GitHub webhook deliveries already handled (a replay is acknowledged and ignored)
    """CREATE TABLE IF NOT EXISTS deliveries (
        id TEXT PRIMARY KEY,
        expires_at INTEGER NOT NULL
    ) WITHOUT ROWID""",
    SHARES_TABLE,
    # public previews of a session's ports (``previews_sqlite.py``): at most one per port
    """CREATE TABLE IF NOT EXISTS public_previews (
        session_id TEXT NOT NULL,
        port INTEGER NOT NULL,
        user_id TEXT NOT NULL,
        secret TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, port)
    ) WITHOUT ROWID""",
)

# Version 5 keys chats, messages, share links and the run store's chat claims by session and
# user (they were keyed by chat id alone): each table is rebuilt, its rows copied.
V5_REBUILDS = {
    "chats": "SELECT s.user_id, c.session_id, c.id, c.data FROM chats_old c"
    " JOIN sessions s ON s.id = c.session_id",
    "messages": "SELECT c.user_id, c.session_id, m.chat_id, m.sk, m.id, m.role, m.body,"
    " m.body_ref, m.created_at FROM messages_old m JOIN chats c ON c.id = m.chat_id",
    "shares": "SELECT id, session_id, chat_id FROM shares_old",
    "agent_chat_claims": "SELECT r.session_id, c.chat_id, c.active_run_id"
    " FROM agent_chat_claims_old c JOIN agent_runs r ON r.id = c.active_run_id",
    "agent_run_messages": "SELECT r.session_id, m.chat_id, m.message_id, m.run_id"
    " FROM agent_run_messages_old m JOIN agent_runs r ON r.id = m.run_id",
}
V5_DROPPED_INDEXES = ("chats_by_session", "shares_by_session", "agent_runs_chat")


def migrate_to_v5(db: sqlite3.Connection) -> None:
    """Rebuild the tables of ``V5_REBUILDS`` that exist in an older database."""
    existing = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    for index in V5_DROPPED_INDEXES:
        db.execute(f"DROP INDEX IF EXISTS {index}")
    for name, copy in V5_REBUILDS.items():
        if name not in existing:
            continue
        db.execute(f"ALTER TABLE {name} RENAME TO {name}_old")
        db.execute(TABLES[name])
        db.execute(f"INSERT INTO {name} {copy}")
    for name in V5_REBUILDS:
        if name in existing:
            db.execute(f"DROP TABLE {name}_old")


class _Batch:
    """The transactions run since the writer's last ``COMMIT``: committed together."""

    def __init__(self) -> None:
        self.size = 0
        self.error: BaseException | None = None
        self._done = threading.Event()

    def finish(self, error: BaseException | None) -> None:
        self.error = error
        self._done.set()

    def wait(self) -> None:
        self._done.wait()


class Database:
    """One SQLite file: a reading connection per thread, and one writing connection shared by
    the threads in turn (group commit).

    A caller's transaction runs on the writing connection when its turn comes (first come,
    first served), inside a savepoint of the transaction the writer has open (``BEGIN
    IMMEDIATE`` by the first caller of a batch); the last caller of a batch — when nobody is
    waiting, or the batch holds ``max_batch`` transactions — commits it. Every caller returns
    only once the ``COMMIT`` that holds its transaction returned (``synchronous=FULL``: on
    disk), and a commit that fails fails each caller of its batch. A caller's exception rolls
    back its own savepoint only. Concurrent writers thus share one fsync and queue in order in
    this process, instead of sleeping in SQLite's busy handler; another process (or another
    ``Database`` on the same file) still waits there up to ``busy_timeout``.
    """

    def __init__(
        self, path: Path | None, busy_timeout: float = BUSY_TIMEOUT_SECONDS, max_batch: int = 32
    ) -> None:
        """``path`` None: a database in memory (no file, no fsync; gone with this object),
        for tests of the services: one connection, every statement and transaction in turn."""
        self.memory = path is None
        self.path = path if path is not None else Path(f"memory-{id(self)}")
        self._timeout = busy_timeout
        self._max_batch = 1 if self.memory else max_batch  # a read must never see a batch
        self._local = threading.local()
        self._turns = threading.Condition()
        self._next_ticket = 0  # the next arrival's place in the queue
        self._serving = 0  # the place whose transaction runs (or may run) now
        self._writer: sqlite3.Connection | None = None
        self._batch: _Batch | None = None
        self.commits = 0  # how many COMMITs the writer made (group commit: fewer than writes)
        if path is None:
            self._writer = sqlite3.connect(
                ":memory:", isolation_level=None, check_same_thread=False
            )
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
        with self.transaction() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version < SCHEMA_VERSION:
                if 0 < version < 5:
                    migrate_to_v5(db)
                for statement in SCHEMA:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _connect(self, *, shared: bool) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=self._timeout, isolation_level=None, check_same_thread=not shared
        )
        conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        return conn

    def connection(self) -> sqlite3.Connection:
        """This thread's reading connection (inside a transaction: the transaction's own)."""
        inside: sqlite3.Connection | None = getattr(self._local, "inside", None)
        if inside is not None:
            return inside
        if self.memory:
            return _InTurn(self)  # type: ignore[return-value]  # the part of it readers use
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect(shared=False)
            self._local.conn = conn
        return conn

    def read(self, sql: str, parameters: Sequence[object] = ()) -> list[Any]:
        """One statement on the in-memory database, in its turn (between transactions)."""
        self._wait_turn()
        try:
            assert self._writer is not None
            return self._writer.execute(sql, parameters).fetchall()
        finally:
            self._next_turn()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One transaction, atomic (``BEGIN IMMEDIATE``'s lock is held from its first read),
        returned from only once committed; any exception rolls it back."""
        if getattr(self._local, "inside", None) is not None:
            raise RuntimeError("a transaction inside a transaction")
        self._wait_turn()
        try:
            conn, batch = self._begin()
        except BaseException as exc:
            if self._writer is not None and self._batch is not None:
                self._close_batch(self._writer, self._batch, exc)  # its callers wait: fail them
            else:
                self._next_turn()
            raise
        failure: BaseException | None = None
        self._local.inside = conn
        try:
            yield conn
        except BaseException as exc:
            failure = exc
        finally:
            self._local.inside = None
        self._end(conn, batch, failed=failure is not None)
        batch.wait()
        if batch.error is not None and batch.error is not failure:
            raise batch.error from failure
        if failure is not None:
            raise failure

    def _begin(self) -> tuple[sqlite3.Connection, _Batch]:
        """The writer's open transaction (begun for the first of a batch) and a savepoint."""
        if self._writer is None:
            self._writer = self._connect(shared=True)
        conn = self._writer
        if self._batch is None:
            conn.execute("BEGIN IMMEDIATE")
            self._batch = _Batch()
        conn.execute("SAVEPOINT tx")
        self._batch.size += 1
        return conn, self._batch

    def _end(self, conn: sqlite3.Connection, batch: _Batch, *, failed: bool) -> None:
        """Keep or undo the caller's savepoint; commit the batch if it is the last of it."""
        try:
            if failed:
                conn.execute("ROLLBACK TO tx")
            conn.execute("RELEASE tx")
        except BaseException as exc:
            self._close_batch(conn, batch, exc)  # the transaction is lost: so is the batch
            return
        with self._turns:
            last = self._next_ticket == self._serving + 1 or batch.size >= self._max_batch
        if not last:
            self._next_turn()  # the next caller joins the open transaction
            return
        try:
            conn.execute("COMMIT")
        except BaseException as exc:
            self._close_batch(conn, batch, exc)
            return
        self.commits += 1
        self._close_batch(conn, batch, None)

    def _close_batch(
        self, conn: sqlite3.Connection, batch: _Batch, error: BaseException | None
    ) -> None:
        if error is not None and conn.in_transaction:
            conn.execute("ROLLBACK")
        self._batch = None
        batch.finish(error)
        self._next_turn()

    def waiting(self) -> int:
        """How many transactions wait for their turn behind the one running."""
        with self._turns:
            return max(self._next_ticket - self._serving - 1, 0)

    def _wait_turn(self) -> None:
        """Take a place in the queue and wait until it is served (first come, first served)."""
        with self._turns:
            ticket = self._next_ticket
            self._next_ticket += 1
            while self._serving != ticket:
                self._turns.wait()

    def _next_turn(self) -> None:
        with self._turns:
            self._serving += 1
            self._turns.notify_all()

    def close(self) -> None:
        """Close this thread's reading connection, and the writer (others close when their
        thread ends)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
        with self._turns:
            writer, idle = self._writer, self._next_ticket == self._serving
            if writer is not None and idle and not self.memory:  # memory: its only copy
                writer.close()
                self._writer = None


class _InTurn:
    """The in-memory database's reading connection: each statement runs in its turn, its rows
    fetched at once (as a file database's reader sees one committed state per statement)."""

    def __init__(self, database: Database) -> None:
        self._database = database

    def execute(self, sql: str, parameters: Sequence[object] = ()) -> _Rows:
        return _Rows(self._database.read(sql, parameters))


class _Rows:
    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return self._rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)


def guard(method: Callable[P, R]) -> Callable[P, R]:
    """SQLite failures (a lock held past the busy timeout, a full disk) are ``Unavailable``."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except sqlite3.Error as exc:
            raise Unavailable(f"The session store is unavailable ({exc})") from exc

    return wrapper
