"""Import the one-machine runtime's old DynamoDB dump (moto's items as DynamoDB JSON, the
format ``openagents.local.dynamodb`` writes) into the SQLite store, so sessions survive the
move to SQLite. Items map through the DynamoDB adapter's own models; id claims need no rows
(the chat and message tables keep ids unique)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from openagents.store import items
from openagents.store.keys import (
    CHAT_PREFIX,
    EVENT_PREFIX,
    MESSAGE_PREFIX,
    PROFILE_SK,
    RATE_PREFIX,
    SEGMENT_PREFIX,
    SESSION_PREFIX,
    SESSION_SK,
    TITLE_PREFIX,
    USER_PREFIX,
    segments_prefix,
    title_of,
)
from openagents.store.mapping import to_audit, to_chat, to_session
from openagents.store.sqlite_rows import insert_chat, insert_entry, insert_session
from openagents.store.sqlite_schema import Database


def import_rows(rows: list[dict[str, Any]], path: Path) -> int:
    """Write every item of ``rows`` into the SQLite file at ``path`` (one transaction);
    returns how many items were imported."""
    database = Database(path)
    live = _live_segments(rows)
    try:
        with database.transaction() as db:  # parents first: a chat's row names its user
            return sum(_import(db, row, live) for row in sorted(rows, key=_order))
    finally:
        database.close()


def _live_segments(rows: list[dict[str, Any]]) -> dict[tuple[str, str], range]:
    """Each segmented message's live segments (after its base, up to its last), by the
    segments' sort-key prefix: a replaced one left in the dump is not imported."""
    live: dict[tuple[str, str], range] = {}
    for row in rows:
        pk, sk = row["pk"]["S"], row["sk"]["S"]
        if pk.startswith(CHAT_PREFIX) and sk.startswith(MESSAGE_PREFIX) and "segments" in row:
            last = int(row["segments"]["N"])
            base = int(row.get("segmentsBase", {}).get("N", 0))
            live[pk, segments_prefix(sk)] = range(base + 1, last + 1)
    return live


def _order(row: dict[str, Any]) -> int:
    """Sessions, then the rest of their partitions (chats), then everything else (messages),
    then the messages' segments."""
    pk, sk = row["pk"]["S"], row["sk"]["S"]
    if pk.startswith(SESSION_PREFIX):
        return 0 if sk == SESSION_SK else 1
    return 3 if sk.startswith(SEGMENT_PREFIX) else 2


def _string(row: dict[str, Any], name: str) -> str | None:
    value = row.get(name, {}).get("S")
    return None if value is None else str(value)


def _import(db: sqlite3.Connection, row: dict[str, Any], live: dict[tuple[str, str], range]) -> int:
    pk, sk = row["pk"]["S"], row["sk"]["S"]
    if pk.startswith(SESSION_PREFIX) and sk == SESSION_SK:
        session = to_session(items.SessionItem.from_raw_data(row))
        db.execute("DELETE FROM sessions WHERE id = ?", (session.id,))
        insert_session(db, session)
        db.execute(
            "UPDATE sessions SET due_shard = ?, due_at = ?, idle_shard = ?, pr_key = ?"
            " WHERE id = ?",
            (
                _string(row, "dueShard"),
                _string(row, "dueAt"),
                _string(row, "idleShard"),
                _string(row, "prKey"),
                session.id,
            ),
        )
    elif pk.startswith(SESSION_PREFIX) and sk.startswith(CHAT_PREFIX):
        chat = to_chat(items.ChatItem.from_raw_data(row))
        owner = db.execute("SELECT user_id FROM sessions WHERE id = ?", (chat.session_id,))
        found = owner.fetchone()
        if found is None:
            return 0  # a chat of no session
        db.execute("DELETE FROM chats WHERE session_id = ? AND id = ?", (chat.session_id, chat.id))
        insert_chat(db, found[0], chat)
    elif pk.startswith(SESSION_PREFIX) and sk.startswith(EVENT_PREFIX):
        insert_entry(db, to_audit(items.AuditItem.from_raw_data(row)))
    elif pk.startswith(CHAT_PREFIX) and sk.startswith(MESSAGE_PREFIX):
        message = items.MessageItem.from_raw_data(row)
        parent = _message_chat(db, pk, message.chat_id)
        if parent is None:
            return 0  # a message of no chat
        db.execute(
            "INSERT OR REPLACE INTO messages"
            " (user_id, session_id, chat_id, sk, id, role, body, body_ref, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                *parent,
                message.chat_id,
                sk,
                message.id,
                message.role,
                message.body,
                message.body_ref,
                message.created_at,
            ),
        )
    elif pk.startswith(CHAT_PREFIX) and sk.startswith(SEGMENT_PREFIX):
        return _import_segment(db, pk, sk, row, live)
    elif pk.startswith(USER_PREFIX):
        return _import_user(db, pk.removeprefix(USER_PREFIX), sk, row)
    else:
        return 0  # id claims (CID#, MID#): implied by the chat and message tables
    return 1


def _import_segment(
    db: sqlite3.Connection,
    pk: str,
    sk: str,
    row: dict[str, Any],
    live: dict[tuple[str, str], range],
) -> int:
    prefix, _, number = sk.rpartition("#")
    message_sk = MESSAGE_PREFIX + prefix.removeprefix(SEGMENT_PREFIX)
    if int(number) not in live.get((pk, f"{prefix}#"), range(0)):
        return 0  # replaced by its message's body, or of no message
    segment = items.SegmentItem.from_raw_data(row)
    chat_id = pk.rpartition("#")[2]
    parent = _message_chat(db, pk, chat_id)
    found = (
        parent
        and db.execute(
            "SELECT session_id, chat_id, id FROM messages"
            " WHERE session_id = ? AND chat_id = ? AND sk = ?",
            (parent[1], chat_id, message_sk),
        ).fetchone()
    )
    if not found:
        return 0
    db.execute(
        "INSERT OR REPLACE INTO message_segments"
        " (session_id, chat_id, message_id, n, start, body, bytes) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (*found, int(number), int(segment.start), segment.body, int(segment.size)),
    )
    return 1


def _message_chat(db: sqlite3.Connection, pk: str, chat_id: str) -> tuple[str, str] | None:
    """(user, session) of the chat a message partition names: ``C#<session>#<chat>``, or
    ``C#<chat>`` in a dump older than per-user chat ids (then unique on their own)."""
    session_id, _, rest = pk.removeprefix(CHAT_PREFIX).partition("#")
    if rest:
        query = "SELECT user_id, session_id FROM chats WHERE session_id = ? AND id = ?"
        row = db.execute(query, (session_id, chat_id)).fetchone()
    else:
        row = db.execute(
            "SELECT user_id, session_id FROM chats WHERE id = ?", (chat_id,)
        ).fetchone()
    return None if row is None else (str(row[0]), str(row[1]))


def _import_user(db: sqlite3.Connection, user_id: str, sk: str, row: dict[str, Any]) -> int:
    if sk == PROFILE_SK:
        profile = items.ProfileItem.from_raw_data(row)
        db.execute(
            "INSERT OR REPLACE INTO profiles"
            " (user_id, default_model_id, auto_commit_push, auto_create_pr, archived_count)"
            " VALUES (?, ?, ?, ?, ?)",
            (
                user_id,
                profile.default_model_id,
                bool(profile.auto_commit_push),
                bool(profile.auto_create_pr),
                int(profile.archived_count or 0),
            ),
        )
    elif sk.startswith(TITLE_PREFIX):
        title = items.TitleItem.from_raw_data(row)
        for session_id in title.session_ids or ():
            db.execute(
                "INSERT OR IGNORE INTO titles (user_id, title, session_id) VALUES (?, ?, ?)",
                (user_id, title_of(sk), session_id),
            )
    elif sk.startswith(RATE_PREFIX):
        counter = items.CounterItem.from_raw_data(row)
        db.execute(
            "INSERT OR REPLACE INTO counters (user_id, key, hits, expires_at) VALUES (?, ?, ?, ?)",
            (user_id, sk, int(counter.hits or 0), int(counter.expires_at)),
        )
    else:
        return 0
    return 1
