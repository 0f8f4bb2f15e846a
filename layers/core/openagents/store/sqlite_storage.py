"""The SQLite store's storage count (``store/storage.py``): ``profiles.stored_bytes`` (the
user's count) and ``messages.bytes`` (what a message was counted at), both added to a file
written before them (``ensure_columns``: a nullable column each, so old rows read as before; a
message without ``bytes`` was never counted and gives nothing back)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from openagents.store.storage import admit

COLUMNS = (("profiles", "stored_bytes", "INTEGER"), ("messages", "bytes", "INTEGER"))


def ensure_columns(db: sqlite3.Connection) -> None:
    for table, column, kind in COLUMNS:
        known = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if column not in known:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


def used(db: sqlite3.Connection, user_id: str) -> int:
    row = db.execute("SELECT stored_bytes FROM profiles WHERE user_id = ?", (user_id,)).fetchone()
    return int(row[0] or 0) if row is not None else 0


def charge(db: sqlite3.Connection, user_id: str, delta: int, limit: int | None) -> None:
    """Add ``delta`` to the user's count inside the caller's transaction (``StorageFull``
    past ``limit``, before anything of the caller's is written if it charges first)."""
    if delta == 0:
        return
    admit(used(db, user_id), delta, limit)
    _add(db, user_id, delta)


def charge_each(
    db: sqlite3.Connection, user_id: str, deltas: Sequence[int], limit: int | None
) -> None:
    """``charge`` of each of ``deltas`` in turn (each admitted against the count the ones
    before it left), with one read and one write of the count."""
    if not any(deltas):
        return
    count = used(db, user_id)
    for delta in deltas:
        if delta:
            admit(count, delta, limit)
            count = max(0, count + delta)
    db.execute(
        "INSERT INTO profiles (user_id, stored_bytes) VALUES (?, ?)"
        " ON CONFLICT (user_id) DO UPDATE SET stored_bytes = excluded.stored_bytes",
        (user_id, count),
    )


def _add(db: sqlite3.Connection, user_id: str, delta: int) -> None:
    db.execute(
        "INSERT INTO profiles (user_id, stored_bytes) VALUES (?, MAX(0, ?))"
        " ON CONFLICT (user_id) DO UPDATE SET"
        " stored_bytes = MAX(0, COALESCE(stored_bytes, 0) + ?)",
        (user_id, delta, delta),
    )
