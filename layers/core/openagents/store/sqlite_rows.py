"""Rows of the SQLite store: domain objects as JSON, and the columns that index them."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from enum import StrEnum
from typing import Any

from openagents.domain.errors import Unavailable
from openagents.domain.lifecycle import index_fields
from openagents.domain.models import AuditEntry, Chat, Session, pr_key
from openagents.store.keys import created_key, event_sk
from openagents.store.shared import ITEM_LIMIT_BYTES, LIST_FIELDS, iso, iso_or_none, mark_map

LIST_KEYS = ("userId", *LIST_FIELDS)  # what a list shows, as the DynamoDB list indexes project
INDEX_COLUMNS = ("due_shard", "due_at", "idle_shard", "pr_key")  # store-only lifecycle fields


def dumps(data: dict[str, Any]) -> str:
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    if len(text.encode()) > ITEM_LIMIT_BYTES:  # the same limit as a DynamoDB item
        raise Unavailable("The session store is unavailable (item size exceeds 400 KB)")
    return text


def session_data(session: Session) -> str:
    data = session.model_dump(mode="json", by_alias=True, exclude={"chats"})
    data["chats"] = {chat_id: mark_map(mark) for chat_id, mark in session.chats.items()}
    return dumps(data)


def to_session(data: str) -> Session:
    return Session.model_validate_json(data)


def to_listed(data: str) -> Session:
    """Only the list fields: a listed session looks the same on both adapters."""
    raw = json.loads(data)
    return Session.model_validate({key: raw[key] for key in LIST_KEYS if key in raw})


def column(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, StrEnum):
        return value.value
    return value


def with_changes(session: Session, changes: dict[str, Any]) -> tuple[Session, dict[str, Any]]:
    """``session`` with ``changes`` applied, and the index columns among them."""
    fields = {name: value for name, value in changes.items() if name in Session.model_fields}
    columns = {name: column(value) for name, value in changes.items() if name in INDEX_COLUMNS}
    if not fields:
        return session, columns
    return Session.model_validate({**session.model_dump(), **fields}), columns


def insert_session(db: sqlite3.Connection, session: Session) -> None:
    index = index_fields(session)  # a new session being provisioned is in the overdue index
    db.execute(
        "INSERT INTO sessions (id, user_id, status, created_key, due_shard, due_at,"
        " hibernated_at, pr_key, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            session.id,
            session.user_id,
            session.status.value,
            created_key(session),
            index["due_shard"],
            iso_or_none(index["due_at"]),
            iso_or_none(session.hibernated_at),
            pr_key(session.repo_owner, session.repo_name, session.pr_number),
            session_data(session),
        ),
    )


def update_session(
    db: sqlite3.Connection, session: Session, columns: dict[str, Any] | None = None
) -> None:
    extra = columns or {}
    names = "".join(f", {name} = ?" for name in extra)
    db.execute(
        f"UPDATE sessions SET status = ?, hibernated_at = ?, data = ?{names} WHERE id = ?",  # noqa: S608 - column names are ours
        (
            session.status.value,
            iso_or_none(session.hibernated_at),
            session_data(session),
            *extra.values(),
            session.id,
        ),
    )


def read_session(db: sqlite3.Connection, session_id: str) -> Session | None:
    row = db.execute("SELECT data FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else to_session(row[0])


def session_columns(db: sqlite3.Connection, session_id: str) -> dict[str, Any] | None:
    row = db.execute(
        "SELECT due_shard, due_at, idle_shard, pr_key FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    return None if row is None else dict(zip(INDEX_COLUMNS, row, strict=True))


def chat_data(chat: Chat) -> str:
    return dumps(chat.model_dump(mode="json", by_alias=True))


def to_chat(data: str) -> Chat:
    return Chat.model_validate_json(data)


def read_chat(db: sqlite3.Connection, session_id: str, chat_id: str) -> Chat | None:
    row = db.execute(
        "SELECT data FROM chats WHERE session_id = ? AND id = ?", (session_id, chat_id)
    ).fetchone()
    return None if row is None else to_chat(row[0])


def insert_chat(db: sqlite3.Connection, user_id: str, chat: Chat) -> None:
    """A new chat of ``user_id`` (``sqlite3.IntegrityError`` when the user has that id)."""
    db.execute(
        "INSERT INTO chats (user_id, session_id, id, data) VALUES (?, ?, ?, ?)",
        (user_id, chat.session_id, chat.id, chat_data(chat)),
    )


def write_chat(db: sqlite3.Connection, chat: Chat) -> None:
    """A stored chat's new state."""
    db.execute(
        "UPDATE chats SET data = ? WHERE session_id = ? AND id = ?",
        (chat_data(chat), chat.session_id, chat.id),
    )


def insert_entry(db: sqlite3.Connection, entry: AuditEntry, user_id: str | None = None) -> None:
    """The audit entry; with ``user_id``, its domain event in the outbox too (same
    transaction: the event is recorded exactly when the change it reports commits)."""
    data = dumps(entry.model_dump(mode="json", by_alias=True))
    db.execute(
        "INSERT OR REPLACE INTO audit (session_id, sk, data) VALUES (?, ?, ?)",
        (entry.session_id, event_sk(entry), data),
    )
    if user_id is not None:
        db.execute(
            "INSERT INTO outbox (session_id, user_id, entry) VALUES (?, ?, ?)",
            (entry.session_id, user_id, data),
        )


def to_entry(data: str) -> AuditEntry:
    return AuditEntry.model_validate_json(data)
