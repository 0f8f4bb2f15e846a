"""The store on DynamoDB through PynamoDB (AWS, and moto's server on one machine).

Every access pattern is one request: GetItem, one Query, or one TransactWriteItems.

Events outbox: every write that records an audit entry also puts that entry's domain event
(``OutboxItem``, sort key ``O#…``) in the same TransactWriteItems, so an event exists exactly
when the change it reports committed; the table's stream and an EventBridge pipe publish it
(``infra/constructs/outbox.py``, docs/events.md). The event names the session's owner: the store
remembers the owner of every session it read or wrote (a session's owner never changes), and
reads it (one GetItem of ``userId``) only for a session it has not seen in this process.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from pynamodb.exceptions import DeleteError, PutError, TransactWriteError, UpdateError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action

from openagents.artifacts import ArtifactStore
from openagents.domain.errors import Unavailable
from openagents.domain.lifecycle import DUE_SHARDS, LifecycleFields
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
from openagents.store import dynamodb_storage as storage
from openagents.store.dynamodb_writes import insert_message, message_claim
from openagents.store.items import (
    AuditItem,
    ChatClaimItem,
    ChatItem,
    CounterItem,
    DeliveryItem,
    MessageClaimItem,
    MessageItem,
    OutboxItem,
    ProfileItem,
    SegmentItem,
    SessionItem,
    ShareItem,
    Table,
    TitleItem,
    TombstoneItem,
)
from openagents.store.keys import (
    CHAT_PREFIX,
    CREATED_KEY,
    EVENT_PREFIX,
    EVENT_SK,
    MESSAGE_PREFIX,
    MESSAGE_SK,
    PURGE_PK,
    TITLE_PREFIX,
    chat_claim_key,
    chat_key,
    chat_tombstone_key,
    created_key,
    delivery_key,
    event_sk,
    is_session_tombstone,
    message_claim_key,
    message_key,
    messages_pk,
    profile_key,
    rate_key,
    segment_sk,
    segments_prefix,
    session_id_of,
    session_key,
    session_pk,
    session_tombstone_key,
    share_key,
    title_key,
    title_of,
    user_pk,
)
from openagents.store.mapping import (
    audit_item,
    chat_item,
    outbox_item,
    session_item,
    set_or_remove,
    to_audit,
    to_chat,
    to_session,
)
from openagents.store.port import (
    Activity,
    ChatIdTaken,
    Gone,
    LastChat,
    MessageIdTaken,
    NoSuchMessage,
    RateWindow,
    RepositoryAlreadySet,
    StaleState,
    TitleTaken,
    TooManyChats,
    UpsertResult,
    UserRecord,
    check_lifecycle_fields,
)
from openagents.store.previews_dynamodb import DynamoPreviews
from openagents.store.shared import (
    MessageBodies,
    Segment,
    chat_edit,
    chat_mark,
    deletion_target,
    iso,
    mark_map,
    page_of,
    status_change,
)
from openagents.store.transaction import CONFLICT_RETRIES, Transaction, conflicted, guard

__all__ = ["DynamoStore"]

log = logging.getLogger(__name__)
RATE_ATTEMPTS = 64  # concurrent creates of one user: each lost try means another one won
OWNERS_KEPT = 10_000  # session id -> owner entries remembered (then forgotten all at once)


def _automatic(source: Any) -> Condition:
    """``shared.title_is_automatic`` as a condition on a stored title source."""
    condition: Condition = source.does_not_exist() | (source == TitleSource.AUTO.value)
    return condition


def _applied(write: Callable[[], object]) -> bool:
    """Run a conditional write; False when its condition failed (nothing was written)."""
    try:
        write()
    except (PutError, UpdateError) as exc:
        if exc.cause_response_code == "ConditionalCheckFailedException":
            return False
        raise
    return True


class DynamoStore(DynamoPreviews):
    """``Store`` on one DynamoDB table (``items.Table``: the models bound to it)."""

    def __init__(
        self,
        artifacts: ArtifactStore,
        inline_message_bytes: int,
        table: Table | None = None,
        max_user_bytes: int | None = None,
    ) -> None:
        """``table``: the table this store works on (its models bound to it alone); None: the
        one ``items.bind`` named when the store is built. ``max_user_bytes``: a user's stored
        bytes (``store/storage.py``; None: unbounded)."""
        self.bodies = MessageBodies(artifacts, inline_message_bytes)
        self.storage_limit = max_user_bytes
        self.table = table or Table.of_process()
        self._t = self.table
        self._connection = self.table.connection()  # one (a new one reloads botocore's models)
        self._owners: dict[str, str] = {}

    def _seen(self, session: Session) -> Session:
        """Remember the session's owner (for the events of writes that name only its id)."""
        if len(self._owners) >= OWNERS_KEPT:
            self._owners.clear()
        self._owners[session.id] = session.user_id
        return session

    def _owner(self, session_id: str) -> str:
        """The owner of a session: remembered, else one GetItem of ``userId`` ("" if gone)."""
        known = self._owners.get(session_id)
        if known is not None:
            return known
        try:
            item = self._t[SessionItem].get(*session_key(session_id), attributes_to_get=["userId"])
        except SessionItem.DoesNotExist:
            return ""
        self._owners[session_id] = item.user_id
        return item.user_id

    def _transaction(self) -> Transaction:
        return Transaction(self._connection)

    # ------------------------------------------------------------------ users

    @guard
    def get_user(self, user_id: str) -> UserRecord:
        try:
            item = self._t[ProfileItem].get(*profile_key(user_id))
        except ProfileItem.DoesNotExist:
            return UserRecord(preferences=Preferences(), archived_count=0)
        prefs = Preferences(
            default_model_id=item.default_model_id,
            auto_commit_push=bool(item.auto_commit_push),
            auto_create_pr=bool(item.auto_create_pr),
        )
        return UserRecord(preferences=prefs, archived_count=int(item.archived_count or 0))

    @guard
    def storage_used(self, user_id: str) -> int:
        return storage.used(self._t, user_id)

    @guard
    def charge_storage(self, user_id: str, delta: int) -> None:
        limit = self.storage_limit
        try:
            with self._transaction() as tx:
                storage.charge(tx, self._t, user_id, delta, limit)
        except TransactWriteError as exc:
            full = storage.refusal(tx, exc, self._t, user_id, delta, limit or 0)
            if full is not None:
                raise full from exc
            raise

    def _counted(self, session_id: str, chat_ids: Iterable[str]) -> int:
        """The bytes the chats' messages were counted at (their ``bytes``, read consistently)."""
        return sum(
            int(item.size or 0)
            for chat_id in chat_ids
            for item in self._t[MessageItem].query(
                messages_pk(session_id, chat_id),
                MessageItem.sk.startswith(MESSAGE_PREFIX),
                consistent_read=True,
                attributes_to_get=["pk", "sk", "bytes"],
            )
        )

    @guard
    def put_preferences(self, user_id: str, preferences: Preferences) -> None:
        item = self._t[ProfileItem](*profile_key(user_id))
        item.update(
            actions=[
                ProfileItem.default_model_id.set(preferences.default_model_id)
                if preferences.default_model_id
                else ProfileItem.default_model_id.remove(),
                ProfileItem.auto_commit_push.set(preferences.auto_commit_push),
                ProfileItem.auto_create_pr.set(preferences.auto_create_pr),
            ]
        )

    @guard
    def used_titles(self, user_id: str) -> set[str]:
        items = self._t[TitleItem].query(
            user_pk(user_id),
            TitleItem.sk.startswith(TITLE_PREFIX),
            filter_condition=TitleItem.session_ids.exists(),
        )
        return {title_of(item.sk) for item in items}

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
        for _ in range(RATE_ATTEMPTS):
            if self._create_once(session, chat, entry, claim_title=claim_title, rate=rate):
                self._seen(session)
                return
        raise Unavailable("The rate window kept changing; try again")

    def _create_once(
        self,
        session: Session,
        chat: Chat,
        entry: AuditEntry,
        *,
        claim_title: bool,
        rate: RateWindow,
    ) -> bool:
        """One try; False when a concurrent create moved the rate window first (read again).
        The window is read, decided (``RateWindow.admit``) and written back conditioned on
        the version read, inside the create's transaction."""
        title = self._t[TitleItem](*title_key(session.user_id, session.title))
        key = rate_key(session.user_id, rate.action)
        try:
            window = self._t[CounterItem].get(*key, consistent_read=True)
            version, stamps = int(window.hits), [int(s) for s in window.stamps or ()]
        except CounterItem.DoesNotExist:
            version, stamps = 0, []
        recent = rate.admit(stamps)
        counter = self._t[CounterItem](*key)
        try:
            with self._transaction() as tx:
                tx.save(
                    session_item(session, self._t[SessionItem]),
                    condition=SessionItem.pk.does_not_exist(),
                )
                tx.save(chat_item(chat, self._t[ChatItem]), condition=ChatItem.pk.does_not_exist())
                tx.save(
                    self._t[ChatClaimItem](
                        *chat_claim_key(session.user_id, chat.id), session_id=session.id
                    ),
                    condition=ChatClaimItem.pk.does_not_exist(),
                )
                tx.save(audit_item(entry, self._t[AuditItem]))
                tx.update(
                    title,
                    actions=[TitleItem.session_ids.add({session.id})],
                    condition=TitleItem.session_ids.does_not_exist() if claim_title else None,
                    name="title",
                )
                tx.update(
                    counter,
                    actions=[
                        CounterItem.hits.set(version + 1),
                        CounterItem.stamps.set([*recent, rate.at_ms]),
                        CounterItem.expires_at.set(int(rate.at.timestamp()) + rate.seconds + 60),
                    ],
                    condition=CounterItem.hits == version
                    if version
                    else CounterItem.hits.does_not_exist(),
                    name="rate window",
                )
                tx.save(outbox_item(entry, session.user_id, self._t[OutboxItem]))
        except TransactWriteError as exc:
            if tx.failed(exc, "rate window"):
                return False  # another create moved the window first
            if tx.failed(exc, "title"):
                raise TitleTaken from exc
            raise
        return True

    @guard
    def get_session(self, session_id: str) -> Session | None:
        try:
            return self._seen(to_session(self._t[SessionItem].get(*session_key(session_id))))
        except SessionItem.DoesNotExist:
            return None

    @guard
    def list_sessions(
        self, user_id: str, which: ListFilter, limit: int, cursor_: str | None
    ) -> Page[Session]:
        start = cursor.decode(cursor_, CREATED_KEY) if cursor_ else None
        if which is ListFilter.ALL:
            partition, index_key = user_id, "userId"
            index: Any = self._t[SessionItem].by_user
        else:
            status = (
                SessionStatus.ARCHIVED if which is ListFilter.ARCHIVED else SessionStatus.RUNNING
            )
            partition, index_key = f"{user_id}#{status.value}", "userStatus"
            index = self._t[SessionItem].by_user_status
        last_key = None
        if start is not None:
            pk, sk = session_key(start.split("#", 1)[1])
            last_key = {
                "pk": {"S": pk},
                "sk": {"S": sk},
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
        found = [self._seen(to_session(item)) for item in results]
        return page_of(found, limit, lambda s: created_key(s))

    @guard
    def rename_session(self, session: Session, title: str, entry: AuditEntry) -> Session:
        if not self._rename(session, title, entry, TitleSource.USER):
            raise Gone
        return session.model_copy(
            update={"title": title, "title_source": TitleSource.USER, "updated_at": entry.at}
        )

    @guard
    def set_ask_before_bash(self, session: Session, ask: bool, entry: AuditEntry) -> Session:
        try:
            with self._transaction() as tx:
                tx.update(
                    self._t[SessionItem](*session_key(session.id)),
                    actions=[
                        SessionItem.ask_before_bash.set(ask),
                        SessionItem.updated_at.set(iso(entry.at)),
                    ],
                    condition=SessionItem.pk.exists(),
                    name="session",
                )
                tx.save(audit_item(entry, self._t[AuditItem]))
                tx.save(outbox_item(entry, session.user_id, self._t[OutboxItem]))
        except TransactWriteError as exc:
            if tx.failed(exc, "session"):
                raise Gone from exc
            raise
        updated = self.get_session(session.id)
        if updated is None:
            raise Gone
        return updated

    @guard
    def set_repository(
        self, session: Session, repo: Repo, branch: str, is_new_branch: bool, entry: AuditEntry
    ) -> Session:
        fields = (
            (SessionItem.repo_owner, repo.owner),
            (SessionItem.repo_name, repo.name),
            (SessionItem.clone_url, repo.clone_url),
        )
        actions: list[Action] = [
            attribute.set(value) if value is not None else attribute.remove()
            for attribute, value in fields
        ]
        actions += [
            SessionItem.own_branch.set(branch),
            SessionItem.branch.set(branch),
            SessionItem.is_new_branch.set(is_new_branch),
            SessionItem.updated_at.set(iso(entry.at)),
        ]
        unset = (
            SessionItem.pk.exists()
            & SessionItem.clone_url.does_not_exist()
            & SessionItem.repo_owner.does_not_exist()
            & SessionItem.repo_name.does_not_exist()
        )
        try:
            with self._transaction() as tx:
                tx.update(
                    self._t[SessionItem](*session_key(session.id)),
                    actions=actions,
                    condition=unset,
                    name="session",
                )
                tx.save(audit_item(entry, self._t[AuditItem]))
                tx.save(outbox_item(entry, session.user_id, self._t[OutboxItem]))
        except TransactWriteError as exc:
            if tx.failed(exc, "session"):
                if self.get_session(session.id) is None:
                    raise Gone from exc
                raise RepositoryAlreadySet from exc
            raise
        updated = self.get_session(session.id)
        if updated is None:
            raise Gone
        return updated

    @guard
    def title_session(self, session: Session, title: str, entry: AuditEntry) -> bool:
        return self._rename(session, title, entry, TitleSource.GENERATED)

    def _rename(self, session: Session, title: str, entry: AuditEntry, source: TitleSource) -> bool:
        """The title, its source and the title registry in one transaction; a generated title
        only while the stored one is still the automatic ``session.title``. False when the
        session is gone (or, generated, its title changed)."""
        now = iso(entry.at)
        condition = SessionItem.pk.exists()
        if source is TitleSource.GENERATED:  # shared.generated_title_applies, as a condition
            condition &= _automatic(SessionItem.title_source) & (SessionItem.title == session.title)
        try:
            with self._transaction() as tx:
                tx.update(
                    self._t[SessionItem](*session_key(session.id)),
                    actions=[
                        SessionItem.title.set(title),
                        SessionItem.title_source.set(source.value),
                        SessionItem.updated_at.set(now),
                    ],
                    condition=condition,
                    name="session",
                )
                tx.update(
                    self._t[TitleItem](*title_key(session.user_id, session.title)),
                    actions=[TitleItem.session_ids.delete({session.id})],
                )
                tx.update(
                    self._t[TitleItem](*title_key(session.user_id, title)),
                    actions=[TitleItem.session_ids.add({session.id})],
                )
                tx.save(audit_item(entry, self._t[AuditItem]))
                tx.save(outbox_item(entry, session.user_id, self._t[OutboxItem]))
        except TransactWriteError as exc:
            if tx.failed(exc, "session"):
                return False
            raise
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
        """Archive or unarchive: status, lifecycle fields and ``archivedCount`` in one
        transaction, conditional on the status the caller read."""
        change = status_change(session, status, lifecycle_state, entry.at, changes)
        extra = {
            name: value
            for name, value in change.update.items()
            if name not in ("status", "lifecycle_state", "updated_at")
        }
        try:
            with self._transaction() as tx:
                tx.update(
                    self._t[SessionItem](*session_key(session.id)),
                    actions=[
                        SessionItem.status.set(status.value),
                        SessionItem.user_status.set(f"{session.user_id}#{status.value}"),
                        SessionItem.lifecycle_state.set(lifecycle_state.value)
                        if lifecycle_state
                        else SessionItem.lifecycle_state.remove(),
                        SessionItem.updated_at.set(iso(entry.at)),
                        *(set_or_remove(name, value) for name, value in extra.items()),
                    ],
                    condition=SessionItem.status == session.status.value,
                    name="session",
                )
                if change.archived_delta:
                    tx.update(
                        self._t[ProfileItem](*profile_key(session.user_id)),
                        actions=[ProfileItem.archived_count.add(change.archived_delta)],
                    )
                tx.save(audit_item(entry, self._t[AuditItem]))
                tx.save(outbox_item(entry, session.user_id, self._t[OutboxItem]))
        except TransactWriteError as exc:
            if tx.failed(exc, "session"):  # the status changed (or the session went) meanwhile
                raise StaleState from exc
            raise
        # no re-read: a committed archive must not turn into an error (and a lost event)
        return change.applied(session)

    @guard
    def sessions_for_pr(self, owner: str, name: str, number: int) -> list[Session]:
        """Every session of pull request ``number`` of ``owner/name`` (case-insensitive)."""
        key = pr_key(owner, name, number)
        if key is None:
            return []
        return [self._seen(to_session(item)) for item in self._t[SessionItem].by_pr.query(key)]

    @guard
    def delete_session(self, session: Session) -> None:
        """Remove the session at once, with a tombstone, in one transaction; then its children
        (``purge_deleted``: here at once, best effort, and by the reconciler for whatever a
        failure left)."""
        tombstone = self._t[TombstoneItem](
            *session_tombstone_key(session.id),
            session_id=session.id,
            user_id=session.user_id,
            chat_ids=set(session.chats) or None,
        )
        freed = self._counted(session.id, session.chats)
        try:
            with self._transaction() as tx:
                storage.charge(tx, self._t, session.user_id, -freed, None)
                tx.delete(
                    self._t[SessionItem](*session_key(session.id)),
                    condition=SessionItem.pk.exists(),
                    name="session",
                )
                tx.save(tombstone)
                tx.update(
                    self._t[TitleItem](*title_key(session.user_id, session.title)),
                    actions=[TitleItem.session_ids.delete({session.id})],
                )
                if session.status is SessionStatus.ARCHIVED:
                    tx.update(
                        self._t[ProfileItem](*profile_key(session.user_id)),
                        actions=[ProfileItem.archived_count.add(-1)],
                    )
        except TransactWriteError as exc:
            if tx.failed(exc, "session"):
                raise Gone from exc
            raise
        self._purge_now(tombstone)

    @guard
    def purge_deleted(self, limit: int = 25) -> int:
        """Finish up to ``limit`` deletes. A tombstone without ``userId`` was written before ids
        per user: its children are under the old keys, so it waits for the table's migration
        (``store/dynamodb_migrate.py``), which gives it one."""
        done = 0
        for tombstone in self._t[TombstoneItem].query(
            PURGE_PK, consistent_read=True, page_size=limit
        ):
            if done == limit:
                break
            if tombstone.user_id is None:
                continue
            self._purge(tombstone)
            done += 1
        return done

    def _purge_now(self, tombstone: TombstoneItem) -> None:
        """The delete is committed; a failure here leaves the tombstone for the reconciler."""
        try:
            self._purge(tombstone)
        except Exception as exc:
            log.warning("children of %s left for the reconciler: %s", tombstone.sk, exc)

    def _purge(self, tombstone: TombstoneItem) -> None:
        """Remove what the tombstone's delete left, then the tombstone (idempotent). Chat id
        claims go last, so an id is free only once nothing of its old chat remains."""
        session_id, user_id = tombstone.session_id, tombstone.user_id or ""
        if is_session_tombstone(tombstone.sk):
            pk = session_pk(session_id)
            items = list(self._t[ChatItem].query(pk, ChatItem.sk.startswith(CHAT_PREFIX)))
            chats = set(tombstone.chat_ids or ()) | {c.id for c in items}
            for chat_id in sorted(chats):
                self._delete_messages(user_id, session_id, chat_id)
            with self._t[ShareItem].batch_write() as shares:  # the chats' public links are revoked
                for chat in items:
                    if chat.share_id:
                        shares.delete(self._t[ShareItem](*share_key(chat.share_id)))
            with self._t[SessionItem].batch_write() as batch:
                for item in self._t[SessionItem].query(pk, attributes_to_get=["pk", "sk"]):
                    batch.delete(item)
        else:
            chats = set(tombstone.chat_ids or ())
            for chat_id in chats:
                self._delete_messages(user_id, session_id, chat_id)
        for chat_id in sorted(chats):
            self._release_chat_id(user_id, chat_id, session_id)
        tombstone.delete()

    def _release_chat_id(self, user_id: str, chat_id: str, session_id: str) -> None:
        """Free a chat id, unless another session holds it (it was free and claimed again)."""
        try:
            self._t[ChatClaimItem](*chat_claim_key(user_id, chat_id)).delete(
                condition=ChatClaimItem.session_id == session_id
            )
        except DeleteError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise

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
        actions: list[Action] = [SessionItem.updated_at.set(iso(datetime.now(UTC)))]
        actions += [set_or_remove(name, value) for name, value in changes.items()]
        if bump_version:
            actions.append(SessionItem.lifecycle_version.add(1))
        condition = SessionItem.lifecycle_state.is_in(*(state.value for state in expect))
        if generation is not None:
            condition &= SessionItem.sandbox_generation == generation
        if lease is not None:
            condition &= SessionItem.lifecycle_run_id == lease
        item = self._t[SessionItem](*session_key(session_id))
        owner = self._owner(session_id) if entry is not None else ""
        try:
            with self._transaction() as tx:
                tx.update(item, actions=actions, condition=condition, name="session")
                if entry is not None:
                    tx.save(audit_item(entry, self._t[AuditItem]))
                    tx.save(outbox_item(entry, owner, self._t[OutboxItem]))
        except TransactWriteError as exc:
            if tx.failed(exc, "session"):
                raise StaleState from exc
            raise
        updated = self.get_session(session_id)
        if updated is None:
            raise Gone
        return updated

    @guard
    def claim_generation(self, session_id: str, generation: int) -> bool:
        """Claim sandbox ``generation`` for a start; False if it is already claimed (a retry)."""
        item = self._t[SessionItem](*session_key(session_id))
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

    @guard
    def claim_lease(
        self,
        session_id: str,
        run_id: str,
        stale_due_before: datetime,
        *,
        replace_active: bool = False,
    ) -> bool:
        """Take the lifecycle lease: free, already ours, or held by a run that is long overdue —
        or, with ``replace_active``, any lease of an *active* session (a newer run replaces a
        waiting one). A hibernating session's lease is never taken from a live run."""
        state = SessionItem.lifecycle_state
        takeable = (
            SessionItem.lifecycle_run_id.does_not_exist()
            | (SessionItem.lifecycle_run_id == run_id)
            | (SessionItem.due_at < iso(stale_due_before))
        )
        if replace_active:
            takeable |= state == LifecycleState.ACTIVE.value
        running = state.is_in(LifecycleState.ACTIVE.value, LifecycleState.HIBERNATING.value)
        return _applied(
            lambda: self._t[SessionItem](*session_key(session_id)).update(
                actions=[SessionItem.lifecycle_run_id.set(run_id)],
                condition=running & takeable,
            )
        )

    @guard
    def release_lease(self, session_id: str, run_id: str) -> None:
        with contextlib.suppress(UpdateError):  # not ours any more: nothing to release
            self._t[SessionItem](*session_key(session_id)).update(
                actions=[SessionItem.lifecycle_run_id.remove()],
                condition=SessionItem.lifecycle_run_id == run_id,
            )

    @guard
    def overdue(self, now: datetime) -> list[str]:
        """Sessions whose sandbox is past due, from every shard of the sparse index."""
        found: list[str] = []
        for shard in range(DUE_SHARDS):
            for item in self._t[SessionItem].overdue.query(
                f"due#{shard}", SessionItem.due_at <= iso(now)
            ):
                found.append(session_id_of(item.pk))
        return found

    @guard
    def hibernated_before(self, moment: datetime) -> list[str]:
        """Sessions hibernated before ``moment``, from every shard of the sparse idle index."""
        found: list[str] = []
        for shard in range(DUE_SHARDS):
            query = self._t[SessionItem].idle.query(
                f"idle#{shard}", SessionItem.hibernated_at < iso(moment)
            )
            found.extend(session_id_of(item.pk) for item in query)
        return found

    @guard
    def append_entry(self, entry: AuditEntry) -> bool:
        """An audit entry that records an outcome, not a state change (and its event: one
        TransactWriteItems of the two, refused when the entry is already there)."""
        owner = self._owner(entry.session_id)
        try:
            with self._transaction() as tx:
                tx.save(
                    audit_item(entry, self._t[AuditItem]),
                    condition=AuditItem.pk.does_not_exist(),
                    name="entry",
                )
                tx.save(outbox_item(entry, owner, self._t[OutboxItem]))
        except TransactWriteError as exc:
            if tx.failed(exc, "entry"):
                return False  # the same entry again: recorded once
            raise
        return True

    @guard
    def list_events(self, session_id: str, limit: int, cursor_: str | None) -> Page[AuditEntry]:
        pk = session_pk(session_id)
        last_key = self._base_key(pk, cursor_, EVENT_SK)
        results = self._t[AuditItem].query(
            pk,
            AuditItem.sk.startswith(EVENT_PREFIX),
            limit=limit + 1,
            page_size=limit + 1,
            last_evaluated_key=last_key,
        )
        return page_of([to_audit(item) for item in results], limit, event_sk)

    # ------------------------------------------------------------------ chats

    @guard
    def get_chat(self, session_id: str, chat_id: str) -> Chat | None:
        try:
            return to_chat(self._t[ChatItem].get(*chat_key(session_id, chat_id)))
        except ChatItem.DoesNotExist:
            return None

    @guard
    def chat_session(self, user_id: str, chat_id: str) -> str | None:
        try:
            return str(self._t[ChatClaimItem].get(*chat_claim_key(user_id, chat_id)).session_id)
        except ChatClaimItem.DoesNotExist:
            return None

    @guard
    def list_chats(self, session_id: str) -> list[Chat]:
        items = self._t[ChatItem].query(session_pk(session_id), ChatItem.sk.startswith(CHAT_PREFIX))
        return sorted((to_chat(item) for item in items), key=lambda c: (c.created_at, c.id))

    @guard
    def create_chat(self, session: Session, chat: Chat, max_chats: int) -> None:
        self._create_chat(session, chat, max_chats, chat_mark(chat))

    def _create_chat(
        self, session: Session, chat: Chat, max_chats: int, mark: ChatMark, size: int = 0
    ) -> None:
        claim_key = chat_claim_key(session.user_id, chat.id)
        try:
            with self._transaction() as tx:
                storage.charge(tx, self._t, session.user_id, size, self.storage_limit)
                tx.save(
                    self._t[ChatClaimItem](*claim_key, session_id=session.id),
                    condition=ChatClaimItem.pk.does_not_exist(),
                    name="chat id",
                )
                tx.save(chat_item(chat, self._t[ChatItem]), condition=ChatItem.pk.does_not_exist())
                tx.update(
                    self._t[SessionItem](*session_key(session.id)),
                    actions=[
                        SessionItem.chats[chat.id].set(mark_map(mark)),
                        SessionItem.chat_count.add(1),
                    ],
                    condition=SessionItem.pk.exists() & (SessionItem.chat_count < max_chats),
                    name="session",
                )
        except TransactWriteError as exc:
            full = storage.refusal(tx, exc, self._t, session.user_id, size, self.storage_limit or 0)
            if full is not None:
                raise full from exc
            if tx.failed(exc, "chat id"):
                claim = self._t[ChatClaimItem].get(*claim_key)
                raise ChatIdTaken(claim.session_id) from exc
            if tx.failed(exc, "session"):
                if self.get_session(session.id) is None:
                    raise Gone from exc
                raise TooManyChats from exc
            raise

    @guard
    def fork_chat(
        self, session: Session, chat: Chat, messages: list[Message], max_chats: int
    ) -> None:
        """The copies first (batched, under the new chat's partition, unreachable until the
        chat exists), then the chat in one transaction; a refused chat takes its copies back."""
        written: list[MessageItem] = []
        try:
            with self._t[MessageItem].batch_write() as batch:
                for message in messages:
                    body, body_ref, size = self.bodies.staged(message)
                    item = self._t[MessageItem](
                        *message_key(chat.session_id, chat.id, message),
                        id=message.id,
                        chat_id=chat.id,
                        role=message.role.value,
                        body=body,
                        body_ref=body_ref,
                        created_at=iso(message.created_at),
                        size=size,
                    )
                    written.append(item)
                    batch.save(item)
                    batch.save(
                        self._t[MessageClaimItem](
                            *message_claim_key(session.user_id, message.id),
                            chat_id=chat.id,
                            role=message.role.value,
                            message_sk=item.sk,
                        )
                    )
            total = sum(int(item.size or 0) for item in written)
            self._create_chat(session, chat, max_chats, chat_mark(chat, read=True), total)
        except BaseException:
            self._delete_message_items(session.user_id, written)
            raise

    @guard
    def update_chat(
        self, chat: Chat, *, title: str | None, model_id: str | None, at: datetime
    ) -> Chat:
        now = iso(at)
        actions: list[Action] = [ChatItem.updated_at.set(now)]
        if title is not None:
            actions += [ChatItem.title.set(title), ChatItem.title_source.set(TitleSource.USER)]
        if model_id is not None:
            actions.append(ChatItem.model_id.set(model_id))
        try:
            with self._transaction() as tx:
                tx.update(
                    self._t[ChatItem](*chat_key(chat.session_id, chat.id)),
                    actions=actions,
                    condition=ChatItem.pk.exists(),
                    name="chat",
                )
                tx.update(
                    self._t[SessionItem](*session_key(chat.session_id)),
                    actions=[SessionItem.chats[chat.id]["updatedAt"].set(now)],
                    condition=SessionItem.chats[chat.id].exists(),
                    name="session",
                )
        except TransactWriteError as exc:
            if tx.failed(exc, "chat") or tx.failed(exc, "session"):
                raise Gone from exc
            raise
        return chat.model_copy(update=chat_edit(title, model_id, at))

    @guard
    def title_chat(self, chat: Chat, title: str) -> bool:
        auto = _automatic(ChatItem.title_source)  # shared.title_is_automatic, as a condition
        return _applied(
            lambda: self._t[ChatItem](*chat_key(chat.session_id, chat.id)).update(
                actions=[
                    ChatItem.title.set(title),
                    ChatItem.title_source.set(TitleSource.GENERATED.value),
                ],
                condition=ChatItem.pk.exists() & auto,
            )
        )

    @guard
    def delete_chat(self, session: Session, chat_id: str) -> None:
        """The chat and a tombstone in one transaction; its messages and id claim after
        (``purge_deleted``, as for a session)."""
        tombstone = self._t[TombstoneItem](
            *chat_tombstone_key(session.id, chat_id),
            session_id=session.id,
            user_id=session.user_id,
            chat_ids={chat_id},
        )
        share_id = next(
            (item.share_id for item in self._chat_items(session.id, chat_id) if item.share_id),
            None,
        )
        freed = self._counted(session.id, [chat_id])
        try:
            with self._transaction() as tx:
                storage.charge(tx, self._t, session.user_id, -freed, None)
                tx.delete(
                    self._t[ChatItem](*chat_key(session.id, chat_id)),
                    condition=ChatItem.pk.exists(),
                    name="chat",
                )
                tx.save(tombstone)
                tx.update(
                    self._t[SessionItem](*session_key(session.id)),
                    actions=[SessionItem.chats[chat_id].remove(), SessionItem.chat_count.add(-1)],
                    condition=SessionItem.chat_count > 1,
                    name="session",
                )
                if share_id is not None:
                    tx.delete(self._t[ShareItem](*share_key(share_id)))
        except TransactWriteError as exc:
            if tx.failed(exc, "chat"):
                raise Gone from exc
            if tx.failed(exc, "session"):
                raise LastChat from exc
            raise
        self._purge_now(tombstone)

    @guard
    def mark_read(self, session: Session, chat_id: str, at: datetime) -> None:
        try:
            self._t[SessionItem](*session_key(session.id)).update(
                actions=[SessionItem.chats[chat_id]["lastReadAt"].set(iso(at))],
                condition=SessionItem.chats[chat_id].exists(),
            )
        except UpdateError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                raise Gone from exc
            raise

    # --------------------------------------------------------------- messages

    @guard
    def put_message(
        self, session: Session, chat: Chat, message: Message, *, activity: Activity | None
    ) -> UpsertResult:
        body, body_ref, size = self.bodies.staged(message)
        try:
            return self._insert_message(session, chat, message, (body, body_ref, size), activity)
        except MessageIdTaken:
            pass  # a message with this id exists: update it in scope, or refuse
        except BaseException:
            self.bodies.drop_body(body_ref)
            raise
        try:
            claim = self._t[MessageClaimItem].get(*message_claim_key(session.user_id, message.id))
        except MessageClaimItem.DoesNotExist:
            claim = None  # deleted meanwhile: treat as a conflict rather than guess
        if claim is None or claim.chat_id != chat.id or claim.role != message.role.value:
            self.bodies.drop_body(body_ref)
            raise MessageIdTaken
        if message.role is Role.USER:  # user messages are immutable once written
            self.bodies.drop_body(body_ref)
            return "unchanged"
        try:
            old = self._update_body(session, chat, claim.message_sk, (body, body_ref, size))
        except BaseException:
            self.bodies.drop_body(body_ref)
            raise
        self.bodies.drop_body(old.body_ref)
        return "updated"

    def _update_body(
        self,
        session: Session,
        chat: Chat,
        sort_key: str,
        staged: tuple[str | None, str | None, int],
    ) -> MessageItem:
        """An assistant message's new body and the difference in its size charged to the
        user, in one transaction conditional on the size read (a concurrent update: read
        again); the item as it was."""
        body, body_ref, size = staged
        pk = messages_pk(session.id, chat.id)
        for _ in range(CONFLICT_RETRIES):
            try:
                old = self._t[MessageItem].get(pk, sort_key, consistent_read=True)
            except MessageItem.DoesNotExist as exc:
                raise Gone from exc
            was = old.size
            delta = size - int(was or 0)
            replaced = [MessageItem.segments_base.set(old.segments)] if old.segments else []
            try:
                with self._transaction() as tx:
                    storage.charge(tx, self._t, session.user_id, delta, self.storage_limit)
                    tx.update(
                        self._t[MessageItem](pk, sort_key),
                        actions=[
                            MessageItem.body.set(body)
                            if body is not None
                            else MessageItem.body.remove(),
                            MessageItem.body_ref.set(body_ref)
                            if body_ref
                            else MessageItem.body_ref.remove(),
                            MessageItem.size.set(size),
                            *replaced,
                        ],
                        condition=MessageItem.pk.exists() & _as_read(old),
                        name="message",
                    )
            except TransactWriteError as exc:
                full = storage.refusal(
                    tx, exc, self._t, session.user_id, delta, self.storage_limit or 0
                )
                if full is not None:
                    raise full from exc
                if tx.failed(exc, "message"):
                    continue  # gone, or updated meanwhile: read again
                raise
            if old.segments and int(old.segments) > int(old.segments_base or 0):
                self._drop_segments(pk, sort_key, upto=int(old.segments))
            return old
        raise Gone

    @guard
    def put_segment(self, session: Session, chat: Chat, message: Message, start: int) -> bool:
        """Lay the assistant message's parts from ``start`` on over it as its next segment
        (the segments they replace deleted, the difference charged to the user's storage),
        in one transaction conditional on the message as read; False (nothing written) when
        no segment can stand for the change (see ``MessageBodies.segment``) or the message is
        not stored yet: the caller writes the whole body. ``MessageIdTaken``: the id is
        another chat's or a user message's."""
        staged = self.bodies.segment(message, start)
        if staged is None:
            return False
        claim = message_claim(self._t, session.user_id, message.id)
        if claim is None:
            return False
        if claim.chat_id != chat.id or claim.role != Role.ASSISTANT.value:
            raise MessageIdTaken
        return self._lay_segment(session, chat, claim.message_sk, start, staged)

    def _lay_segment(
        self, session: Session, chat: Chat, sort_key: str, start: int, staged: tuple[str, int]
    ) -> bool:
        body, size = staged
        pk = messages_pk(session.id, chat.id)
        for _ in range(CONFLICT_RETRIES):
            try:
                old = self._t[MessageItem].get(pk, sort_key, consistent_read=True)
            except MessageItem.DoesNotExist:
                return False
            last = int(old.segments or 0)
            replaced = self._replaced_segments(pk, old, start)
            if len(replaced) > SEGMENT_DELETES:
                return False  # more than a transaction holds: the whole body instead
            delta = size - sum(int(item.size) for item in replaced)
            try:
                with self._transaction() as tx:
                    storage.charge(tx, self._t, session.user_id, delta, self.storage_limit)
                    tx.save(
                        self._t[SegmentItem](
                            pk, segment_sk(sort_key, last + 1), start=start, body=body, size=size
                        ),
                        condition=SegmentItem.pk.does_not_exist(),
                        name="segment",
                    )
                    for item in replaced:
                        tx.delete(item)
                    tx.update(
                        self._t[MessageItem](pk, sort_key),
                        actions=[
                            MessageItem.segments.set(last + 1),
                            MessageItem.size.set(int(old.size or 0) + delta),
                        ],
                        condition=MessageItem.pk.exists() & _as_read(old),
                        name="message",
                    )
            except TransactWriteError as exc:
                full = storage.refusal(
                    tx, exc, self._t, session.user_id, delta, self.storage_limit or 0
                )
                if full is not None:
                    raise full from exc
                if tx.failed(exc, "message") or tx.failed(exc, "segment") or conflicted(exc):
                    continue  # a concurrent write: read again
                raise
            return True
        return False

    def _insert_message(
        self,
        session: Session,
        chat: Chat,
        message: Message,
        staged: tuple[str | None, str | None, int],
        activity: Activity | None,
    ) -> UpsertResult:
        body, body_ref, size = staged
        try:
            with self._transaction() as tx:
                storage.charge(tx, self._t, session.user_id, size, self.storage_limit)
                titled = insert_message(
                    tx, self._t, session, chat, message, body, body_ref, activity, size
                )
        except TransactWriteError as exc:
            if tx.failed(exc, "message id"):
                raise MessageIdTaken from exc
            full = storage.refusal(tx, exc, self._t, session.user_id, size, self.storage_limit or 0)
            if full is not None:
                raise full from exc
            if tx.failed(exc, "chat") and titled:  # another first message won the race
                fresh = chat.model_copy(update={"message_count": chat.message_count + 1})
                return self._insert_message(session, fresh, message, staged, activity)
            if tx.failed(exc, "chat") or tx.failed(exc, "session"):
                raise Gone from exc
            raise
        return "inserted"

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
        pk = messages_pk(session_id, chat_id)
        results = self._t[MessageItem].query(
            pk,
            MessageItem.sk.startswith(MESSAGE_PREFIX),
            scan_index_forward=not before,
            limit=limit + 1,
            page_size=limit + 1,
            last_evaluated_key=self._base_key(pk, cursor_, MESSAGE_SK),
        )
        page = page_of(list(results), limit, lambda item: item.sk)
        items = [self._message(item, self._segments(pk, item)) for item in page.items]
        return Page[Message](items=items[::-1] if before else items, cursor=page.cursor)

    @guard
    def delete_messages_from(
        self, session: Session, chat: Chat, message_id: str, at: datetime
    ) -> list[str]:
        """The later messages go in batches (newest first), then the target with the chat's
        recomputed times in one transaction: until that commits, a retry finds the target."""
        claim = message_claim(self._t, session.user_id, message_id)  # consistent: just posted
        if claim is None or claim.chat_id != chat.id:
            raise NoSuchMessage
        deletion_target(claim.role)
        pk = messages_pk(session.id, chat.id)
        doomed = list(
            self._t[MessageItem].query(
                pk, MessageItem.sk.between(claim.message_sk, MESSAGES_END), consistent_read=True
            )
        )
        if not doomed or doomed[0].sk != claim.message_sk:
            raise NoSuchMessage
        target, later = doomed[0], doomed[1:]
        self._delete_message_items(session.user_id, later[::-1])
        last = self._last_assistant_at(pk, target.sk)
        mark = SessionItem.chats[chat.id]
        now = iso(at)
        freed = sum(int(item.size or 0) for item in doomed)
        try:
            with self._transaction() as tx:
                storage.charge(tx, self._t, session.user_id, -freed, None)
                tx.delete(target, condition=MessageItem.pk.exists(), name="message")
                tx.delete(self._t[MessageClaimItem](*message_claim_key(session.user_id, target.id)))
                tx.update(
                    self._t[ChatItem](*chat_key(session.id, chat.id)),
                    actions=[
                        ChatItem.updated_at.set(now),
                        ChatItem.message_count.add(-len(doomed)),
                        ChatItem.last_assistant_message_at.set(last)
                        if last
                        else ChatItem.last_assistant_message_at.remove(),
                    ],
                    condition=ChatItem.pk.exists(),
                    name="chat",
                )
                tx.update(
                    self._t[SessionItem](*session_key(session.id)),
                    actions=[
                        mark["updatedAt"].set(now),
                        mark["lastAssistantMessageAt"].set(last)
                        if last
                        else mark["lastAssistantMessageAt"].remove(),
                    ],
                    condition=mark.exists(),
                    name="session",
                )
        except TransactWriteError as exc:
            if tx.failed(exc, "message"):
                raise NoSuchMessage from exc
            if tx.failed(exc, "chat") or tx.failed(exc, "session"):
                raise Gone from exc
            raise
        if target.segments:
            self._drop_segments(pk, target.sk)
        self.bodies.drop_body(target.body_ref)
        return [item.id for item in doomed]

    def _last_assistant_at(self, pk: str, before_sk: str) -> str | None:
        """The creation time of the newest assistant message before ``before_sk``."""
        older = self._t[MessageItem].query(
            pk,
            MessageItem.sk.startswith(MESSAGE_PREFIX),
            scan_index_forward=False,
            page_size=10,
            last_evaluated_key={"pk": {"S": pk}, "sk": {"S": before_sk}},
            attributes_to_get=["sk", "role", "createdAt"],
        )
        return next((item.created_at for item in older if item.role == Role.ASSISTANT.value), None)

    # ------------------------------------------------------------ share links

    @guard
    def share_chat(self, chat: Chat, share_id: str) -> str:
        try:
            with self._transaction() as tx:
                tx.save(
                    self._t[ShareItem](
                        *share_key(share_id), session_id=chat.session_id, chat_id=chat.id
                    ),
                    condition=ShareItem.pk.does_not_exist(),
                )
                tx.update(
                    self._t[ChatItem](*chat_key(chat.session_id, chat.id)),
                    actions=[ChatItem.share_id.set(share_id)],
                    condition=ChatItem.pk.exists() & ChatItem.share_id.does_not_exist(),
                    name="chat",
                )
        except TransactWriteError as exc:
            if not tx.failed(exc, "chat"):
                raise
            stored = self.get_chat(chat.session_id, chat.id)
            if stored is None or stored.share_id is None:
                raise Gone from exc
            return stored.share_id  # it had one already, or a concurrent call won
        return share_id

    @guard
    def unshare_chat(self, chat: Chat) -> None:
        for item in self._chat_items(chat.session_id, chat.id):
            if item.share_id is None:
                return
            try:
                with self._transaction() as tx:
                    tx.delete(self._t[ShareItem](*share_key(item.share_id)))
                    tx.update(
                        item,
                        actions=[ChatItem.share_id.remove()],
                        condition=ChatItem.share_id == item.share_id,
                        name="chat",
                    )
            except TransactWriteError as exc:
                if not tx.failed(exc, "chat"):
                    raise  # else revoked (or the chat deleted) concurrently: done

    @guard
    def shared_chat(self, share_id: str) -> Chat | None:
        try:
            share = self._t[ShareItem].get(*share_key(share_id))
        except ShareItem.DoesNotExist:
            return None
        chat = self.get_chat(share.session_id, share.chat_id)
        return chat if chat is not None and chat.share_id == share_id else None

    # ------------------------------------------------------------- deliveries

    @guard
    def claim_delivery(self, delivery_id: str, at: datetime, expires_at: datetime) -> bool:
        item = self._t[DeliveryItem](
            *delivery_key(delivery_id), expires_at=int(expires_at.timestamp())
        )
        return _applied(  # an expired record may linger until the TTL sweep: it counts as gone
            lambda: item.save(
                condition=DeliveryItem.pk.does_not_exist()
                | (DeliveryItem.expires_at <= int(at.timestamp()))
            )
        )

    @guard
    def forget_delivery(self, delivery_id: str) -> None:
        self._t[DeliveryItem](*delivery_key(delivery_id)).delete()

    # ---------------------------------------------------------------- helpers

    @staticmethod
    def _base_key(pk: str, cursor_: str | None, pattern: re.Pattern[str]) -> dict[str, Any] | None:
        if not cursor_:
            return None
        return {"pk": {"S": pk}, "sk": {"S": cursor.decode(cursor_, pattern)}}

    def _message(self, item: MessageItem, segments: list[Segment]) -> Message:
        return self.bodies.message(
            item.id, item.chat_id, item.role, item.body, item.body_ref, item.created_at, segments
        )

    def _segments(self, pk: str, item: MessageItem) -> list[Segment]:
        """The message's live segments, laid in order (a read)."""
        return [Segment(int(found.start), found.body) for found in self._live_segments(pk, item)]

    def _replaced_segments(self, pk: str, item: MessageItem, start: int) -> list[SegmentItem]:
        """The message's live segments a segment from ``start`` replaces (theirs start at or
        after it)."""
        live = self._live_segments(pk, item, ["pk", "sk", "start", "bytes"])
        return [segment for segment in live if int(segment.start) >= start]

    def _live_segments(
        self, pk: str, item: MessageItem, attributes: list[str] | None = None
    ) -> list[SegmentItem]:
        """The message's segments after its base, up to the last written, in write order: one
        consistent Query, only for a message that has any."""
        last, base = int(item.segments or 0), int(item.segments_base or 0)
        if last <= base:
            return []
        return list(
            self._t[SegmentItem].query(
                pk,
                SegmentItem.sk.between(segment_sk(item.sk, base + 1), segment_sk(item.sk, last)),
                consistent_read=True,
                attributes_to_get=attributes,
            )
        )

    def _drop_segments(self, pk: str, message_sk: str, upto: int | None = None) -> None:
        """Delete the message's segments (those up to ``upto`` only: a body replaced them)."""
        condition = (
            SegmentItem.sk.startswith(segments_prefix(message_sk))
            if upto is None
            else SegmentItem.sk.between(segment_sk(message_sk, 0), segment_sk(message_sk, upto))
        )
        doomed = list(self._t[SegmentItem].query(pk, condition, attributes_to_get=["pk", "sk"]))
        with self._t[SegmentItem].batch_write() as batch:
            for item in doomed:
                batch.delete(item)

    def _delete_messages(self, user_id: str, session_id: str, chat_id: str) -> None:
        pk = messages_pk(session_id, chat_id)
        self._delete_message_items(
            user_id, list(self._t[MessageItem].query(pk, MessageItem.sk.startswith(MESSAGE_PREFIX)))
        )

    def _delete_message_items(self, user_id: str, items: list[MessageItem]) -> None:
        """Messages, their id claims, then their large bodies."""
        with self._t[MessageItem].batch_write() as batch:
            for item in items:
                batch.delete(item)
                batch.delete(self._t[MessageClaimItem](*message_claim_key(user_id, item.id)))
        for item in items:
            if item.segments:
                self._drop_segments(item.pk, item.sk)
            self.bodies.drop_body(item.body_ref)

    def _chat_items(self, session_id: str, chat_id: str) -> list[ChatItem]:
        """The chat's item, or none (one GetItem)."""
        try:
            return [ChatItem.get(*chat_key(session_id, chat_id))]
        except ChatItem.DoesNotExist:
            return []


SEGMENT_DELETES = 90  # a segment's write deletes those it replaces: within one transaction
MESSAGES_END = "M$"  # sorts after every message's sort key ("M#…") and before segments'


def _as_read(item: MessageItem) -> Condition:
    """The message is as ``item`` read it: its size and its last segment unchanged."""
    size = MessageItem.size.does_not_exist() if item.size is None else MessageItem.size == item.size
    segments = (
        MessageItem.segments.does_not_exist()
        if item.segments is None
        else MessageItem.segments == item.segments
    )
    both: Condition = size & segments
    return both
