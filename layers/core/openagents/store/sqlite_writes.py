"""The SQLite store's writes that more than one port composes into one transaction (the unit
of work is ``Database.transaction``): a message's upsert with what it changes on its chat and
session, and a chat's live-run marks. ``SqliteStore`` and ``SqliteRunStore`` both call these,
each inside its own ``BEGIN IMMEDIATE``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from openagents.domain.models import Chat, Message, Role, Session
from openagents.store.keys import message_sk
from openagents.store.port import Activity, Gone, MessageIdTaken, UpsertResult
from openagents.store.shared import Segment, iso, message_insert
from openagents.store.sqlite_rows import read_chat, read_session, update_session, write_chat
from openagents.store.sqlite_storage import charge


def insert_message_row(
    db: sqlite3.Connection,
    session: Session,
    chat_id: str,
    message: Message,
    body: str | None,
    body_ref: str | None,
    size: int | None = None,
) -> None:
    db.execute(
        "INSERT INTO messages"
        " (user_id, session_id, chat_id, sk, id, role, body, body_ref, created_at, bytes)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            session.user_id,
            session.id,
            chat_id,
            message_sk(message),
            message.id,
            message.role.value,
            body,
            body_ref,
            iso(message.created_at),
            size,
        ),
    )


def upsert_message(
    db: sqlite3.Connection,
    session: Session,
    chat: Chat,
    message: Message,
    body: str | None,
    body_ref: str | None,
    activity: Activity | None,
    *,
    size: int | None = None,
    limit: int | None = None,
) -> tuple[UpsertResult, str | None]:
    """Insert the message (with its chat's count and times, its session's mark and activity)
    or update an assistant message's body; with the body reference it replaced. ``size``: the
    body's bytes, charged to the user's storage (``StorageFull`` past ``limit``) — an update
    the difference from what the message was counted at."""
    claim = db.execute(
        "SELECT chat_id, role, sk, body_ref, bytes FROM messages WHERE user_id = ? AND id = ?",
        (session.user_id, message.id),
    ).fetchone()
    if claim is not None:
        if claim[0] != chat.id or claim[1] != message.role.value:
            raise MessageIdTaken
        if message.role is Role.USER:  # user messages are immutable once written
            return "unchanged", None
        if size is not None:
            charge(db, session.user_id, size - int(claim[4] or 0), limit)
        db.execute(
            "UPDATE messages SET body = ?, body_ref = ?, bytes = COALESCE(?, bytes)"
            " WHERE session_id = ? AND chat_id = ? AND sk = ?",
            (body, body_ref, size, session.id, chat.id, claim[2]),
        )
        db.execute(  # the whole body replaces its segments (counted in the old bytes)
            "DELETE FROM message_segments WHERE session_id = ? AND chat_id = ? AND message_id = ?",
            (session.id, chat.id, message.id),
        )
        return "updated", claim[3]
    stored_chat = read_chat(db, session.id, chat.id)
    stored = read_session(db, session.id)
    if stored_chat is None or stored is None or chat.id not in stored.chats:
        raise Gone
    if size is not None:
        charge(db, session.user_id, size, limit)
    insert_message_row(db, session, chat.id, message, body, body_ref, size)
    insert = message_insert(stored_chat, message, activity)
    write_chat(db, stored_chat.model_copy(update=insert.chat_changes()))
    mark = stored.chats[chat.id].model_copy(update=insert.mark_changes())
    changes: dict[str, Any] = {"chats": {**stored.chats, chat.id: mark}}
    columns: dict[str, Any] = {}
    if activity is not None:
        changes |= {"last_activity_at": activity.at, "hibernate_after": activity.hibernate_after}
        columns = {
            "due_at": None if activity.due_at is None else iso(activity.due_at),
            "due_shard": activity.due_shard,
        }
    update_session(db, stored.model_copy(update=changes), columns)
    return "inserted", None


def lay_segment(
    db: sqlite3.Connection,
    session: Session,
    chat: Chat,
    message: Message,
    segment: Segment,
    size: int,
) -> int | None:
    """Lay ``segment`` over the stored assistant message (the segments it replaces — those
    from its start on — deleted); the bytes that adds to the user's storage, for the caller to
    charge in the same transaction with what else it writes (None, nothing written: no such
    message is stored, the caller writes the whole body). ``MessageIdTaken``: the id is another
    chat's or a user message's."""
    claim = db.execute(
        "SELECT chat_id, role, sk FROM messages WHERE user_id = ? AND id = ?",
        (session.user_id, message.id),
    ).fetchone()
    if claim is None:
        return None
    if claim[0] != chat.id or claim[1] != Role.ASSISTANT.value:
        raise MessageIdTaken
    key = (session.id, chat.id, message.id)
    where = "session_id = ? AND chat_id = ? AND message_id = ?"
    replaced, last = db.execute(
        f"SELECT COALESCE(SUM(CASE WHEN start >= ? THEN bytes END), 0), COALESCE(MAX(n), 0)"  # noqa: S608
        f" FROM message_segments WHERE {where}",
        (segment.start, *key),
    ).fetchone()
    delta = size - int(replaced)
    db.execute(f"DELETE FROM message_segments WHERE {where} AND start >= ?", (*key, segment.start))  # noqa: S608
    db.execute(
        "INSERT INTO message_segments (session_id, chat_id, message_id, n, start, body, bytes)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (*key, int(last) + 1, segment.start, segment.body, size),
    )
    db.execute(
        "UPDATE messages SET bytes = COALESCE(bytes, 0) + ?"
        " WHERE session_id = ? AND chat_id = ? AND sk = ?",
        (delta, session.id, chat.id, claim[2]),
    )
    return delta


def read_segments(
    db: sqlite3.Connection, session_id: str, chat_id: str, message_ids: Iterable[str]
) -> dict[str, list[Segment]]:
    """The segments of those of the chat's messages that have any, in their write order."""
    ids = list(message_ids)
    found: dict[str, list[Segment]] = {}
    for start in range(0, len(ids), 500):  # below SQLite's bound-parameter limit
        batch = ids[start : start + 500]
        marks = ", ".join("?" * len(batch))
        rows = db.execute(
            "SELECT message_id, start, body FROM message_segments"  # noqa: S608
            f" WHERE session_id = ? AND chat_id = ? AND message_id IN ({marks})"
            " ORDER BY message_id, n",
            (session_id, chat_id, *batch),
        )
        for message_id, first, body in rows:
            found.setdefault(message_id, []).append(Segment(int(first), body))
    return found


def touch_mark(db: sqlite3.Connection, stored: Session, chat_id: str, **fields: Any) -> None:
    mark = stored.chats[chat_id].model_copy(update=fields)
    update_session(db, stored.model_copy(update={"chats": {**stored.chats, chat_id: mark}}))


def mark_turn(
    db: sqlite3.Connection, session_id: str, chat_id: str, run_id: str, *, live: bool
) -> None:
    """Mirror a chat's live run onto the chat (``active_stream_id``) and its session's chat
    mark (``streaming``); ``Gone`` without the chat when going live; ending (``live`` False)
    clears them only while they still name ``run_id``."""
    chat = read_chat(db, session_id, chat_id)
    stored = read_session(db, session_id)
    if chat is None or stored is None or chat_id not in stored.chats:
        if live:
            raise Gone
        return
    if not live and chat.active_stream_id != run_id:
        return
    write_chat(db, chat.model_copy(update={"active_stream_id": run_id if live else None}))
    touch_mark(db, stored, chat_id, streaming=live)
