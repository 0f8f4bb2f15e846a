"""The run store on DynamoDB: PynamoDB models in the store's table, with their own keys
(``keys``: runs, a session's runs, a chat's run claim, message → run, live runs, stream events).

A run's start is one transaction with the store's items: the user message (its claim and
item), the chat item's ``activeStreamId`` and the session item's chat mark ``streaming`` (what
the lists read); its end clears them with the claim while they still name the run.

The models are bound to the store's own table (``items.Table``, shared with the store it is
built on), whatever else was built before or after.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Protocol

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import TransactWriteError
from pynamodb.models import Model

from openagents.domain.checkpoints import Checkpoint, RevertRecord
from openagents.domain.models import Chat, Message, Page, Role, Session
from openagents.store import cursor as cursors
from openagents.store import dynamodb_storage as storage
from openagents.store import items
from openagents.store.dynamodb_writes import insert_message, message_claim
from openagents.store.items import ChatItem, SessionItem, Table
from openagents.store.keys import (
    LIVE_SHARDS,
    chat_key,
    live_key,
    live_pk,
    message_run_key,
    run_claim_key,
    run_event_key,
    run_events_pk,
    run_key,
    session_key,
    session_runs_pk,
    user_runs_pk,
)
from openagents.store.port import Activity, Gone, MessageIdTaken, UpsertResult
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
from openagents.store.shared import MessageBodies
from openagents.store.storage import chunk_bytes
from openagents.store.transaction import Transaction, conflicted, guard

__all__ = ["DynamoRunStore"]
BATCH_GET = 100
WRITE_RETRIES = 30  # optimistic writes: one writer per run normally, a few at most


class _Item(Model):
    class Meta:
        table_name = "openagents"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)


class RunItem(_Item):
    body = UnicodeAttribute()
    version = NumberAttribute(default=0)
    last_seq = NumberAttribute(attr_name="lastSeq", default=0)
    # the bytes of its event log charged to its user while it runs (given back at its end)
    event_bytes = NumberAttribute(attr_name="eventBytes", null=True)


class SessionRunItem(_Item):
    run_id = UnicodeAttribute(attr_name="runId")


class UserRunItem(_Item):  # a user's runs across sessions (``keys.user_runs_pk``)
    run_id = UnicodeAttribute(attr_name="runId")


class ChatRunClaimItem(_Item):
    active_run_id = UnicodeAttribute(attr_name="activeRunId", null=True)
    last_run_id = UnicodeAttribute(attr_name="lastRunId", null=True)


class MessageRunItem(_Item):
    run_id = UnicodeAttribute(attr_name="runId")


class LiveRunItem(_Item):
    pass


class EventItem(_Item):
    chunk = UnicodeAttribute()
    expires_at = NumberAttribute(attr_name=items.TTL_ATTRIBUTE, null=True)


class Conflicted(Exception):
    """An optimistic write lost to a concurrent one; read again and retry."""


class DynamoUnit(Protocol):
    """What the run store shares with the store it writes a turn's items with: the message
    body codec, and the message writes a step's assistant message goes through (a segment of
    it, or the whole)."""

    @property
    def bodies(self) -> MessageBodies: ...
    @property
    def table(self) -> Table: ...
    @property
    def storage_limit(self) -> int | None: ...
    def put_message(
        self, session: Session, chat: Chat, message: Message, *, activity: Activity | None
    ) -> UpsertResult: ...
    def put_segment(self, session: Session, chat: Chat, message: Message, start: int) -> bool: ...


class DynamoRunStore:
    def __init__(self, store: DynamoUnit) -> None:
        self._store = store
        self._t = store.table  # the store's table: its models bound to it alone
        self._connection = self._t.connection()

    def _transaction(self) -> Transaction:
        return Transaction(self._connection)

    def _item(self, run_id: str) -> RunItem | None:
        try:
            return self._t[RunItem].get(*run_key(run_id), consistent_read=True)
        except RunItem.DoesNotExist:
            return None

    @guard
    def start(self, run: Run, message: TurnMessage | None = None) -> Started:
        return start_with_body(
            self._store.bodies,
            message,
            lambda body, ref, size: self._start(run, message, body, ref, size),
        )

    def _start(
        self,
        run: Run,
        turn: TurnMessage | None,
        body: str | None,
        body_ref: str | None,
        size: int = 0,
    ) -> Started:
        chat = self._t[ChatItem](*chat_key(run.session_id, run.chat_id))
        mark = SessionItem.chats[run.chat_id]
        titled = False
        try:
            with self._transaction() as tx:
                tx.save(
                    self._t[RunItem](*run_key(run.id), body=json.dumps(run_to_json(run))),
                    condition=RunItem.pk.does_not_exist(),
                )
                tx.save(
                    self._t[MessageRunItem](
                        *message_run_key(run.session_id, run.chat_id, run.message_id), run_id=run.id
                    ),
                    condition=MessageRunItem.pk.does_not_exist(),
                    name="message run",
                )
                tx.save(
                    self._t[SessionRunItem](
                        session_runs_pk(run.session_id), started_key(run), run_id=run.id
                    )
                )
                tx.save(
                    self._t[UserRunItem](user_runs_pk(run.user_id), started_key(run), run_id=run.id)
                )
                tx.save(self._t[LiveRunItem](*live_key(run.id)))
                tx.update(
                    self._t[ChatRunClaimItem](*run_claim_key(run.session_id, run.chat_id)),
                    actions=[
                        ChatRunClaimItem.active_run_id.set(run.id),
                        ChatRunClaimItem.last_run_id.set(run.id),
                    ],
                    condition=ChatRunClaimItem.active_run_id.does_not_exist(),
                    name="chat claim",
                )
                tx.update(  # the chat's live-run mark
                    chat,
                    actions=[ChatItem.active_stream_id.set(run.id)],
                    condition=ChatItem.pk.exists(),
                    name="chat",
                )
                tx.update(  # the session's chat mark
                    self._t[SessionItem](*session_key(run.session_id)),
                    actions=[mark["streaming"].set(True)],
                    condition=mark.exists(),
                    name="session",
                )
                if turn is not None:  # its updates of the chat and session join the two above
                    limit = self._store.storage_limit
                    storage.charge(tx, self._t, run.user_id, size, limit)
                    titled = insert_message(
                        tx,
                        self._t,
                        turn.session,
                        turn.chat,
                        turn.message,
                        body,
                        body_ref,
                        turn.activity,
                        size,
                    )
        except TransactWriteError as exc:
            full = storage.refusal(
                tx, exc, self._t, run.user_id, size, self._store.storage_limit or 0
            )
            if full is not None:
                raise full from exc
            return self._refused(exc, tx, run, turn, titled, (body, body_ref, size))
        return Started(run, created=True)

    def _refused(
        self,
        exc: TransactWriteError,
        tx: Transaction,
        run: Run,
        turn: TurnMessage | None,
        titled: bool,
        body: tuple[str | None, str | None, int],
    ) -> Started:
        """Why the start's transaction was refused: the run this message started, a live
        turn, a message id taken, a lost first-message race (retried), or a gone chat."""
        if tx.failed(exc, "message run"):
            try:
                marker = self._t[MessageRunItem].get(
                    *message_run_key(run.session_id, run.chat_id, run.message_id),
                    consistent_read=True,
                )
            except MessageRunItem.DoesNotExist:
                raise exc from None
            existing = self.get(marker.run_id)
            if existing is not None:
                return Started(existing, created=False)
        if tx.failed(exc, "chat claim"):
            active = self.active_run_id(run.session_id, run.chat_id)
            raise TurnInProgress(active or "unknown") from exc
        if turn is not None and tx.failed(exc, "message id"):
            claim = message_claim(self._t, run.user_id, turn.message.id)
            if claim is None or claim.chat_id != run.chat_id or claim.role != Role.USER:
                raise MessageIdTaken from exc
            return self._start(run, None, None, None)  # stored before, without a run
        if turn is not None and titled and tx.failed(exc, "chat"):
            counted = turn.chat.model_copy(update={"message_count": turn.chat.message_count + 1})
            return self._start(run, replace(turn, chat=counted), *body)
        if tx.failed(exc, "chat") or tx.failed(exc, "session"):
            raise Gone from exc
        raise exc

    def _unmark(self, run: Run) -> None:
        """Clear the chat's live-run marks while they still name ``run`` (a deleted chat has
        none to clear)."""
        try:
            with self._transaction() as tx:
                tx.update(
                    self._t[ChatItem](*chat_key(run.session_id, run.chat_id)),
                    actions=[ChatItem.active_stream_id.remove()],
                    condition=ChatItem.active_stream_id == run.id,
                    name="chat",
                )
                tx.update(
                    self._t[SessionItem](*session_key(run.session_id)),
                    actions=[SessionItem.chats[run.chat_id]["streaming"].remove()],
                    condition=SessionItem.chats[run.chat_id].exists(),
                    name="session",
                )
        except TransactWriteError as exc:
            if not (tx.failed(exc, "chat") or tx.failed(exc, "session")):
                raise

    @guard
    def get(self, run_id: str) -> Run | None:
        item = self._item(run_id)
        return _run(item) if item is not None else None

    @guard
    def active_run_id(self, session_id: str, chat_id: str) -> str | None:
        try:
            claim = self._t[ChatRunClaimItem].get(
                *run_claim_key(session_id, chat_id), consistent_read=True
            )
        except ChatRunClaimItem.DoesNotExist:
            return None
        return claim.active_run_id

    @guard
    def latest(self, session_id: str, chat_id: str) -> Run | None:
        try:
            claim = self._t[ChatRunClaimItem].get(
                *run_claim_key(session_id, chat_id), consistent_read=True
            )
        except ChatRunClaimItem.DoesNotExist:
            return None
        return self.get(claim.last_run_id) if claim.last_run_id else None

    @guard
    def list_for_session(self, session_id: str, limit: int, cursor: str | None) -> Page[Run]:
        start = cursors.decode(cursor, STARTED_KEY) if cursor else None
        found = list(
            self._t[SessionRunItem].query(
                session_runs_pk(session_id),
                SessionRunItem.sk < start if start else None,
                scan_index_forward=False,
                limit=limit + 1,
            )
        )
        page = found[:limit]
        keys = [run_key(item.run_id) for item in page]
        by_id = {item.pk: _run(item) for item in self._t[RunItem].batch_get(keys)} if keys else {}
        runs = [by_id[run_key(item.run_id)[0]] for item in page if run_key(item.run_id)[0] in by_id]
        more = len(found) > limit
        return Page[Run](items=runs, cursor=cursors.encode(page[-1].sk) if more else None)

    @guard
    def list_for_user(self, user_id: str, start: datetime, end: datetime, limit: int) -> list[Run]:
        found = list(
            self._t[UserRunItem].query(
                user_runs_pk(user_id),
                UserRunItem.sk.between(started_bound(start), started_bound(end)),
                limit=limit,
            )
        )
        runs: dict[str, Run] = {}
        for chunk in range(0, len(found), BATCH_GET):  # BatchGetItem takes 100 keys
            keys = [run_key(item.run_id) for item in found[chunk : chunk + BATCH_GET]]
            runs.update((item.pk, _run(item)) for item in self._t[RunItem].batch_get(keys))
        ordered = (runs.get(run_key(item.run_id)[0]) for item in found)
        return [run for run in ordered if run is not None]

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
        for attempt in range(WRITE_RETRIES):
            item = self._item(run_id)
            if item is None:
                raise RunNotFound(run_id)
            if message is not None:  # the message first, as the loop wrote it before
                self._put(message)
                message = None  # written: a retry numbers the events only
            first = int(item.last_seq or 0)
            last = first + len(chunks)
            texts, logged = chunk_bytes(chunks)
            actions = [RunItem.last_seq.set(last), RunItem.version.add(1)]
            if logged:
                actions.append(RunItem.event_bytes.add(logged))
            current = _run(item)
            if progress is not None and not current.status.ended:
                data = run_to_json(current.progressed(progress))
                data["lastSeq"] = last
                actions.append(RunItem.body.set(json.dumps(data)))
            limit = self._store.storage_limit if bounded else None
            try:
                with self._transaction() as tx:
                    storage.charge(tx, self._t, current.user_id, logged, limit)
                    tx.update(
                        self._t[RunItem](*run_key(run_id)),
                        actions=actions,
                        condition=RunItem.version == int(item.version or 0),
                        name="run",
                    )
                    for offset, text in enumerate(texts, start=1):
                        tx.save(
                            self._t[EventItem](*run_event_key(run_id, first + offset), chunk=text),
                            condition=EventItem.pk.does_not_exist(),
                        )
            except TransactWriteError as exc:
                full = storage.refusal(tx, exc, self._t, current.user_id, logged, limit or 0)
                if full is not None:
                    raise full from exc
                if tx.failed(exc, "run") or conflicted(exc):
                    # full jitter, growing: two losers must not collide again and again
                    time.sleep(random.uniform(0, min(0.2, 0.005 * 2**attempt)))  # noqa: S311
                    continue  # another append won: number after it
                raise
            return last
        raise Conflicted(run_id)

    def _put(self, turn: TurnMessage) -> None:
        """The step's message: its segment when one stands for the change, else whole."""
        session, chat, message = turn.session, turn.chat, turn.message
        if turn.kept_parts and self._store.put_segment(session, chat, message, turn.kept_parts):
            return
        self._store.put_message(session, chat, message, activity=turn.activity)

    @guard
    def events(self, run_id: str, after: int, limit: int = 1000) -> list[StreamEvent]:
        now = time.time()
        found = self._t[EventItem].query(
            run_events_pk(run_id),
            EventItem.sk > run_event_key(run_id, after)[1],
            consistent_read=True,
            limit=limit,
        )
        return [
            StreamEvent(int(item.sk), json.loads(item.chunk))
            for item in found
            if item.expires_at is None or item.expires_at > now  # TTL deletes lag
        ]

    def _rewrite(self, run_id: str, change: Callable[[Run], Run | None]) -> Run | None:
        """Read, change and write the run back unless a concurrent write came first (retry)."""
        for _ in range(WRITE_RETRIES):
            item = self._item(run_id)
            if item is None:
                return None
            current = _run(item)
            changed = change(current)
            if changed is None:
                return current
            data = run_to_json(changed)
            data["lastSeq"] = int(item.last_seq or 0)
            try:
                item.update(
                    actions=[RunItem.body.set(json.dumps(data)), RunItem.version.add(1)],
                    condition=RunItem.version == int(item.version or 0),
                )
            except Exception as exc:
                if "ConditionalCheckFailed" in str(exc):
                    continue
                raise
            return run_from_json(data)
        raise Conflicted(run_id)

    @guard
    def request_cancel(self, run_id: str) -> bool:
        run = self._rewrite(
            run_id,
            lambda run: None if run.status.ended else _with(run, cancel_requested=True),
        )
        return run is not None and not run.status.ended

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
        before = self.get(run_id)
        if before is None:
            raise RunNotFound(run_id)
        if before.status.ended:
            return before
        run = self._rewrite(
            run_id,
            lambda run: (
                None
                if run.status.ended
                else _with(run, status=status, error=error, cost_usd=cost_usd, finished_at=at)
            ),
        )
        if run is None:
            raise RunNotFound(run_id)
        try:
            self._t[ChatRunClaimItem](*run_claim_key(run.session_id, run.chat_id)).update(
                actions=[ChatRunClaimItem.active_run_id.remove()],
                condition=ChatRunClaimItem.active_run_id == run_id,
            )
        except Exception as exc:
            if "ConditionalCheckFailed" not in str(exc):
                raise
        self._unmark(run)
        self._give_back(run)
        self._t[LiveRunItem](*live_key(run_id)).delete()
        expires = int((at + retention).timestamp())
        events = list(self._t[EventItem].query(run_events_pk(run_id), consistent_read=True))
        with self._t[EventItem].batch_write() as batch:
            for event in events:
                event.expires_at = expires
                batch.save(event)
        return run

    def _give_back(self, run: Run) -> None:
        """An ended run's event log counts no more: its ``eventBytes`` go back to its user,
        once (removed from the run in the same transaction, on the condition it is there)."""
        for _ in range(WRITE_RETRIES):
            item = self._item(run.id)
            logged = int(item.event_bytes or 0) if item is not None else 0
            if not logged:
                return  # nothing logged, or given back already (a finish repeated)
            try:
                with self._transaction() as tx:
                    tx.update(
                        self._t[RunItem](*run_key(run.id)),
                        actions=[RunItem.event_bytes.remove()],
                        condition=RunItem.event_bytes == logged,
                        name="run",
                    )
                    storage.charge(tx, self._t, run.user_id, -logged, None)
            except TransactWriteError as exc:
                if not tx.failed(exc, "run"):
                    raise
                continue  # an append or another finish came between: read again
            return

    @guard
    def running(self) -> list[Run]:
        ids = [
            item.sk
            for shard in range(LIVE_SHARDS)
            for item in self._t[LiveRunItem].query(live_pk(shard), consistent_read=True)
        ]
        keys = [run_key(run_id) for run_id in ids]
        runs = [_run(item) for item in self._t[RunItem].batch_get(keys)] if keys else []
        return [run for run in runs if run.status is RunStatus.RUNNING]

    @guard
    def record_checkpoint(self, run_id: str, checkpoint: Checkpoint) -> Run | None:
        return self._rewrite(run_id, lambda run: with_checkpoint(run, checkpoint))

    @guard
    def mark_reverted(self, run_id: str, revert: RevertRecord | None = None) -> Run | None:
        return self._rewrite(run_id, lambda run: as_reverted(run, revert))

    def expires_at(self, run_id: str) -> list[float | None]:
        """The events' expiry times (tests)."""
        return [
            float(item.expires_at) if item.expires_at is not None else None
            for item in self._t[EventItem].query(run_events_pk(run_id), consistent_read=True)
        ]


def _marker(run: Run) -> tuple[str, str]:
    return message_run_key(run.session_id, run.chat_id, run.message_id)


def _run(item: RunItem) -> Run:
    data = json.loads(item.body)
    data["lastSeq"] = int(item.last_seq or 0)
    return run_from_json(data)


def _with(run: Run, **changes: object) -> Run:
    return replace(run, **changes)  # type: ignore[arg-type]
