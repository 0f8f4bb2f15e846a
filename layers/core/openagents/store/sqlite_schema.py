"""The SQLite database under the one-machine store: schema, connections and transactions.

Durable and concurrent without a Python lock: WAL (readers never wait for the writer),
``synchronous=FULL`` (a committed transaction survives a crash or power loss), one connection
per thread, and every write a ``BEGIN IMMEDIATE`` transaction that takes SQLite's write lock up
front, so a read-check-write inside it is atomic; other writers wait up to the busy timeout.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ParamSpec, TypeVar

from openagents.domain.errors import Unavailable

P = ParamSpec("P")
R = TypeVar("R")

SCHEMA_VERSION = 5  # 2: the events outbox; 3: webhook deliveries; 4: share links;
# 5: chat and message ids unique per user (``migrate_to_v5``)
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


class Database:
    """One SQLite file; a connection per thread (``sqlite3`` connections are not shared)."""

    def __init__(self, path: Path, busy_timeout: float = BUSY_TIMEOUT_SECONDS) -> None:
        self.path = path
        self._timeout = busy_timeout
        self._local = threading.local()
        path.parent.mkdir(parents=True, exist_ok=True)
        with self.transaction() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version < SCHEMA_VERSION:
                if 0 < version < 5:
                    migrate_to_v5(db)
                for statement in SCHEMA:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            self._local.conn = conn
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; any exception rolls everything back."""
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Close this thread's connection (others close when their thread ends)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def guard(method: Callable[P, R]) -> Callable[P, R]:
    """SQLite failures (a lock held past the busy timeout, a full disk) are ``Unavailable``."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except sqlite3.Error as exc:
            raise Unavailable(f"The session store is unavailable ({exc})") from exc

    return wrapper
