"""A SQLite file of schema 4 (chats, messages, share links and run claims keyed by chat id
alone) opens as schema 5 with every row kept, now under its user and session."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from openagents.artifacts.folder import FolderArtifactStore
from openagents.domain.models import Chat, ChatMark, Session
from openagents.store.runs import Run, run_to_json, started_key
from openagents.store.runs_sqlite import SqliteRunStore
from openagents.store.sqlite import SqliteStore
from openagents.store.sqlite_rows import chat_data, insert_session
from openagents.store.sqlite_schema import SCHEMA

V4_TABLES = (
    "CREATE TABLE chats (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, data TEXT NOT NULL)",
    "CREATE INDEX chats_by_session ON chats (session_id)",
    """CREATE TABLE messages (chat_id TEXT NOT NULL, sk TEXT NOT NULL, id TEXT NOT NULL UNIQUE,
        role TEXT NOT NULL, body TEXT, body_ref TEXT, created_at TEXT NOT NULL,
        PRIMARY KEY (chat_id, sk)) WITHOUT ROWID""",
    """CREATE TABLE shares (id TEXT PRIMARY KEY, chat_id TEXT NOT NULL UNIQUE,
        session_id TEXT NOT NULL)""",
    "CREATE INDEX shares_by_session ON shares (session_id)",
    """CREATE TABLE agent_runs (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
        chat_id TEXT NOT NULL, started_key TEXT NOT NULL, status TEXT NOT NULL,
        data TEXT NOT NULL)""",
    "CREATE INDEX agent_runs_chat ON agent_runs (chat_id, started_key)",
    "CREATE TABLE agent_chat_claims (chat_id TEXT PRIMARY KEY, active_run_id TEXT)",
    """CREATE TABLE agent_run_messages (chat_id TEXT NOT NULL, message_id TEXT NOT NULL,
        run_id TEXT NOT NULL, PRIMARY KEY (chat_id, message_id))""",
)
V5_ONLY = ("chats", "messages", "shares")


def _version_4(path: Path) -> tuple[Session, Chat, Run]:
    now = datetime.now(UTC)
    chat = Chat(
        id="old-chat", session_id="old-sess", title="Old", share_id="old-share", created_at=now,
        updated_at=now,
    )  # fmt: skip
    session = Session(
        id="old-sess", user_id="alice", title="Old", created_at=now, updated_at=now,
        chats={chat.id: ChatMark(created_at=now, updated_at=now)},
    )  # fmt: skip
    run = Run(
        id="old-run", session_id=session.id, chat_id=chat.id, user_id="alice", message_id="m-1",
        assistant_message_id="a-1", model_id="scripted/default", started_at=now,
    )  # fmt: skip
    db = sqlite3.connect(path, isolation_level=None)
    for statement in SCHEMA:
        if not any(f"EXISTS {name} (" in statement for name in V5_ONLY):
            db.execute(statement)
    for statement in V4_TABLES:
        db.execute(statement)
    insert_session(db, session)
    db.execute("INSERT INTO chats VALUES (?, ?, ?)", (chat.id, session.id, chat_data(chat)))
    body = json.dumps({"id": "m-1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    db.execute(
        "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)",
        (chat.id, "M#0000000000001#m-1", "m-1", "user", body, None, now.isoformat()),
    )
    db.execute("INSERT INTO shares VALUES (?, ?, ?)", ("old-share", chat.id, session.id))
    db.execute(
        "INSERT INTO agent_runs VALUES (?, ?, ?, ?, ?, ?)",
        (run.id, session.id, chat.id, started_key(run), "running", json.dumps(run_to_json(run))),
    )
    db.execute("INSERT INTO agent_chat_claims VALUES (?, ?)", (chat.id, run.id))
    db.execute("INSERT INTO agent_run_messages VALUES (?, ?, ?)", (chat.id, "m-1", run.id))
    db.execute("PRAGMA user_version = 4")
    db.close()
    return session, chat, run


def test_a_version_4_file_keeps_its_rows_under_user_and_session(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    session, chat, run = _version_4(path)
    store = SqliteStore(path, FolderArtifactStore(tmp_path / "artifacts"), 1024)
    runs = SqliteRunStore(store)
    try:
        assert store.chat_session("alice", chat.id) == session.id
        assert store.chat_session("bob", chat.id) is None
        assert store.get_chat(session.id, chat.id) == chat
        (message,) = store.list_messages(session.id, chat.id, 10, None).items
        assert message.id == "m-1"
        assert message.parts["parts"] == [{"type": "text", "text": "hi"}]
        assert store.shared_chat("old-share") == chat
        assert runs.active_run_id(session.id, chat.id) == run.id
        assert runs.latest(session.id, chat.id) == run
        version = store.db.connection().execute("PRAGMA user_version").fetchone()[0]
        assert version == 7  # and on to the public previews (6) and message segments (7)
    finally:
        store.db.close()
