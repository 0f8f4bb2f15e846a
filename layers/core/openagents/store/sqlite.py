"""The store on SQLite (stdlib ``sqlite3``): the one-machine runtime's embedded, durable store.

Same semantics as the DynamoDB adapter (one contract suite runs against both): every write is
one ``BEGIN IMMEDIATE`` transaction, so its conditions are checked and its rows written
atomically, all or nothing; the same port errors; the same cursors; large message bodies in
the artifact store.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from openagents.artifacts import ArtifactStore
from openagents.domain.lifecycle import LifecycleFields
from openagents.domain.models import (
    AuditEntry,
    Chat,
    ChatMark,
    LifecycleState,
    ListFilter,
    Message,
    Page,
    Preferences,
    Repo,
    Role,
    Session,
    SessionStatus,
    TitleSource,
    pr_key,
)
from openagents.store import cursor
from openagents.store import sqlite_storage as storage
from openagents.store.keys import (
    CREATED_KEY,
    EVENT_SK,
    MESSAGE_SK,
    created_key,
    event_sk,
)
from openagents.store.port import (
    Activity,
    ChatIdTaken,
    Gone,
    LastChat,
    RateWindow,
    RepositoryAlreadySet,
    StaleState,
    TitleTaken,
    TooManyChats,
    UpsertResult,
    UserRecord,
    check_lifecycle_fields,
)
from openagents.store.previews_sqlite import SqlitePreviews
from openagents.store.shared import (
    MessageBodies,
    Segment,
    chat_edit,
    chat_mark,
    deletion_target,
    generated_title_applies,
    iso,
    page_of,
    status_change,
    title_is_automatic,
)
from openagents.store.sqlite_outbox import Outbox, Publish
from openagents.store.sqlite_rows import (
    insert_chat,
    insert_entry,
    insert_session,
    read_chat,
    read_session,
    session_columns,
    to_chat,
    to_entry,
    to_listed,
    to_session,
    update_session,
    with_changes,
    write_chat,
)
from openagents.store.sqlite_schema import BUSY_TIMEOUT_SECONDS, Database, guard
from openagents.store.sqlite_storage import ensure_columns
from openagents.store.sqlite_writes import (
    insert_message_row,
    read_segments,
    touch_mark,
    upsert_message,
)

__all__ = ["SqliteStore"]
RUNNING = (LifecycleState.ACTIVE, LifecycleState.HIBERNATING)


def _archived_delta(db: sqlite3.Connection, user_id: str, delta: int) -> None:
    db.execute(
        "INSERT INTO profiles (user_id, archived_count) VALUES (?, ?)"
        " ON CONFLICT (user_id) DO UPDATE SET"
        " archived_count = archived_count + excluded.archived_count",
        (user_id, delta),
    )


class SqliteStore(SqlitePreviews):
    """``Store`` on one SQLite file (``<OPENAGENTS_HOME>/openagents.db``)."""

    def __init__(
        self,
        path: Path | None,
        artifacts: ArtifactStore,
        inline_message_bytes: int,
        publish: Publish | None = None,
        busy_timeout: float = BUSY_TIMEOUT_SECONDS,
        max_user_bytes: int | None = None,
    ) -> None:
        """``publish``: where the outbox's events go (drained after every commit that wrote
        one); without it they wait in the outbox for a drainer. A write waits up to
        ``busy_timeout`` seconds for SQLite's lock, then fails ``Unavailable``. ``path`` None:
        the in-memory adapter (these rules on a database in memory: no file, no fsync), for
        the services' tests."""
        self.db = Database(path, busy_timeout)  # the unit of work the run store shares
        self.bodies = MessageBodies(artifacts, inline_message_bytes)
        self.storage_limit = max_user_bytes  # a user's stored bytes (None: unbounded)
        with self.db.transaction() as db:
            ensure_columns(db)
        self.outbox = Outbox(self.db, publish) if publish is not None else None

    def _drain(self) -> None:
        if self.outbox is not None:
            self.outbox.try_drain()

    # ------------------------------------------------------------------ users

    @guard
    def get_user(self, user_id: str) -> UserRecord:
        row = (
            self.db.connection()
            .execute(
                "SELECT default_model_id, auto_commit_push, auto_create_pr, archived_count"
                " FROM profiles WHERE user_id = ?",
                (user_id,),
            )
            .fetchone()
        )
        if row is None:
            return UserRecord(preferences=Preferences(), archived_count=0)
        prefs = Preferences(
            default_model_id=row[0], auto_commit_push=bool(row[1]), auto_create_pr=bool(row[2])
        )
        return UserRecord(preferences=prefs, archived_count=int(row[3]))

    @guard
    def put_preferences(self, user_id: str, preferences: Preferences) -> None:
        with self.db.transaction() as db:
            db.execute(
                "INSERT INTO profiles (user_id, default_model_id, auto_commit_push, auto_create_pr)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (user_id) DO UPDATE SET"
                " default_model_id = excluded.default_model_id,"
                " auto_commit_push = excluded.auto_commit_push,"
                " auto_create_pr = excluded.auto_create_pr",
                (
                    user_id,
                    preferences.default_model_id or None,
                    preferences.auto_commit_push,
                    preferences.auto_create_pr,
                ),
            )

    @guard
    def storage_used(self, user_id: str) -> int:
        return storage.used(self.db.connection(), user_id)

    @guard
    def charge_storage(self, user_id: str, delta: int) -> None:
        with self.db.transaction() as db:
            storage.charge(db, user_id, delta, self.storage_limit)

    @guard
    def used_titles(self, user_id: str) -> set[str]:
        rows = self.db.connection().execute(
            "SELECT DISTINCT title FROM titles WHERE user_id = ?", (user_id,)
        )
        return {row[0] for row in rows}

    # --------------------------------------------------------------- sessions

    @guard
    def create_session(
        self,
        session: Session,
        chat: Chat,
        entry: AuditEntry,
        *,
        claim_title: bool,
        rate: RateWindow,
    ) -> None:
        user = session.user_id
        now = int(rate.at.timestamp())
        with self.db.transaction() as db:
            db.execute("DELETE FROM counters WHERE user_id = ? AND expires_at < ?", (user, now))
            self._count_hit(db, user, rate)
            if claim_title and self._title_taken(db, user, session.title):
                raise TitleTaken
            insert_session(db, session)
            insert_chat(db, user, chat)
            insert_entry(db, entry, user)
            db.execute(
                "INSERT OR IGNORE INTO titles (user_id, title, session_id) VALUES (?, ?, ?)",
                (user, session.title, session.id),
            )
        self._drain()

    @staticmethod
    def _count_hit(db: sqlite3.Connection, user: str, rate: RateWindow) -> None:
        """The sliding window: one row per admitted hit (``R#<action>#<epoch ms>#<nonce>``),
        counted over (at - seconds, at] in the create's own transaction (written with it, or
        not at all)."""
        prefix = f"R#{rate.action}#"
        rows = db.execute(
            "SELECT key FROM counters WHERE user_id = ? AND key > ? AND key < ?",
            (user, prefix, prefix + "~"),
        ).fetchall()
        rate.admit(int(key.removeprefix(prefix).split("#")[0]) for (key,) in rows)
        expires = int(rate.at.timestamp()) + rate.seconds + 60
        db.execute(
            "INSERT INTO counters (user_id, key, hits, expires_at) VALUES (?, ?, 1, ?)",
            (user, f"{prefix}{rate.at_ms:013d}#{secrets.token_hex(4)}", expires),
        )

    @staticmethod
    def _title_taken(db: sqlite3.Connection, user_id: str, title: str) -> bool:
        query = "SELECT 1 FROM titles WHERE user_id = ? AND title = ? LIMIT 1"
        return db.execute(query, (user_id, title)).fetchone() is not None

    @guard
    def get_session(self, session_id: str) -> Session | None:
        return read_session(self.db.connection(), session_id)

    @guard
    def list_sessions(
        self, user_id: str, which: ListFilter, limit: int, cursor_: str | None
    ) -> Page[Session]:
        where, params = "user_id = ?", [user_id]
        if which is not ListFilter.ALL:
            archived = which is ListFilter.ARCHIVED
            status = SessionStatus.ARCHIVED if archived else SessionStatus.RUNNING
            where, params = where + " AND status = ?", [*params, status.value]
        if cursor_:
            where, params = (
                where + " AND created_key < ?",
                [
                    *params,
                    cursor.decode(cursor_, CREATED_KEY),
                ],
            )
        rows = self.db.connection().execute(
            f"SELECT data FROM sessions WHERE {where} ORDER BY created_key DESC LIMIT ?",  # noqa: S608 - our own clauses
            (*params, limit + 1),
        )
        return page_of([to_listed(row[0]) for row in rows], limit, created_key)

    @guard
    def rename_session(self, session: Session, title: str, entry: AuditEntry) -> Session:
        self._rename(session, title, entry, TitleSource.USER)
        return session.model_copy(
            update={"title": title, "title_source": TitleSource.USER, "updated_at": entry.at}
        )

    @guard
    def set_ask_before_bash(self, session: Session, ask: bool, entry: AuditEntry) -> Session:
        with self.db.transaction() as db:
            stored = read_session(db, session.id)
            if stored is None:
                raise Gone
            updated = stored.model_copy(update={"ask_before_bash": ask, "updated_at": entry.at})
            update_session(db, updated)
            insert_entry(db, entry, session.user_id)
        self._drain()
        return updated

    @guard
    def set_repository(
        self, session: Session, repo: Repo, branch: str, is_new_branch: bool, entry: AuditEntry
    ) -> Session:
        with self.db.transaction() as db:
            stored = read_session(db, session.id)
            if stored is None:
                raise Gone
            if stored.clone_url or stored.repo_owner or stored.repo_name:
                raise RepositoryAlreadySet
            updated = stored.model_copy(
                update={
                    "repo_owner": repo.owner,
                    "repo_name": repo.name,
                    "clone_url": repo.clone_url,
                    "own_branch": branch,
                    "branch": branch,
                    "is_new_branch": is_new_branch,
                    "updated_at": entry.at,
                }
            )
            update_session(db, updated)
            insert_entry(db, entry, session.user_id)
        self._drain()
        return updated

    @guard
    def title_session(self, session: Session, title: str, entry: AuditEntry) -> bool:
        try:
            return self._rename(session, title, entry, TitleSource.GENERATED)
        except Gone:
            return False

    def _rename(self, session: Session, title: str, entry: AuditEntry, source: TitleSource) -> bool:
        """``rename_session`` (a user's: always), ``title_session`` (a generated title: only
        while the stored title is still the automatic ``session.title``)."""
        with self.db.transaction() as db:
            stored = read_session(db, session.id)
            if stored is None:
                raise Gone
            if source is TitleSource.GENERATED and not generated_title_applies(
                stored.title_source, stored.title, session.title
            ):
                return False
            changes = {"title": title, "title_source": source, "updated_at": entry.at}
            update_session(db, stored.model_copy(update=changes))
            db.execute(
                "DELETE FROM titles WHERE user_id = ? AND title = ? AND session_id = ?",
                (session.user_id, session.title, session.id),
            )
            db.execute(
                "INSERT OR IGNORE INTO titles (user_id, title, session_id) VALUES (?, ?, ?)",
                (session.user_id, title, session.id),
            )
            insert_entry(db, entry, session.user_id)
        self._drain()
        return True

    @guard
    def set_status(
        self,
        session: Session,
        status: SessionStatus,
        lifecycle_state: LifecycleState | None,
        entry: AuditEntry,
        changes: LifecycleFields | None = None,
    ) -> Session:
        """Archive or unarchive, conditional on the status the caller read."""
        change = status_change(session, status, lifecycle_state, entry.at, changes)
        with self.db.transaction() as db:
            stored = read_session(db, session.id)
            if stored is None or stored.status is not session.status:
                raise StaleState
            updated, columns = with_changes(stored, change.update)
            update_session(db, updated, columns)
            if change.archived_delta:
                _archived_delta(db, session.user_id, change.archived_delta)
            insert_entry(db, entry, session.user_id)
        self._drain()
        return change.applied(session)

    @guard
    def sessions_for_pr(self, owner: str, name: str, number: int) -> list[Session]:
        key = pr_key(owner, name, number)
        if key is None:
            return []
        rows = self.db.connection().execute("SELECT data FROM sessions WHERE pr_key = ?", (key,))
        return [to_session(row[0]) for row in rows]

    @guard
    def delete_session(self, session: Session) -> None:
        """The session and everything under it, in one transaction; then the large bodies."""
        with self.db.transaction() as db:
            if read_session(db, session.id) is None:
                raise Gone
            db.execute(
                "DELETE FROM titles WHERE user_id = ? AND title = ? AND session_id = ?",
                (session.user_id, session.title, session.id),
            )
            if session.status is SessionStatus.ARCHIVED:
                _archived_delta(db, session.user_id, -1)
            chats = [
                row[0]
                for row in db.execute("SELECT id FROM chats WHERE session_id = ?", (session.id,))
            ]
            storage.charge(db, session.user_id, -_counted(db, session.id), None)
            refs = [
                ref for chat_id in chats for ref in self._delete_messages(db, session.id, chat_id)
            ]
            db.execute("DELETE FROM chats WHERE session_id = ?", (session.id,))
            db.execute("DELETE FROM shares WHERE session_id = ?", (session.id,))
            db.execute("DELETE FROM public_previews WHERE session_id = ?", (session.id,))
            db.execute("DELETE FROM audit WHERE session_id = ?", (session.id,))
            db.execute("DELETE FROM sessions WHERE id = ?", (session.id,))
        for ref in refs:
            self.bodies.drop_body(ref)

    @guard
    def transition(
        self,
        session_id: str,
        *,
        expect: frozenset[LifecycleState],
        changes: LifecycleFields,
        entry: AuditEntry | None,
        generation: int | None = None,
        lease: str | None = None,
        bump_version: bool = False,
    ) -> Session:
        """Conditional lifecycle write: only from an expected state (and sandbox generation,
        and lifecycle lease)."""
        check_lifecycle_fields(changes)
        with self.db.transaction() as db:
            stored = read_session(db, session_id)
            if (
                stored is None
                or stored.lifecycle_state not in expect
                or (generation is not None and stored.sandbox_generation != generation)
                or (lease is not None and stored.lifecycle_run_id != lease)
            ):
                raise StaleState
            update: dict[str, Any] = {**changes, "updated_at": datetime.now(UTC)}
            if bump_version:
                update["lifecycle_version"] = stored.lifecycle_version + 1
            updated, columns = with_changes(stored, update)
            update_session(db, updated, columns)
            if entry is not None:
                insert_entry(db, entry, stored.user_id)
        if entry is not None:
            self._drain()
        return updated

    @guard
    def claim_generation(self, session_id: str, generation: int) -> bool:
        """Claim sandbox ``generation`` for a start; False if it is already claimed (a retry)."""
        with self.db.transaction() as db:
            stored = read_session(db, session_id)
            if stored is None:
                raise Gone
            if stored.sandbox_generation == generation:
                return False
            if stored.sandbox_generation > generation:
                raise StaleState
            update_session(db, stored.model_copy(update={"sandbox_generation": generation}))
        return True

    @guard
    def claim_lease(
        self,
        session_id: str,
        run_id: str,
        stale_due_before: datetime,
        *,
        replace_active: bool = False,
    ) -> bool:
        """Take the lifecycle lease: free, ours, held by a long-overdue run, or (with
        ``replace_active``) any lease of an active session."""
        with self.db.transaction() as db:
            stored = read_session(db, session_id)
            if stored is None or stored.lifecycle_state not in RUNNING:
                return False
            due_at = (session_columns(db, session_id) or {}).get("due_at")
            takeable = (
                stored.lifecycle_run_id in (None, run_id)
                or (due_at is not None and due_at < iso(stale_due_before))
                or (replace_active and stored.lifecycle_state is LifecycleState.ACTIVE)
            )
            if not takeable:
                return False
            update_session(db, stored.model_copy(update={"lifecycle_run_id": run_id}))
        return True

    @guard
    def release_lease(self, session_id: str, run_id: str) -> None:
        with self.db.transaction() as db:
            stored = read_session(db, session_id)
            if stored is not None and stored.lifecycle_run_id == run_id:
                update_session(db, stored.model_copy(update={"lifecycle_run_id": None}))

    @guard
    def overdue(self, now: datetime) -> list[str]:
        rows = self.db.connection().execute(
            "SELECT id FROM sessions WHERE due_shard IS NOT NULL AND due_at IS NOT NULL"
            " AND due_at <= ? ORDER BY due_at",
            (iso(now),),
        )
        return [row[0] for row in rows]

    @guard
    def hibernated_before(self, moment: datetime) -> list[str]:
        rows = self.db.connection().execute(
            "SELECT id FROM sessions WHERE idle_shard IS NOT NULL AND hibernated_at IS NOT NULL"
            " AND hibernated_at < ? ORDER BY hibernated_at",
            (iso(moment),),
        )
        return [row[0] for row in rows]

    @guard
    def append_entry(self, entry: AuditEntry) -> bool:
        with self.db.transaction() as db:
            key = (entry.session_id, event_sk(entry))
            if db.execute("SELECT 1 FROM audit WHERE session_id = ? AND sk = ?", key).fetchone():
                return False  # the same entry again: recorded once
            owner = db.execute(
                "SELECT user_id FROM sessions WHERE id = ?", (entry.session_id,)
            ).fetchone()
            insert_entry(db, entry, owner[0] if owner else "")
        self._drain()
        return True

    @guard
    def list_events(self, session_id: str, limit: int, cursor_: str | None) -> Page[AuditEntry]:
        after = cursor.decode(cursor_, EVENT_SK) if cursor_ else ""
        rows = self.db.connection().execute(
            "SELECT data FROM audit WHERE session_id = ? AND sk > ? ORDER BY sk LIMIT ?",
            (session_id, after, limit + 1),
        )
        return page_of([to_entry(row[0]) for row in rows], limit, event_sk)

    # ------------------------------------------------------------------ chats

    @guard
    def get_chat(self, session_id: str, chat_id: str) -> Chat | None:
        return read_chat(self.db.connection(), session_id, chat_id)

    @guard
    def chat_session(self, user_id: str, chat_id: str) -> str | None:
        row = (
            self.db.connection()
            .execute(
                "SELECT session_id FROM chats WHERE user_id = ? AND id = ?", (user_id, chat_id)
            )
            .fetchone()
        )
        return str(row[0]) if row is not None else None

    @guard
    def list_chats(self, session_id: str) -> list[Chat]:
        rows = self.db.connection().execute(
            "SELECT data FROM chats WHERE session_id = ?", (session_id,)
        )
        return sorted((to_chat(row[0]) for row in rows), key=lambda c: (c.created_at, c.id))

    @guard
    def create_chat(self, session: Session, chat: Chat, max_chats: int) -> None:
        with self.db.transaction() as db:
            self._insert_chat(db, session, chat, max_chats, chat_mark(chat))

    @staticmethod
    def _insert_chat(
        db: sqlite3.Connection, session: Session, chat: Chat, max_chats: int, mark: ChatMark
    ) -> None:
        taken = db.execute(
            "SELECT session_id FROM chats WHERE user_id = ? AND id = ?", (session.user_id, chat.id)
        ).fetchone()
        if taken is not None:
            raise ChatIdTaken(taken[0])
        stored = read_session(db, session.id)
        if stored is None:
            raise Gone
        if len(stored.chats) >= max_chats:
            raise TooManyChats
        insert_chat(db, session.user_id, chat)
        update_session(db, stored.model_copy(update={"chats": {**stored.chats, chat.id: mark}}))

    @guard
    def update_chat(
        self, chat: Chat, *, title: str | None, model_id: str | None, at: datetime
    ) -> Chat:
        changes = chat_edit(title, model_id, at)
        with self.db.transaction() as db:
            stored_chat = read_chat(db, chat.session_id, chat.id)
            stored = read_session(db, chat.session_id)
            if stored_chat is None or stored is None or chat.id not in stored.chats:
                raise Gone
            write_chat(db, stored_chat.model_copy(update=changes))
            touch_mark(db, stored, chat.id, updated_at=at)
        return chat.model_copy(update=changes)

    @guard
    def title_chat(self, chat: Chat, title: str) -> bool:
        with self.db.transaction() as db:
            stored = read_chat(db, chat.session_id, chat.id)
            if stored is None or not title_is_automatic(stored.title_source):
                return False
            changes = {"title": title, "title_source": TitleSource.GENERATED}
            write_chat(db, stored.model_copy(update=changes))
        return True

    @guard
    def delete_chat(self, session: Session, chat_id: str) -> None:
        with self.db.transaction() as db:
            if read_chat(db, session.id, chat_id) is None:
                raise Gone
            stored = read_session(db, session.id)
            if stored is None or len(stored.chats) <= 1:
                raise LastChat
            key = (session.id, chat_id)
            db.execute("DELETE FROM chats WHERE session_id = ? AND id = ?", key)
            db.execute("DELETE FROM shares WHERE session_id = ? AND chat_id = ?", key)
            chats = {key: mark for key, mark in stored.chats.items() if key != chat_id}
            update_session(db, stored.model_copy(update={"chats": chats}))
            storage.charge(db, session.user_id, -_counted(db, session.id, chat_id), None)
            refs = self._delete_messages(db, session.id, chat_id)
        for ref in refs:
            self.bodies.drop_body(ref)

    @guard
    def mark_read(self, session: Session, chat_id: str, at: datetime) -> None:
        with self.db.transaction() as db:
            stored = read_session(db, session.id)
            if stored is None or chat_id not in stored.chats:
                raise Gone
            touch_mark(db, stored, chat_id, last_read_at=at)

    # --------------------------------------------------------------- messages

    @guard
    def put_message(
        self, session: Session, chat: Chat, message: Message, *, activity: Activity | None
    ) -> UpsertResult:
        body, body_ref, size = self.bodies.staged(message)
        try:
            with self.db.transaction() as db:
                result, old_ref = upsert_message(
                    db,
                    session,
                    chat,
                    message,
                    body,
                    body_ref,
                    activity,
                    size=size,
                    limit=self.storage_limit,
                )
        except BaseException:
            self.bodies.drop_body(body_ref)
            raise
        if result == "unchanged":
            self.bodies.drop_body(body_ref)
        self.bodies.drop_body(old_ref)
        return result

    @guard
    def list_messages(
        self,
        session_id: str,
        chat_id: str,
        limit: int,
        cursor_: str | None,
        *,
        before: bool = False,
    ) -> Page[Message]:
        columns = (
            "SELECT sk, id, role, body, body_ref, created_at FROM messages"
            " WHERE session_id = ? AND chat_id = ?"
        )
        if not before:
            after = cursor.decode(cursor_, MESSAGE_SK) if cursor_ else ""
            rows = list(
                self.db.connection().execute(
                    f"{columns} AND sk > ? ORDER BY sk LIMIT ?",
                    (session_id, chat_id, after, limit + 1),
                )
            )
        else:
            until = cursor.decode(cursor_, MESSAGE_SK) if cursor_ else "M$"  # past every M#
            rows = list(
                self.db.connection().execute(
                    f"{columns} AND sk < ? ORDER BY sk DESC LIMIT ?",
                    (session_id, chat_id, until, limit + 1),
                )
            )
        page = page_of(rows, limit, lambda row: str(row[0]))
        laid = read_segments(
            self.db.connection(), session_id, chat_id, (row[1] for row in page.items)
        )
        items = [self._message(chat_id, row, laid.get(row[1], ())) for row in page.items]
        return Page[Message](items=items[::-1] if before else items, cursor=page.cursor)

    @guard
    def delete_messages_from(
        self, session: Session, chat: Chat, message_id: str, at: datetime
    ) -> list[str]:
        with self.db.transaction() as db:
            stored_chat = read_chat(db, session.id, chat.id)
            stored = read_session(db, session.id)
            if stored_chat is None or stored is None or chat.id not in stored.chats:
                raise Gone
            key = (session.id, chat.id)
            target = db.execute(
                "SELECT sk, role FROM messages WHERE session_id = ? AND chat_id = ? AND id = ?",
                (*key, message_id),
            ).fetchone()
            deletion_target(None if target is None else str(target[1]))
            doomed = db.execute(
                "SELECT id, body_ref, bytes FROM messages"
                " WHERE session_id = ? AND chat_id = ? AND sk >= ? ORDER BY sk",
                (*key, target[0]),
            ).fetchall()
            freed = sum(int(row[2] or 0) for row in doomed)
            storage.charge(db, session.user_id, -freed, None)
            db.execute(
                "DELETE FROM messages WHERE session_id = ? AND chat_id = ? AND sk >= ?",
                (*key, target[0]),
            )
            db.executemany(
                "DELETE FROM message_segments"
                " WHERE session_id = ? AND chat_id = ? AND message_id = ?",
                [(*key, row[0]) for row in doomed],
            )
            left = db.execute(
                "SELECT COUNT(*), MAX(CASE WHEN role = ? THEN sk END) FROM messages"
                " WHERE session_id = ? AND chat_id = ?",
                (Role.ASSISTANT.value, *key),
            ).fetchone()
            last = None
            if left[1] is not None:
                row = db.execute(
                    "SELECT created_at FROM messages"
                    " WHERE session_id = ? AND chat_id = ? AND sk = ?",
                    (*key, left[1]),
                ).fetchone()
                last = datetime.fromisoformat(row[0])
            write_chat(
                db,
                stored_chat.model_copy(
                    update={
                        "message_count": int(left[0]),
                        "last_assistant_message_at": last,
                        "updated_at": at,
                    }
                ),
            )
            touch_mark(db, stored, chat.id, last_assistant_message_at=last, updated_at=at)
        for _, ref, _ in doomed:
            self.bodies.drop_body(ref)
        return [str(row[0]) for row in doomed]

    @guard
    def fork_chat(
        self, session: Session, chat: Chat, messages: list[Message], max_chats: int
    ) -> None:
        bodies = [self.bodies.staged(message) for message in messages]
        try:
            with self.db.transaction() as db:
                total = sum(size for _, _, size in bodies)
                storage.charge(db, session.user_id, total, self.storage_limit)
                self._insert_chat(db, session, chat, max_chats, chat_mark(chat, read=True))
                for message, (body, body_ref, size) in zip(messages, bodies, strict=True):
                    insert_message_row(db, session, chat.id, message, body, body_ref, size)
        except BaseException:
            for _, body_ref, _ in bodies:
                self.bodies.drop_body(body_ref)
            raise

    # ------------------------------------------------------------ share links

    @guard
    def share_chat(self, chat: Chat, share_id: str) -> str:
        with self.db.transaction() as db:
            stored = read_chat(db, chat.session_id, chat.id)
            if stored is None:
                raise Gone
            if stored.share_id is not None:
                return stored.share_id
            db.execute(
                "INSERT INTO shares (id, session_id, chat_id) VALUES (?, ?, ?)",
                (share_id, chat.session_id, chat.id),
            )
            write_chat(db, stored.model_copy(update={"share_id": share_id}))
        return share_id

    @guard
    def unshare_chat(self, chat: Chat) -> None:
        with self.db.transaction() as db:
            db.execute(
                "DELETE FROM shares WHERE session_id = ? AND chat_id = ?",
                (chat.session_id, chat.id),
            )
            stored = read_chat(db, chat.session_id, chat.id)
            if stored is not None and stored.share_id is not None:
                write_chat(db, stored.model_copy(update={"share_id": None}))

    @guard
    def shared_chat(self, share_id: str) -> Chat | None:
        db = self.db.connection()
        row = db.execute(
            "SELECT session_id, chat_id FROM shares WHERE id = ?", (share_id,)
        ).fetchone()
        chat = None if row is None else read_chat(db, row[0], row[1])
        return chat if chat is not None and chat.share_id == share_id else None

    def purge_deleted(self, limit: int = 25) -> int:
        """Nothing to finish: a delete removes the children in its own transaction."""
        return 0

    # ------------------------------------------------------------- deliveries

    @guard
    def claim_delivery(self, delivery_id: str, at: datetime, expires_at: datetime) -> bool:
        with self.db.transaction() as db:
            db.execute("DELETE FROM deliveries WHERE expires_at <= ?", (int(at.timestamp()),))
            claimed = db.execute(
                "INSERT OR IGNORE INTO deliveries (id, expires_at) VALUES (?, ?)",
                (delivery_id, int(expires_at.timestamp())),
            )
            return claimed.rowcount == 1

    @guard
    def forget_delivery(self, delivery_id: str) -> None:
        with self.db.transaction() as db:
            db.execute("DELETE FROM deliveries WHERE id = ?", (delivery_id,))

    # ---------------------------------------------------------------- helpers

    @staticmethod
    def _delete_messages(db: sqlite3.Connection, session_id: str, chat_id: str) -> list[str]:
        key = (session_id, chat_id)
        refs = [
            str(row[0])
            for row in db.execute(
                "SELECT body_ref FROM messages"
                " WHERE session_id = ? AND chat_id = ? AND body_ref IS NOT NULL",
                key,
            )
        ]
        db.execute("DELETE FROM messages WHERE session_id = ? AND chat_id = ?", key)
        db.execute("DELETE FROM message_segments WHERE session_id = ? AND chat_id = ?", key)
        return refs

    def _message(self, chat_id: str, row: Any, segments: Sequence[Segment]) -> Message:
        _, message_id, role, body, body_ref, created_at = row
        return self.bodies.message(message_id, chat_id, role, body, body_ref, created_at, segments)


def _counted(db: sqlite3.Connection, session_id: str, chat_id: str | None = None) -> int:
    """The bytes the session's (or one chat's) messages were counted at."""
    where = "session_id = ?" + (" AND chat_id = ?" if chat_id is not None else "")
    params = (session_id,) if chat_id is None else (session_id, chat_id)
    row = db.execute(f"SELECT SUM(bytes) FROM messages WHERE {where}", params).fetchone()  # noqa: S608
    return int(row[0] or 0)
