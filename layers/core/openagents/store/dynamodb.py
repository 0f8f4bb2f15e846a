"""The store on DynamoDB through PynamoDB (AWS, and moto's server on one machine).

Every access pattern is one request: GetItem, one Query, or one TransactWriteItems.
"""

from __future__ import annotations

import contextlib
import functools
import json
import random
import re
import secrets
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ParamSpec, TypeVar

from pynamodb.attributes import MapAttribute
from pynamodb.connection import Connection
from pynamodb.exceptions import PynamoDBException, TransactWriteError, UpdateError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.transactions import TransactWrite

from openagents.artifacts import ArtifactStore
from openagents.domain.errors import Unavailable
from openagents.domain.lifecycle import DUE_SHARDS
from openagents.domain.models import (
    AuditEntry,
    Chat,
    ChatMark,
    LifecycleState,
    ListFilter,
    Message,
    Page,
    Preferences,
    Role,
    Session,
    SessionStatus,
    pr_key,
)
from openagents.domain.naming import chat_title_from_text
from openagents.store import cursor
from openagents.store.items import (
    AuditItem,
    ChatClaimItem,
    ChatItem,
    CounterItem,
    MessageClaimItem,
    MessageItem,
    ProfileItem,
    SessionItem,
    TitleItem,
)
from openagents.store.port import (
    LIFECYCLE_FIELDS,
    Activity,
    ChatIdTaken,
    Gone,
    LastChat,
    MessageIdTaken,
    RateLimitExceeded,
    RateWindow,
    StaleState,
    TitleTaken,
    TooManyChats,
    UpsertResult,
    UserRecord,
)

P = ParamSpec("P")
R = TypeVar("R")

SESSION_SK = "SESSION"
CREATED_KEY = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+\+00:00#[\w-]{1,64}")
MESSAGE_SK = re.compile(r"M#\d{13}#[^\s]{1,200}")
EVENT_SK = re.compile(r"E#\d{4}-\d\d-\d\dT[\d:.]+\+00:00#[\w-]{1,64}")


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def _iso_or_none(value: datetime | None) -> str | None:
    return None if value is None else _iso(value)


def _dt(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _session_pk(session_id: str) -> str:
    return f"S#{session_id}"


def _chat_sk(chat_id: str) -> str:
    return f"C#{chat_id}"


def _user_pk(user_id: str) -> str:
    return f"U#{user_id}"


CONFLICT_RETRIES = 3
KIND_ORDER = ("condition_check", "delete", "save", "update")  # how PynamoDB sends them


class _Transaction:
    """Collects a transaction's writes, commits them on exit, and replays them when DynamoDB
    cancels the transaction for a conflict with another one in flight (``TransactionConflict``).

    PynamoDB sends items grouped by kind (condition checks, deletes, puts, updates), so the
    cancellation reasons come in that order; ``failed(error, n)`` takes ``n`` in call order.
    """

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._ops: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def _record(self, kind: str, *args: Any, **kwargs: Any) -> None:
        self._ops.append((kind, args, kwargs))

    def save(self, *args: Any, **kwargs: Any) -> None:
        self._record("save", *args, **kwargs)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._record("update", *args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> None:
        self._record("delete", *args, **kwargs)

    def __enter__(self) -> _Transaction:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            return
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                with TransactWrite(connection=self._connection) as write:
                    for kind, args, kwargs in self._ops:
                        getattr(write, kind)(*args, **kwargs)
                return
            except TransactWriteError as error:
                if attempt == CONFLICT_RETRIES or not _conflicted(error):
                    raise
                time.sleep(0.02 * 2**attempt * (1 + random.random()))  # noqa: S311 - jitter

    def failed(self, error: TransactWriteError, index: int) -> bool:
        """Did the ``index``-th write (in call order) fail its condition?"""
        order = sorted(range(len(self._ops)), key=lambda i: KIND_ORDER.index(self._ops[i][0]))
        reasons = error.cancellation_reasons
        position = order.index(index)
        reason = reasons[position] if position < len(reasons) else None
        return reason is not None and reason.code == "ConditionalCheckFailed"


def _conflicted(error: TransactWriteError) -> bool:
    return any(
        r is not None and r.code == "TransactionConflict" for r in error.cancellation_reasons
    )


def _guard(method: Callable[P, R]) -> Callable[P, R]:
    """Turn unexpected store failures (throttling, outages) into the domain's ``Unavailable``."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except PynamoDBException as exc:
            raise Unavailable(
                f"The session store is unavailable ({exc.cause_response_code})"
            ) from exc

    return wrapper


class DynamoStore:
    """``Store`` on one DynamoDB table. ``items.bind`` must have pointed the models at it."""

    def __init__(self, artifacts: ArtifactStore, inline_message_bytes: int) -> None:
        self._artifacts = artifacts
        self._inline = inline_message_bytes
        self._connection: tuple[tuple[str, str | None], Connection] | None = None

    def _transaction(self) -> _Transaction:
        """Transactions share one connection (a new one would reload botocore's models)."""
        meta = SessionItem.Meta
        target = (meta.region, getattr(meta, "host", None))
        if self._connection is None or self._connection[0] != target:
            self._connection = (target, Connection(region=target[0], host=target[1]))
        return _Transaction(self._connection[1])

    # ------------------------------------------------------------------ users

    @_guard
    def get_user(self, user_id: str) -> UserRecord:
        try:
            item = ProfileItem.get(_user_pk(user_id), "PROFILE")
        except ProfileItem.DoesNotExist:
            return UserRecord(preferences=Preferences(), archived_count=0)
        prefs = Preferences(
            default_model_id=item.default_model_id,
            auto_commit_push=bool(item.auto_commit_push),
            auto_create_pr=bool(item.auto_create_pr),
        )
        return UserRecord(preferences=prefs, archived_count=int(item.archived_count or 0))

    @_guard
    def put_preferences(self, user_id: str, preferences: Preferences) -> None:
        item = ProfileItem(_user_pk(user_id), "PROFILE")
        item.update(
            actions=[
                ProfileItem.default_model_id.set(preferences.default_model_id)
                if preferences.default_model_id
                else ProfileItem.default_model_id.remove(),
                ProfileItem.auto_commit_push.set(preferences.auto_commit_push),
                ProfileItem.auto_create_pr.set(preferences.auto_create_pr),
            ]
        )

    @_guard
    def used_titles(self, user_id: str) -> set[str]:
        items = TitleItem.query(
            _user_pk(user_id),
            TitleItem.sk.startswith("T#"),
            filter_condition=TitleItem.session_ids.exists(),
        )
        return {item.sk.removeprefix("T#") for item in items}

    # --------------------------------------------------------------- sessions

    @_guard
    def create_session(
        self,
        session: Session,
        chat: Chat,
        entry: AuditEntry,
        *,
        claim_title: bool,
        rate: RateWindow,
    ) -> None:
        title = TitleItem(_user_pk(session.user_id), f"T#{session.title}")
        counter = CounterItem(
            _user_pk(session.user_id),
            f"R#{rate.action}#{int(rate.starts_at.timestamp())}",
        )
        try:
            with self._transaction() as tx:
                tx.save(_session_item(session), condition=SessionItem.pk.does_not_exist())
                tx.save(_chat_item(chat), condition=ChatItem.pk.does_not_exist())
                tx.save(
                    ChatClaimItem(f"CID#{chat.id}", "CID", session_id=session.id),
                    condition=ChatClaimItem.pk.does_not_exist(),
                )
                tx.save(_audit_item(entry))
                tx.update(
                    title,
                    actions=[TitleItem.session_ids.add({session.id})],
                    condition=TitleItem.session_ids.does_not_exist() if claim_title else None,
                )
                tx.update(
                    counter,
                    actions=[
                        CounterItem.hits.add(1),
                        CounterItem.expires_at.set(int(rate.ends_at.timestamp()) + 60),
                    ],
                    condition=CounterItem.hits.does_not_exist() | (CounterItem.hits < rate.limit),
                )
        except TransactWriteError as exc:
            if tx.failed(exc, 5):
                raise RateLimitExceeded(rate.ends_at) from exc
            if tx.failed(exc, 4):
                raise TitleTaken from exc
            raise

    @_guard
    def get_session(self, session_id: str) -> Session | None:
        try:
            return _session(SessionItem.get(_session_pk(session_id), SESSION_SK))
        except SessionItem.DoesNotExist:
            return None

    @_guard
    def list_sessions(
        self, user_id: str, which: ListFilter, limit: int, cursor_: str | None
    ) -> Page[Session]:
        start = cursor.decode(cursor_, CREATED_KEY) if cursor_ else None
        if which is ListFilter.ALL:
            partition, index_key = user_id, "userId"
            index: Any = SessionItem.by_user
        else:
            status = (
                SessionStatus.ARCHIVED if which is ListFilter.ARCHIVED else SessionStatus.RUNNING
            )
            partition, index_key = f"{user_id}#{status.value}", "userStatus"
            index = SessionItem.by_user_status
        last_key = None
        if start is not None:
            session_id = start.split("#", 1)[1]
            last_key = {
                "pk": {"S": _session_pk(session_id)},
                "sk": {"S": SESSION_SK},
                index_key: {"S": partition},
                "createdKey": {"S": start},
            }
        results = index.query(
            partition,
            scan_index_forward=False,
            limit=limit + 1,
            page_size=limit + 1,
            last_evaluated_key=last_key,
        )
        return _page([_session(item) for item in results], limit, lambda s: _created_key(s))

    @_guard
    def rename_session(self, session: Session, title: str, entry: AuditEntry) -> Session:
        user_pk = _user_pk(session.user_id)
        now = _iso(entry.at)
        try:
            with self._transaction() as tx:
                tx.update(
                    SessionItem(_session_pk(session.id), SESSION_SK),
                    actions=[SessionItem.title.set(title), SessionItem.updated_at.set(now)],
                    condition=SessionItem.pk.exists(),
                )
                tx.update(
                    TitleItem(user_pk, f"T#{session.title}"),
                    actions=[TitleItem.session_ids.delete({session.id})],
                )
                tx.update(
                    TitleItem(user_pk, f"T#{title}"),
                    actions=[TitleItem.session_ids.add({session.id})],
                )
                tx.save(_audit_item(entry))
        except TransactWriteError as exc:
            if tx.failed(exc, 0):
                raise Gone from exc
            raise
        return session.model_copy(update={"title": title, "updated_at": entry.at})

    @_guard
    def set_status(
        self,
        session: Session,
        status: SessionStatus,
        lifecycle_state: LifecycleState | None,
        entry: AuditEntry,
        changes: dict[str, Any] | None = None,
    ) -> Session:
        """Archive or unarchive: status, lifecycle fields and ``archivedCount`` in one
        transaction, conditional on the status the caller read."""
        extra = dict(changes or {})
        extra.pop("lifecycle_state", None)
        unknown = set(extra) - LIFECYCLE_FIELDS
        if unknown:
            raise ValueError(f"not lifecycle fields: {sorted(unknown)}")
        delta = (status is SessionStatus.ARCHIVED) - (session.status is SessionStatus.ARCHIVED)
        try:
            with self._transaction() as tx:
                tx.update(
                    SessionItem(_session_pk(session.id), SESSION_SK),
                    actions=[
                        SessionItem.status.set(status.value),
                        SessionItem.user_status.set(f"{session.user_id}#{status.value}"),
                        SessionItem.lifecycle_state.set(lifecycle_state.value)
                        if lifecycle_state
                        else SessionItem.lifecycle_state.remove(),
                        SessionItem.updated_at.set(_iso(entry.at)),
                        *(_set_or_remove(name, value) for name, value in extra.items()),
                    ],
                    condition=SessionItem.status == session.status.value,
                )
                if delta:
                    tx.update(
                        ProfileItem(_user_pk(session.user_id), "PROFILE"),
                        actions=[ProfileItem.archived_count.add(delta)],
                    )
                tx.save(_audit_item(entry))
        except TransactWriteError as exc:
            if tx.failed(exc, 0):  # the status changed (or the session went) meanwhile
                raise StaleState from exc
            raise
        if extra:
            updated = self.get_session(session.id)
            if updated is None:
                raise Gone
            return updated
        return session.model_copy(
            update={"status": status, "lifecycle_state": lifecycle_state, "updated_at": entry.at}
        )

    @_guard
    def sessions_for_pr(self, owner: str, name: str, number: int) -> list[Session]:
        """Every session of pull request ``number`` of ``owner/name`` (case-insensitive)."""
        key = pr_key(owner, name, number)
        if key is None:
            return []
        return [_session(item) for item in SessionItem.by_pr.query(key)]

    @_guard
    def delete_session(self, session: Session) -> None:
        """Remove the session at once (one transaction), then its children (idempotent)."""
        pk = _session_pk(session.id)
        try:
            with self._transaction() as tx:
                tx.delete(SessionItem(pk, SESSION_SK), condition=SessionItem.pk.exists())
                tx.update(
                    TitleItem(_user_pk(session.user_id), f"T#{session.title}"),
                    actions=[TitleItem.session_ids.delete({session.id})],
                )
                if session.status is SessionStatus.ARCHIVED:
                    tx.update(
                        ProfileItem(_user_pk(session.user_id), "PROFILE"),
                        actions=[ProfileItem.archived_count.add(-1)],
                    )
        except TransactWriteError as exc:
            if tx.failed(exc, 0):
                raise Gone from exc
            raise
        children = list(ChatItem.query(pk, ChatItem.sk.startswith("C#")))
        for chat in children:
            self._delete_messages(chat.id)
        with ChatClaimItem.batch_write() as batch:
            for chat in children:
                batch.delete(ChatClaimItem(f"CID#{chat.id}", "CID"))
        with SessionItem.batch_write() as batch:
            for item in SessionItem.query(pk, attributes_to_get=["pk", "sk"]):
                batch.delete(item)

    @_guard
    def transition(
        self,
        session_id: str,
        *,
        expect: frozenset[LifecycleState],
        changes: dict[str, Any],
        entry: AuditEntry | None,
        generation: int | None = None,
        lease: str | None = None,
        bump_version: bool = False,
    ) -> Session:
        """Conditional lifecycle write: only from an expected state (and sandbox generation,
        and lifecycle lease)."""
        unknown = set(changes) - LIFECYCLE_FIELDS
        if unknown:
            raise ValueError(f"not lifecycle fields: {sorted(unknown)}")
        actions: list[Action] = [SessionItem.updated_at.set(_iso(datetime.now(UTC)))]
        actions += [_set_or_remove(name, value) for name, value in changes.items()]
        if bump_version:
            actions.append(SessionItem.lifecycle_version.add(1))
        condition = SessionItem.lifecycle_state.is_in(*(state.value for state in expect))
        if generation is not None:
            condition &= SessionItem.sandbox_generation == generation
        if lease is not None:
            condition &= SessionItem.lifecycle_run_id == lease
        item = SessionItem(_session_pk(session_id), SESSION_SK)
        try:
            with self._transaction() as tx:
                tx.update(item, actions=actions, condition=condition)
                if entry is not None:
                    tx.save(_audit_item(entry))
        except TransactWriteError as exc:
            if tx.failed(exc, 0):
                raise StaleState from exc
            raise
        updated = self.get_session(session_id)
        if updated is None:
            raise Gone
        return updated

    @_guard
    def claim_generation(self, session_id: str, generation: int) -> bool:
        """Claim sandbox ``generation`` for a start; False if it is already claimed (a retry)."""
        item = SessionItem(_session_pk(session_id), SESSION_SK)
        try:
            item.update(
                actions=[SessionItem.sandbox_generation.set(generation)],
                condition=SessionItem.pk.exists()
                & (
                    SessionItem.sandbox_generation.does_not_exist()
                    | (SessionItem.sandbox_generation < generation)
                ),
            )
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise
            current = self.get_session(session_id)
            if current is None:
                raise Gone from exc
            if current.sandbox_generation == generation:
                return False
            raise StaleState from exc
        return True

    @_guard
    def claim_lease(self, session_id: str, run_id: str, stale_due_before: datetime) -> bool:
        """Take the lifecycle lease: free, already ours, or held by a run that is long overdue."""
        stale = SessionItem.due_at < _iso(stale_due_before)
        try:
            SessionItem(_session_pk(session_id), SESSION_SK).update(
                actions=[SessionItem.lifecycle_run_id.set(run_id)],
                condition=SessionItem.lifecycle_state.is_in(
                    LifecycleState.ACTIVE.value, LifecycleState.HIBERNATING.value
                )
                & (
                    SessionItem.lifecycle_run_id.does_not_exist()
                    | (SessionItem.lifecycle_run_id == run_id)
                    | stale
                ),
            )
        except UpdateError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                return False
            raise
        return True

    @_guard
    def release_lease(self, session_id: str, run_id: str) -> None:
        with contextlib.suppress(UpdateError):  # not ours any more: nothing to release
            SessionItem(_session_pk(session_id), SESSION_SK).update(
                actions=[SessionItem.lifecycle_run_id.remove()],
                condition=SessionItem.lifecycle_run_id == run_id,
            )

    @_guard
    def overdue(self, now: datetime) -> list[str]:
        """Sessions whose sandbox is past due, from every shard of the sparse index."""
        found: list[str] = []
        for shard in range(DUE_SHARDS):
            for item in SessionItem.overdue.query(f"due#{shard}", SessionItem.due_at <= _iso(now)):
                found.append(item.pk.removeprefix("S#"))
        return found

    @_guard
    def list_events(self, session_id: str, limit: int, cursor_: str | None) -> Page[AuditEntry]:
        pk = _session_pk(session_id)
        last_key = self._base_key(pk, cursor_, EVENT_SK)
        results = AuditItem.query(
            pk,
            AuditItem.sk.startswith("E#"),
            limit=limit + 1,
            page_size=limit + 1,
            last_evaluated_key=last_key,
        )
        return _page([_audit(item) for item in results], limit, _event_sk)

    # ------------------------------------------------------------------ chats

    @_guard
    def get_chat(self, session_id: str, chat_id: str) -> Chat | None:
        try:
            return _chat(ChatItem.get(_session_pk(session_id), _chat_sk(chat_id)))
        except ChatItem.DoesNotExist:
            return None

    @_guard
    def list_chats(self, session_id: str) -> list[Chat]:
        items = ChatItem.query(_session_pk(session_id), ChatItem.sk.startswith("C#"))
        return sorted((_chat(item) for item in items), key=lambda c: (c.created_at, c.id))

    @_guard
    def create_chat(self, session: Session, chat: Chat, max_chats: int) -> None:
        mark = ChatMark(created_at=chat.created_at, updated_at=chat.updated_at)
        try:
            with self._transaction() as tx:
                tx.save(
                    ChatClaimItem(f"CID#{chat.id}", "CID", session_id=session.id),
                    condition=ChatClaimItem.pk.does_not_exist(),
                )
                tx.save(_chat_item(chat), condition=ChatItem.pk.does_not_exist())
                tx.update(
                    SessionItem(_session_pk(session.id), SESSION_SK),
                    actions=[
                        SessionItem.chats[chat.id].set(_mark_map(mark)),
                        SessionItem.chat_count.add(1),
                    ],
                    condition=SessionItem.pk.exists() & (SessionItem.chat_count < max_chats),
                )
        except TransactWriteError as exc:
            if tx.failed(exc, 0):
                claim = ChatClaimItem.get(f"CID#{chat.id}", "CID")
                raise ChatIdTaken(claim.session_id) from exc
            if tx.failed(exc, 2):
                if self.get_session(session.id) is None:
                    raise Gone from exc
                raise TooManyChats from exc
            raise

    @_guard
    def update_chat(
        self, chat: Chat, *, title: str | None, model_id: str | None, at: datetime
    ) -> Chat:
        now = _iso(at)
        actions: list[Action] = [ChatItem.updated_at.set(now)]
        if title is not None:
            actions.append(ChatItem.title.set(title))
        if model_id is not None:
            actions.append(ChatItem.model_id.set(model_id))
        try:
            with self._transaction() as tx:
                tx.update(
                    ChatItem(_session_pk(chat.session_id), _chat_sk(chat.id)),
                    actions=actions,
                    condition=ChatItem.pk.exists(),
                )
                tx.update(
                    SessionItem(_session_pk(chat.session_id), SESSION_SK),
                    actions=[SessionItem.chats[chat.id]["updatedAt"].set(now)],
                    condition=SessionItem.chats[chat.id].exists(),
                )
        except TransactWriteError as exc:
            if tx.failed(exc, 0) or tx.failed(exc, 1):
                raise Gone from exc
            raise
        changes: dict[str, Any] = {"updated_at": at}
        if title is not None:
            changes["title"] = title
        if model_id is not None:
            changes["model_id"] = model_id
        return chat.model_copy(update=changes)

    @_guard
    def delete_chat(self, session: Session, chat_id: str) -> None:
        try:
            with self._transaction() as tx:
                tx.delete(
                    ChatItem(_session_pk(session.id), _chat_sk(chat_id)),
                    condition=ChatItem.pk.exists(),
                )
                tx.delete(ChatClaimItem(f"CID#{chat_id}", "CID"))
                tx.update(
                    SessionItem(_session_pk(session.id), SESSION_SK),
                    actions=[SessionItem.chats[chat_id].remove(), SessionItem.chat_count.add(-1)],
                    condition=SessionItem.chat_count > 1,
                )
        except TransactWriteError as exc:
            if tx.failed(exc, 0):
                raise Gone from exc
            if tx.failed(exc, 2):
                raise LastChat from exc
            raise
        self._delete_messages(chat_id)

    @_guard
    def mark_read(self, session: Session, chat_id: str, at: datetime) -> None:
        try:
            SessionItem(_session_pk(session.id), SESSION_SK).update(
                actions=[SessionItem.chats[chat_id]["lastReadAt"].set(_iso(at))],
                condition=SessionItem.chats[chat_id].exists(),
            )
        except UpdateError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                raise Gone from exc
            raise

    # --------------------------------------------------------------- messages

    @_guard
    def put_message(
        self, session: Session, chat: Chat, message: Message, *, activity: Activity | None
    ) -> UpsertResult:
        body, body_ref = self._store_body(message)
        try:
            return self._insert_message(session, chat, message, body, body_ref, activity)
        except MessageIdTaken:
            pass  # a message with this id exists: update it in scope, or refuse
        except BaseException:
            self._drop_body(body_ref)
            raise
        try:
            claim = MessageClaimItem.get(f"MID#{message.id}", "MID")
        except MessageClaimItem.DoesNotExist:
            claim = None  # deleted meanwhile: treat as a conflict rather than guess
        if claim is None or claim.chat_id != chat.id or claim.role != message.role.value:
            self._drop_body(body_ref)
            raise MessageIdTaken
        if message.role is Role.USER:  # user messages are immutable once written
            self._drop_body(body_ref)
            return "unchanged"
        item = MessageItem(f"C#{chat.id}", claim.message_sk)
        try:
            old = MessageItem.get(f"C#{chat.id}", claim.message_sk)
            item.update(
                actions=[
                    MessageItem.body.set(body) if body is not None else MessageItem.body.remove(),
                    MessageItem.body_ref.set(body_ref)
                    if body_ref
                    else MessageItem.body_ref.remove(),
                ],
                condition=MessageItem.pk.exists(),
            )
        except (MessageItem.DoesNotExist, UpdateError) as exc:
            self._drop_body(body_ref)
            raise Gone from exc
        self._drop_body(old.body_ref)
        return "updated"

    def _insert_message(
        self,
        session: Session,
        chat: Chat,
        message: Message,
        body: str | None,
        body_ref: str | None,
        activity: Activity | None,
    ) -> UpsertResult:
        now = _iso(message.created_at)
        message_sk = f"M#{int(message.created_at.timestamp() * 1000):013d}#{message.id}"
        chat_actions: list[Action] = [ChatItem.updated_at.set(now), ChatItem.message_count.add(1)]
        mark = SessionItem.chats[chat.id]
        session_actions: list[Action] = [mark["updatedAt"].set(now)]
        if message.role is Role.ASSISTANT:
            chat_actions.append(ChatItem.last_assistant_message_at.set(now))
            session_actions.append(mark["lastAssistantMessageAt"].set(now))
        if activity is not None:
            session_actions += [
                SessionItem.last_activity_at.set(_iso(activity.at)),
                SessionItem.hibernate_after.set(_iso(activity.hibernate_after)),
                _set_or_remove("due_at", activity.due_at),
                _set_or_remove("due_shard", activity.due_shard),
            ]
        title = _first_message_title(chat, message)
        chat_condition: Condition = ChatItem.pk.exists()
        if title is not None:  # only the chat's first message names it
            chat_actions.append(ChatItem.title.set(title))
            chat_condition &= ChatItem.message_count == 0
        try:
            with self._transaction() as tx:
                tx.save(
                    MessageClaimItem(
                        f"MID#{message.id}",
                        "MID",
                        chat_id=chat.id,
                        role=message.role.value,
                        message_sk=message_sk,
                    ),
                    condition=MessageClaimItem.pk.does_not_exist(),
                )
                tx.save(
                    MessageItem(
                        f"C#{chat.id}",
                        message_sk,
                        id=message.id,
                        chat_id=chat.id,
                        role=message.role.value,
                        body=body,
                        body_ref=body_ref,
                        created_at=now,
                    )
                )
                tx.update(
                    ChatItem(_session_pk(session.id), _chat_sk(chat.id)),
                    actions=chat_actions,
                    condition=chat_condition,
                )
                tx.update(
                    SessionItem(_session_pk(session.id), SESSION_SK),
                    actions=session_actions,
                    condition=mark.exists(),
                )
        except TransactWriteError as exc:
            if tx.failed(exc, 0):
                raise MessageIdTaken from exc
            if tx.failed(exc, 2) and title is not None:  # another first message won the race
                fresh = chat.model_copy(update={"message_count": chat.message_count + 1})
                return self._insert_message(session, fresh, message, body, body_ref, activity)
            if tx.failed(exc, 2) or tx.failed(exc, 3):
                raise Gone from exc
            raise
        return "inserted"

    @_guard
    def list_messages(self, chat_id: str, limit: int, cursor_: str | None) -> Page[Message]:
        pk = f"C#{chat_id}"
        results = MessageItem.query(
            pk,
            MessageItem.sk.startswith("M#"),
            limit=limit + 1,
            page_size=limit + 1,
            last_evaluated_key=self._base_key(pk, cursor_, MESSAGE_SK),
        )
        items = list(results)
        page = _page(items, limit, lambda item: item.sk)
        return Page[Message](items=[self._message(item) for item in page.items], cursor=page.cursor)

    # ---------------------------------------------------------------- helpers

    @staticmethod
    def _base_key(pk: str, cursor_: str | None, pattern: re.Pattern[str]) -> dict[str, Any] | None:
        if not cursor_:
            return None
        return {"pk": {"S": pk}, "sk": {"S": cursor.decode(cursor_, pattern)}}

    def _store_body(self, message: Message) -> tuple[str | None, str | None]:
        body = json.dumps(message.parts, separators=(",", ":"), ensure_ascii=False)
        if len(body.encode()) <= self._inline:
            return body, None
        key = f"messages/{message.chat_id}/{message.id}/{secrets.token_hex(8)}.json"
        self._artifacts.put(key, body.encode())
        return None, key

    def _drop_body(self, body_ref: str | None) -> None:
        if body_ref:
            self._artifacts.delete(body_ref)

    def _message(self, item: MessageItem) -> Message:
        body = item.body if item.body is not None else self._artifacts.get(item.body_ref).decode()
        return Message(
            id=item.id,
            chat_id=item.chat_id,
            role=Role(item.role),
            parts=json.loads(body),
            created_at=datetime.fromisoformat(item.created_at),
        )

    def _delete_messages(self, chat_id: str) -> None:
        items = list(MessageItem.query(f"C#{chat_id}", MessageItem.sk.startswith("M#")))
        with MessageItem.batch_write() as batch:
            for item in items:
                batch.delete(item)
                batch.delete(MessageClaimItem(f"MID#{item.id}", "MID"))
        for item in items:
            self._drop_body(item.body_ref)


# -------------------------------------------------------------- mapping helpers


def _set_or_remove(name: str, value: Any) -> Action:
    attribute = getattr(SessionItem, name)
    if value is None:
        return attribute.remove()  # type: ignore[no-any-return]
    if isinstance(value, datetime):
        value = _iso(value)
    elif isinstance(value, StrEnum):
        value = value.value
    return attribute.set(value)  # type: ignore[no-any-return]


T = TypeVar("T")


def _page(items: list[T], limit: int, sort_key: Callable[[T], str]) -> Page[T]:
    """Items were fetched with ``limit + 1``: the extra one only tells that more exist."""
    if len(items) <= limit:
        return Page[T](items=items, cursor=None)
    kept = items[:limit]
    return Page[T](items=kept, cursor=cursor.encode(sort_key(kept[-1])))


def _created_key(session: Session) -> str:
    return f"{_iso(session.created_at)}#{session.id}"


def _event_sk(entry: AuditEntry) -> str:
    return f"E#{_iso(entry.at)}#{entry.id}"


def _first_message_title(chat: Chat, message: Message) -> str | None:
    if message.role is not Role.USER or chat.message_count != 0:
        return None
    parts = message.parts.get("parts")
    texts: Iterable[Any] = parts if isinstance(parts, list) else []
    text = " ".join(
        str(part.get("text", ""))
        for part in texts
        if isinstance(part, dict) and part.get("type") == "text"
    )
    return chat_title_from_text(text)


def _mark_map(mark: ChatMark) -> dict[str, Any]:
    return {
        key: value
        for key, value in {
            "createdAt": _iso(mark.created_at),
            "updatedAt": _iso(mark.updated_at),
            "lastAssistantMessageAt": _iso_or_none(mark.last_assistant_message_at),
            "lastReadAt": _iso_or_none(mark.last_read_at),
        }.items()
        if value is not None
    }


def _plain(raw: Any) -> dict[str, Any]:
    """A raw MapAttribute (or a plain dict) as a plain dict."""
    if isinstance(raw, MapAttribute):
        return dict(raw.as_dict())  # type: ignore[no-untyped-call]
    return dict(raw or {})


def _marks(raw: Any) -> dict[str, ChatMark]:
    data: dict[str, Any] = _plain(raw)
    return {
        chat_id: ChatMark(
            created_at=datetime.fromisoformat(entry["createdAt"]),
            updated_at=datetime.fromisoformat(entry["updatedAt"]),
            last_assistant_message_at=_dt(entry.get("lastAssistantMessageAt")),
            last_read_at=_dt(entry.get("lastReadAt")),
            streaming=bool(entry.get("streaming", False)),
        )
        for chat_id, entry in data.items()
    }


def _session_item(session: Session) -> SessionItem:
    return SessionItem(
        _session_pk(session.id),
        SESSION_SK,
        id=session.id,
        user_id=session.user_id,
        user_status=f"{session.user_id}#{session.status.value}",
        created_key=_created_key(session),
        title=session.title,
        status=session.status.value,
        repo_owner=session.repo_owner,
        repo_name=session.repo_name,
        clone_url=session.clone_url,
        branch=session.branch,
        is_new_branch=session.is_new_branch,
        auto_commit_push_override=session.auto_commit_push_override,
        auto_create_pr_override=session.auto_create_pr_override,
        lifecycle_state=session.lifecycle_state.value if session.lifecycle_state else None,
        lifecycle_version=session.lifecycle_version,
        lifecycle_error=session.lifecycle_error,
        last_activity_at=_iso_or_none(session.last_activity_at),
        hibernate_after=_iso_or_none(session.hibernate_after),
        sandbox_expires_at=_iso_or_none(session.sandbox_expires_at),
        lines_added=session.lines_added,
        lines_removed=session.lines_removed,
        pr_number=session.pr_number,
        pr_status=session.pr_status.value if session.pr_status else None,
        created_at=_iso(session.created_at),
        updated_at=_iso(session.updated_at),
        chats={chat_id: _mark_map(mark) for chat_id, mark in session.chats.items()},
        chat_count=len(session.chats),
        owner_name=session.owner_name,
        owner_email=session.owner_email,
        sandbox=session.sandbox,
        sandbox_generation=session.sandbox_generation,
        cached_diff_at=_iso_or_none(session.cached_diff_at),
        lifecycle_run_id=session.lifecycle_run_id,
        snapshot=session.snapshot,
        turn_active_until=_iso_or_none(session.turn_active_until),
        bundle=session.bundle,
        archive_pending=session.archive_pending,
        pr_key=pr_key(session.repo_owner, session.repo_name, session.pr_number),
    )


def _session(item: SessionItem) -> Session:
    """Full items and list-index projections both map here (absent fields take defaults)."""
    values: dict[str, Any] = {
        "id": item.id,
        "user_id": item.user_id or item.user_status.rsplit("#", 1)[0],
        "title": item.title,
        "status": item.status,
        "repo_owner": item.repo_owner,
        "repo_name": item.repo_name,
        "clone_url": item.clone_url,
        "branch": item.branch,
        "is_new_branch": bool(item.is_new_branch),
        "auto_commit_push_override": item.auto_commit_push_override,
        "auto_create_pr_override": item.auto_create_pr_override,
        "lifecycle_state": item.lifecycle_state,
        "lifecycle_version": int(item.lifecycle_version or 0),
        "lifecycle_error": item.lifecycle_error,
        "last_activity_at": _dt(item.last_activity_at),
        "hibernate_after": _dt(item.hibernate_after),
        "sandbox_expires_at": _dt(item.sandbox_expires_at),
        "lines_added": None if item.lines_added is None else int(item.lines_added),
        "lines_removed": None if item.lines_removed is None else int(item.lines_removed),
        "pr_number": None if item.pr_number is None else int(item.pr_number),
        "pr_status": item.pr_status,
        "created_at": datetime.fromisoformat(item.created_at),
        "updated_at": datetime.fromisoformat(item.updated_at),
        "chats": _marks(item.chats),
        "owner_name": item.owner_name,
        "owner_email": item.owner_email,
        "sandbox": _plain(item.sandbox) if item.sandbox is not None else None,
        "sandbox_generation": int(item.sandbox_generation or 0),
        "cached_diff_at": _dt(item.cached_diff_at),
        "lifecycle_run_id": item.lifecycle_run_id,
        "snapshot": _plain(item.snapshot) if item.snapshot is not None else None,
        "turn_active_until": _dt(item.turn_active_until),
        "bundle": _plain(item.bundle) if item.bundle is not None else None,
        "archive_pending": item.archive_pending,
    }
    return Session.model_validate(values)


def _chat_item(chat: Chat) -> ChatItem:
    return ChatItem(
        _session_pk(chat.session_id),
        _chat_sk(chat.id),
        id=chat.id,
        session_id=chat.session_id,
        title=chat.title,
        model_id=chat.model_id,
        active_stream_id=chat.active_stream_id,
        last_assistant_message_at=_iso_or_none(chat.last_assistant_message_at),
        message_count=chat.message_count,
        created_at=_iso(chat.created_at),
        updated_at=_iso(chat.updated_at),
    )


def _chat(item: ChatItem) -> Chat:
    return Chat(
        id=item.id,
        session_id=item.session_id,
        title=item.title,
        model_id=item.model_id,
        active_stream_id=item.active_stream_id,
        last_assistant_message_at=_dt(item.last_assistant_message_at),
        message_count=int(item.message_count or 0),
        created_at=datetime.fromisoformat(item.created_at),
        updated_at=datetime.fromisoformat(item.updated_at),
    )


def _audit_item(entry: AuditEntry) -> AuditItem:
    return AuditItem(
        _session_pk(entry.session_id),
        _event_sk(entry),
        id=entry.id,
        session_id=entry.session_id,
        at=_iso(entry.at),
        type=entry.type,
        detail=entry.detail,
    )


def _audit(item: AuditItem) -> AuditEntry:
    detail = _plain(item.detail)
    return AuditEntry(
        id=item.id,
        session_id=item.session_id,
        at=datetime.fromisoformat(item.at),
        type=item.type,
        detail=detail,
    )
