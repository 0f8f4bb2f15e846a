"""The run store on SQLite: its own tables in the store's database (``settings.sqlite_path``),
on the store's own connections, so a run's start (the run, the claim, the user message, the
chat's live-run marks) and its end are each one ``BEGIN IMMEDIATE`` transaction with the
store's rows."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from openagents.domain.checkpoints import Checkpoint, RevertRecord
from openagents.domain.models import Page
from openagents.store import cursor as cursors
from openagents.store.port import UpsertResult
from openagents.store.runs import (
    STARTED_KEY,
    Chunk,
    Progress,
    Run,
    RunNotFound,
    RunStatus,
    Started,
    StreamEvent,
    TurnInProgress,
    TurnMessage,
    as_reverted,
    run_from_json,
    run_to_json,
    start_with_body,
    started_bound,
    started_key,
    with_checkpoint,
)
from openagents.store.shared import MessageBodies, Segment
from openagents.store.sqlite_schema import RUN_CLAIMS_TABLE, RUN_MESSAGES_TABLE, Database, guard
from openagents.store.sqlite_storage import charge, charge_each
from openagents.store.sqlite_writes import lay_segment, mark_turn, upsert_message
from openagents.store.storage import chunk_bytes

__all__ = ["SqliteRunStore"]
SCHEMA = (
    """CREATE TABLE IF NOT EXISTS agent_runs (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        started_key TEXT NOT NULL,
        status TEXT NOT NULL,
        data TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS agent_runs_session ON agent_runs (session_id, started_key)",
    """CREATE INDEX IF NOT EXISTS agent_runs_by_chat
        ON agent_runs (session_id, chat_id, started_key)""",
    "CREATE INDEX IF NOT EXISTS agent_runs_status ON agent_runs (status)",
    # a user's runs (the usage page): the user id as the run's JSON holds it
    """CREATE INDEX IF NOT EXISTS agent_runs_by_user
        ON agent_runs (json_extract(data, '$.userId'), started_key)""",
    RUN_CLAIMS_TABLE,
    RUN_MESSAGES_TABLE,
    """CREATE TABLE IF NOT EXISTS agent_run_events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        chunk TEXT NOT NULL,
        expires_at REAL,
        PRIMARY KEY (run_id, seq)
    )""",
    "CREATE INDEX IF NOT EXISTS agent_run_events_expiry ON agent_run_events (expires_at)",
)


def _run(row: tuple[str] | None) -> Run | None:
    return run_from_json(json.loads(row[0])) if row is not None else None


def _read(db: sqlite3.Connection, run_id: str) -> Run | None:
    return _run(db.execute("SELECT data FROM agent_runs WHERE id = ?", (run_id,)).fetchone())


def _upsert(
    db: sqlite3.Connection,
    turn: TurnMessage,
    body: str | None,
    body_ref: str | None,
    size: int,
    limit: int | None,
) -> tuple[UpsertResult, str | None]:
    """The turn's message, written in the run's transaction (the store's own message write,
    charged to the user's storage)."""
    return upsert_message(
        db,
        turn.session,
        turn.chat,
        turn.message,
        body,
        body_ref,
        turn.activity,
        size=size,
        limit=limit,
    )


def _write(db: sqlite3.Connection, run: Run) -> None:
    db.execute(
        "UPDATE agent_runs SET status = ?, data = ? WHERE id = ?",
        (run.status.value, json.dumps(run_to_json(run)), run.id),
    )


def _log(
    db: sqlite3.Connection,
    run: Run,
    chunks: Sequence[Chunk],
    progress: Progress | None,
    limit: int | None,
    charged: int = 0,
) -> int:
    """The chunks numbered after the run's last event (their bytes charged: the live run's
    event log counts; after ``charged``, what the caller wrote before them), with the run's
    progress; the new last seq."""
    texts, logged = chunk_bytes(chunks)
    charge_each(db, run.user_id, (charged, logged), limit)
    seq = run.last_seq
    db.executemany(
        "INSERT INTO agent_run_events (run_id, seq, chunk) VALUES (?, ?, ?)",
        [(run.id, seq + n, text) for n, text in enumerate(texts, start=1)],
    )
    seq += len(texts)
    if progress is not None and not run.status.ended:
        run = run.progressed(progress)
    data = run_to_json(run)
    data["lastSeq"] = seq
    db.execute("UPDATE agent_runs SET data = ? WHERE id = ?", (json.dumps(data), run.id))
    return seq


class SqliteUnit(Protocol):
    """What the run store shares with the store it writes a turn's rows with: the database
    (its transactions are the unit of work) and the message body codec."""

    @property
    def db(self) -> Database: ...
    @property
    def bodies(self) -> MessageBodies: ...
    @property
    def storage_limit(self) -> int | None: ...


class SqliteRunStore:
    def __init__(self, store: SqliteUnit) -> None:
        self._bodies = store.bodies
        self._store = store
        self.db = store.db  # one database, one transaction for a run and the store's rows
        with self.db.transaction() as db:
            for statement in SCHEMA:
                db.execute(statement)

    @guard
    def start(self, run: Run, message: TurnMessage | None = None) -> Started:
        return start_with_body(
            self._bodies,
            message,
            lambda body, ref, size: self._start(run, message, body, ref, size),
        )

    def _start(
        self,
        run: Run,
        message: TurnMessage | None,
        body: str | None,
        body_ref: str | None,
        size: int,
    ) -> Started:
        with self.db.transaction() as db:
            row = db.execute(
                "SELECT run_id FROM agent_run_messages"
                " WHERE session_id = ? AND chat_id = ? AND message_id = ?",
                (run.session_id, run.chat_id, run.message_id),
            ).fetchone()
            if row is not None:
                existing = _read(db, row[0])
                if existing is not None:
                    return Started(existing, created=False)
            claim = db.execute(
                "SELECT active_run_id FROM agent_chat_claims WHERE session_id = ? AND chat_id = ?",
                (run.session_id, run.chat_id),
            ).fetchone()
            if claim is not None and claim[0] is not None:
                raise TurnInProgress(claim[0])
            if message is not None:
                _upsert(db, message, body, body_ref, size, self._store.storage_limit)
            db.execute(
                "INSERT INTO agent_runs (id, session_id, chat_id, started_key, status, data)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    run.id,
                    run.session_id,
                    run.chat_id,
                    started_key(run),
                    run.status.value,
                    json.dumps(run_to_json(run)),
                ),
            )
            db.execute(
                "INSERT INTO agent_chat_claims (session_id, chat_id, active_run_id)"
                " VALUES (?, ?, ?) ON CONFLICT (session_id, chat_id)"
                " DO UPDATE SET active_run_id = excluded.active_run_id",
                (run.session_id, run.chat_id, run.id),
            )
            db.execute(
                "INSERT INTO agent_run_messages (session_id, chat_id, message_id, run_id)"
                " VALUES (?, ?, ?, ?)",
                (run.session_id, run.chat_id, run.message_id, run.id),
            )
            mark_turn(db, run.session_id, run.chat_id, run.id, live=True)
        return Started(run, created=True)

    @guard
    def get(self, run_id: str) -> Run | None:
        return _read(self.db.connection(), run_id)

    @guard
    def active_run_id(self, session_id: str, chat_id: str) -> str | None:
        row = (
            self.db.connection()
            .execute(
                "SELECT active_run_id FROM agent_chat_claims WHERE session_id = ? AND chat_id = ?",
                (session_id, chat_id),
            )
            .fetchone()
        )
        return str(row[0]) if row is not None and row[0] is not None else None

    @guard
    def latest(self, session_id: str, chat_id: str) -> Run | None:
        return _run(
            self.db.connection()
            .execute(
                "SELECT data FROM agent_runs WHERE session_id = ? AND chat_id = ?"
                " ORDER BY started_key DESC LIMIT 1",
                (session_id, chat_id),
            )
            .fetchone()
        )

    @guard
    def list_for_session(self, session_id: str, limit: int, cursor: str | None) -> Page[Run]:
        before = cursors.decode(cursor, STARTED_KEY) if cursor else "~"
        rows = (
            self.db.connection()
            .execute(
                "SELECT data, started_key FROM agent_runs WHERE session_id = ? AND started_key < ?"
                " ORDER BY started_key DESC LIMIT ?",
                (session_id, before, limit + 1),
            )
            .fetchall()
        )
        runs = [run_from_json(json.loads(data)) for data, _ in rows[:limit]]
        more = len(rows) > limit
        return Page[Run](items=runs, cursor=cursors.encode(rows[limit - 1][1]) if more else None)

    @guard
    def list_for_user(self, user_id: str, start: datetime, end: datetime, limit: int) -> list[Run]:
        rows = (
            self.db.connection()
            .execute(
                "SELECT data FROM agent_runs WHERE json_extract(data, '$.userId') = ?"
                " AND started_key >= ? AND started_key < ? ORDER BY started_key LIMIT ?",
                (user_id, started_bound(start), started_bound(end), limit),
            )
            .fetchall()
        )
        return [run_from_json(json.loads(data)) for (data,) in rows]

    @guard
    def append(
        self,
        run_id: str,
        chunks: Sequence[Chunk],
        progress: Progress | None = None,
        message: TurnMessage | None = None,
        *,
        bounded: bool = True,
    ) -> int:
        segment = self._bodies.segment(message.message, message.kept_parts) if message else None
        if message is not None and segment is not None:
            seq = self._append_segment(run_id, chunks, progress, message, segment, bounded)
            if seq is not None:
                return seq
        body, body_ref, size = self._bodies.staged(message.message) if message else (None, None, 0)
        try:
            seq, replaced = self._append(
                run_id, chunks, progress, message, (body, body_ref, size), bounded
            )
        except BaseException:
            self._bodies.drop_body(body_ref)
            raise
        self._bodies.drop_body(replaced)
        return seq

    def _append_segment(
        self,
        run_id: str,
        chunks: Sequence[Chunk],
        progress: Progress | None,
        turn: TurnMessage,
        segment: tuple[str, int],
        bounded: bool,
    ) -> int | None:
        """``_append`` with the message's segment instead of its whole body; None (nothing
        written) when the message is not stored yet."""
        body, size = segment
        limit = self._store.storage_limit if bounded else None
        with self.db.transaction() as db:
            run = _read(db, run_id)
            if run is None:
                raise RunNotFound(run_id)
            laid = Segment(turn.kept_parts, body)
            added = lay_segment(db, turn.session, turn.chat, turn.message, laid, size)
            if added is None:
                return None
            return _log(db, run, chunks, progress, limit, charged=added)

    def _append(
        self,
        run_id: str,
        chunks: Sequence[Chunk],
        progress: Progress | None,
        message: TurnMessage | None,
        staged: tuple[str | None, str | None, int],
        bounded: bool,
    ) -> tuple[int, str | None]:
        body, body_ref, size = staged
        replaced: str | None = None
        limit = self._store.storage_limit if bounded else None
        with self.db.transaction() as db:
            run = _read(db, run_id)
            if run is None:
                raise RunNotFound(run_id)
            if message is not None:
                result, replaced = _upsert(db, message, body, body_ref, size, limit)
                if result == "unchanged":
                    replaced = body_ref  # not written: drop the staged body
            seq = _log(db, run, chunks, progress, limit)
        return seq, replaced

    @guard
    def events(self, run_id: str, after: int, limit: int = 1000) -> list[StreamEvent]:
        rows = (
            self.db.connection()
            .execute(
                "SELECT seq, chunk FROM agent_run_events WHERE run_id = ? AND seq > ?"
                " AND (expires_at IS NULL OR expires_at > ?) ORDER BY seq LIMIT ?",
                (run_id, after, time.time(), limit),
            )
            .fetchall()
        )
        return [StreamEvent(int(seq), json.loads(chunk)) for seq, chunk in rows]

    @guard
    def request_cancel(self, run_id: str) -> bool:
        with self.db.transaction() as db:
            run = _read(db, run_id)
            if run is None or run.status.ended:
                return False
            data = run_to_json(run)
            data["cancelRequested"] = True
            db.execute("UPDATE agent_runs SET data = ? WHERE id = ?", (json.dumps(data), run_id))
            return True

    @guard
    def cancel_requested(self, run_id: str) -> bool:
        run = self.get(run_id)
        return run is not None and run.cancel_requested

    @guard
    def finish(
        self,
        run_id: str,
        status: RunStatus,
        *,
        at: datetime,
        error: str | None = None,
        cost_usd: float | None = None,
        retention: timedelta,
    ) -> Run:
        with self.db.transaction() as db:
            run = _read(db, run_id)
            if run is None:
                raise RunNotFound(run_id)
            if run.status.ended:
                return run
            data = run_to_json(run)
            data.update(
                status=status.value, error=error, costUsd=cost_usd, finishedAt=at.isoformat()
            )
            db.execute(
                "UPDATE agent_runs SET status = ?, data = ? WHERE id = ?",
                (status.value, json.dumps(data), run_id),
            )
            db.execute(
                "UPDATE agent_chat_claims SET active_run_id = NULL"
                " WHERE session_id = ? AND chat_id = ? AND active_run_id = ?",
                (run.session_id, run.chat_id, run_id),
            )
            mark_turn(db, run.session_id, run.chat_id, run_id, live=False)
            # an ended run's log is a replay cache until it expires: it counts no more
            logged = db.execute(
                "SELECT SUM(length(CAST(chunk AS BLOB))) FROM agent_run_events WHERE run_id = ?",
                (run_id,),
            ).fetchone()
            charge(db, run.user_id, -int(logged[0] or 0), None)
            expires = (at + retention).timestamp()
            db.execute(
                "UPDATE agent_run_events SET expires_at = ? WHERE run_id = ?", (expires, run_id)
            )
            # the expired events of every run go with it (SQLite has no TTL of its own)
            db.execute("DELETE FROM agent_run_events WHERE expires_at < ?", (time.time(),))
            return run_from_json(data)

    @guard
    def running(self) -> list[Run]:
        rows = (
            self.db.connection()
            .execute("SELECT data FROM agent_runs WHERE status = ?", (RunStatus.RUNNING.value,))
            .fetchall()
        )
        return [run_from_json(json.loads(data)) for (data,) in rows]

    @guard
    def record_checkpoint(self, run_id: str, checkpoint: Checkpoint) -> Run | None:
        with self.db.transaction() as db:
            run = _read(db, run_id)
            changed = with_checkpoint(run, checkpoint) if run is not None else None
            if changed is not None:
                _write(db, changed)
            return changed or run

    @guard
    def mark_reverted(self, run_id: str, revert: RevertRecord | None = None) -> Run | None:
        with self.db.transaction() as db:
            run = _read(db, run_id)
            if run is None:
                return None
            changed = as_reverted(run, revert)
            _write(db, changed)
            return changed

    def expires_at(self, run_id: str) -> list[float | None]:
        """The events' expiry times (tests)."""
        rows = (
            self.db.connection()
            .execute("SELECT expires_at FROM agent_run_events WHERE run_id = ?", (run_id,))
            .fetchall()
        )
        return [row[0] for row in rows]
