"""PynamoDB models of the single table. Private to the store adapter.

One table, ``pk``/``sk`` strings: every key is built in ``keys`` (its docstring has the
table of them).

Sessions carry ``userId``/``userStatus`` + ``createdKey`` for the two list indexes, which
project only what a list shows; ``dueShard``/``dueAt`` (sparse, ``overdue``) and ``prKey``
(sparse, ``byPr``, all attributes) serve the reconciler and the GitHub webhook.

An outbox event is a domain event written in the transaction of the change it reports (next to
its audit entry); the table's stream carries it to EventBridge Pipes, which keeps only INSERTs of
``O#`` sort keys (``infra/constructs/outbox.py``) and puts the event on the bus. It sits on the
session's partition, so a session's events share one stream shard, in order.
"""

from __future__ import annotations

import threading
from typing import Any, TypeVar

from pynamodb.attributes import (
    BooleanAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
)
from pynamodb.connection import Connection
from pynamodb.indexes import (
    AllProjection,
    GlobalSecondaryIndex,
    IncludeProjection,
    KeysOnlyProjection,
)
from pynamodb.models import Model

from openagents.store.shared import LIST_FIELDS


class _Base(Model):
    class Meta:
        table_name = "openagents"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)


class ByUser(GlobalSecondaryIndex["SessionItem"]):  # type: ignore[no-untyped-call]
    class Meta:
        index_name = "byUser"
        projection = IncludeProjection(LIST_FIELDS)

    user_id = UnicodeAttribute(hash_key=True, attr_name="userId")
    created_key = UnicodeAttribute(range_key=True, attr_name="createdKey")


class ByUserStatus(GlobalSecondaryIndex["SessionItem"]):  # type: ignore[no-untyped-call]
    class Meta:
        index_name = "byUserStatus"
        projection = IncludeProjection(LIST_FIELDS)

    user_status = UnicodeAttribute(hash_key=True, attr_name="userStatus")
    created_key = UnicodeAttribute(range_key=True, attr_name="createdKey")


class Overdue(GlobalSecondaryIndex["SessionItem"]):  # type: ignore[no-untyped-call]
    """Sparse: only active sessions carry ``dueShard``/``dueAt`` (for the reconciler)."""

    class Meta:
        index_name = "overdue"
        projection = KeysOnlyProjection()

    due_shard = UnicodeAttribute(hash_key=True, attr_name="dueShard")
    due_at = UnicodeAttribute(range_key=True, attr_name="dueAt")


class ByPr(GlobalSecondaryIndex["SessionItem"]):  # type: ignore[no-untyped-call]
    """Sparse: only sessions with a PR carry ``prKey`` = ``lower(owner/name)#<number>``
    (the GitHub webhook finds its sessions with one Query)."""

    class Meta:
        index_name = "byPr"
        projection = AllProjection()

    pr_key = UnicodeAttribute(hash_key=True, attr_name="prKey")


class Idle(GlobalSecondaryIndex["SessionItem"]):  # type: ignore[no-untyped-call]
    """Sparse: only hibernated sessions carry ``idleShard``/``hibernatedAt`` (auto-archive)."""

    class Meta:
        index_name = "idle"
        projection = KeysOnlyProjection()

    idle_shard = UnicodeAttribute(hash_key=True, attr_name="idleShard")
    hibernated_at = UnicodeAttribute(range_key=True, attr_name="hibernatedAt")


class SessionItem(_Base):
    id = UnicodeAttribute()
    user_id = UnicodeAttribute(attr_name="userId")
    user_status = UnicodeAttribute(attr_name="userStatus")
    created_key = UnicodeAttribute(attr_name="createdKey")
    title = UnicodeAttribute()
    title_source = UnicodeAttribute(attr_name="titleSource", null=True)
    status = UnicodeAttribute()
    repo_owner = UnicodeAttribute(attr_name="repoOwner", null=True)
    repo_name = UnicodeAttribute(attr_name="repoName", null=True)
    clone_url = UnicodeAttribute(attr_name="cloneUrl", null=True)
    branch = UnicodeAttribute(null=True)
    is_new_branch = BooleanAttribute(attr_name="isNewBranch", default=False)
    own_branch = UnicodeAttribute(attr_name="ownBranch", null=True)
    auto_commit_push_override = BooleanAttribute(attr_name="autoCommitPushOverride", null=True)
    auto_create_pr_override = BooleanAttribute(attr_name="autoCreatePrOverride", null=True)
    ask_before_bash = BooleanAttribute(attr_name="askBeforeBash", null=True)
    lifecycle_state = UnicodeAttribute(attr_name="lifecycleState", null=True)
    lifecycle_version = NumberAttribute(attr_name="lifecycleVersion", default=0)
    lifecycle_error = UnicodeAttribute(attr_name="lifecycleError", null=True)
    lifecycle_error_code = UnicodeAttribute(attr_name="lifecycleErrorCode", null=True)
    last_activity_at = UnicodeAttribute(attr_name="lastActivityAt", null=True)
    hibernate_after = UnicodeAttribute(attr_name="hibernateAfter", null=True)
    sandbox_expires_at = UnicodeAttribute(attr_name="sandboxExpiresAt", null=True)
    lines_added = NumberAttribute(attr_name="linesAdded", null=True)
    lines_removed = NumberAttribute(attr_name="linesRemoved", null=True)
    pr_number = NumberAttribute(attr_name="prNumber", null=True)
    pr_status = UnicodeAttribute(attr_name="prStatus", null=True)
    created_at = UnicodeAttribute(attr_name="createdAt")
    updated_at = UnicodeAttribute(attr_name="updatedAt")
    chats: MapAttribute[str, Any] = MapAttribute(default=dict)  # type: ignore[no-untyped-call]
    chat_count = NumberAttribute(attr_name="chatCount", default=0)
    owner_name = UnicodeAttribute(attr_name="ownerName", null=True)
    owner_email = UnicodeAttribute(attr_name="ownerEmail", null=True)
    sandbox: MapAttribute[str, Any] = MapAttribute(null=True)  # type: ignore[no-untyped-call]
    sandbox_generation = NumberAttribute(attr_name="sandboxGeneration", default=0)
    cached_diff_at = UnicodeAttribute(attr_name="cachedDiffAt", null=True)
    lifecycle_run_id = UnicodeAttribute(attr_name="lifecycleRunId", null=True)
    snapshot: MapAttribute[str, Any] = MapAttribute(null=True)  # type: ignore[no-untyped-call]
    turn_active_until = UnicodeAttribute(attr_name="turnActiveUntil", null=True)
    due_shard = UnicodeAttribute(attr_name="dueShard", null=True)
    due_at = UnicodeAttribute(attr_name="dueAt", null=True)
    idle_shard = UnicodeAttribute(attr_name="idleShard", null=True)
    hibernated_at = UnicodeAttribute(attr_name="hibernatedAt", null=True)
    bundle: MapAttribute[str, Any] = MapAttribute(null=True)  # type: ignore[no-untyped-call]
    archive_pending = BooleanAttribute(attr_name="archivePending", null=True)
    pr_key = UnicodeAttribute(attr_name="prKey", null=True)

    by_user = ByUser()
    by_user_status = ByUserStatus()
    overdue = Overdue()
    idle = Idle()
    by_pr = ByPr()


class ChatItem(_Base):
    id = UnicodeAttribute()
    session_id = UnicodeAttribute(attr_name="sessionId")
    title = UnicodeAttribute()
    title_source = UnicodeAttribute(attr_name="titleSource", null=True)
    model_id = UnicodeAttribute(attr_name="modelId", null=True)
    active_stream_id = UnicodeAttribute(attr_name="activeStreamId", null=True)
    last_assistant_message_at = UnicodeAttribute(attr_name="lastAssistantMessageAt", null=True)
    message_count = NumberAttribute(attr_name="messageCount", default=0)
    share_id = UnicodeAttribute(attr_name="shareId", null=True)
    created_at = UnicodeAttribute(attr_name="createdAt")
    updated_at = UnicodeAttribute(attr_name="updatedAt")


class ShareItem(_Base):
    """A public share link; it counts only while its chat names it back (``shareId``)."""

    session_id = UnicodeAttribute(attr_name="sessionId")
    chat_id = UnicodeAttribute(attr_name="chatId")


class PreviewItem(_Base):
    """A public preview of a session's port, in the session's partition (``keys.preview_key``):
    the session's purge removes it with the rest."""

    user_id = UnicodeAttribute(attr_name="userId")
    secret = UnicodeAttribute()
    created_at = UnicodeAttribute(attr_name="createdAt")


class MessageItem(_Base):
    id = UnicodeAttribute()
    chat_id = UnicodeAttribute(attr_name="chatId")
    role = UnicodeAttribute()
    body = UnicodeAttribute(null=True)  # the UI message as JSON, when it fits in the item
    body_ref = UnicodeAttribute(attr_name="bodyRef", null=True)  # artifact key otherwise
    created_at = UnicodeAttribute(attr_name="createdAt")
    size = NumberAttribute(attr_name="bytes", null=True)  # what the user's storage counted
    # a live assistant message's segments (``SegmentItem``): the last one written, and the
    # last one the body replaced (those up to it are left to delete, never read)
    segments = NumberAttribute(null=True)
    segments_base = NumberAttribute(attr_name="segmentsBase", null=True)


class SegmentItem(_Base):
    """One step's parts of a live assistant message (``shared.Segment``)."""

    start = NumberAttribute()
    body = UnicodeAttribute()
    size = NumberAttribute(attr_name="bytes")


class AuditItem(_Base):
    id = UnicodeAttribute()
    session_id = UnicodeAttribute(attr_name="sessionId")
    at = UnicodeAttribute()
    type = UnicodeAttribute()
    detail: MapAttribute[str, Any] = MapAttribute(default=dict)  # type: ignore[no-untyped-call]


class ChatClaimItem(_Base):
    session_id = UnicodeAttribute(attr_name="sessionId")


class MessageClaimItem(_Base):
    chat_id = UnicodeAttribute(attr_name="chatId")
    role = UnicodeAttribute()
    message_sk = UnicodeAttribute(attr_name="messageSk")


class ProfileItem(_Base):
    default_model_id = UnicodeAttribute(attr_name="defaultModelId", null=True)
    auto_commit_push = BooleanAttribute(attr_name="autoCommitPush", default=False)
    auto_create_pr = BooleanAttribute(attr_name="autoCreatePr", default=False)
    archived_count = NumberAttribute(attr_name="archivedCount", default=0)
    stored_bytes = NumberAttribute(attr_name="storedBytes", null=True)  # store/storage.py


class TitleItem(_Base):
    session_ids = UnicodeSetAttribute(attr_name="sessionIds", null=True)


class OutboxItem(_Base):
    """A domain event for the stream: ``event`` is its ``detail`` (the versioned envelope,
    ``openagents.events.from_entry``) as JSON, exactly what PutEvents would send."""

    event = UnicodeAttribute()
    detail_type = UnicodeAttribute(attr_name="detailType")
    expires_at = NumberAttribute(attr_name="expiresAt")  # the table's TTL attribute


class CounterItem(_Base):
    """A sliding rate window: the admitted hits (epoch ms, oldest first, at most the limit);
    ``hits`` counts every write, the version the next write is conditioned on."""

    hits = NumberAttribute(default=0)
    stamps: ListAttribute[int] = ListAttribute(of=NumberAttribute, default=list)  # type: ignore[arg-type]
    expires_at = NumberAttribute(attr_name="expiresAt")  # the table's TTL attribute


class TombstoneItem(_Base):
    """A deleted session or chat whose children (chats, messages, claims, audit entries) are
    still to be removed: written in the deleting transaction, removed once they are gone."""

    session_id = UnicodeAttribute(attr_name="sessionId")
    # whose id claims to free; none: written before ids per user, left for the migration
    user_id = UnicodeAttribute(attr_name="userId", null=True)
    chat_ids = UnicodeSetAttribute(attr_name="chatIds", null=True)


class DeliveryItem(_Base):
    """A GitHub webhook delivery already handled (its id, until it expires)."""

    expires_at = NumberAttribute(attr_name="expiresAt")  # the table's TTL attribute


ALL_ITEMS: tuple[type[_Base], ...] = (
    SessionItem, ChatItem, MessageItem, AuditItem, ChatClaimItem, MessageClaimItem,
    ProfileItem, TitleItem, CounterItem, OutboxItem, DeliveryItem, ShareItem,
    TombstoneItem, PreviewItem, SegmentItem,
)  # fmt: skip
TTL_ATTRIBUTE = "expiresAt"
OUTBOX_EVENT_ATTRIBUTE = "event"  # where the enrichment reads the event's detail
OUTBOX_TTL_SECONDS = 2 * 24 * 3600  # past the stream's 24 h retention: published or dead-lettered


M = TypeVar("M", bound=Model)


class Table:
    """One DynamoDB table and the item models bound to it: each model a subclass of its own
    (``table[SessionItem]``), with the table, endpoint and region in its own ``Meta`` and its
    own connection, so a store instance works on its table whatever else was built before or
    after it (two stores may use two tables). Conditions and actions may name the models above
    (an attribute is the same in every binding); what is read or written uses the bound one."""

    def __init__(self, name: str, host: str | None, region: str) -> None:
        self.name = name
        self.host = host
        self.region = region
        self._bound: dict[type[Model], type[Model]] = {}
        self._lock = threading.Lock()

    @classmethod
    def of_process(cls) -> Table:
        """The table ``bind`` pointed the models at (callers built before per-store tables)."""
        meta = SessionItem.Meta
        return cls(meta.table_name, getattr(meta, "host", None), meta.region)

    def __getitem__(self, model: type[M]) -> type[M]:
        bound = self._bound.get(model)
        if bound is not None:
            return bound  # type: ignore[return-value]
        with self._lock:
            bound = self._bound.get(model)
            if bound is not None:
                return bound  # type: ignore[return-value]
            meta = type(
                "Meta", (), {"table_name": self.name, "host": self.host, "region": self.region}
            )
            namespace = {"Meta": meta, "DoesNotExist": model.DoesNotExist, "__module__": __name__}
            bound = type(model.__name__, (model,), namespace)
            self._bound[model] = bound
        return bound  # type: ignore[return-value]

    def connection(self) -> Connection:
        """A connection for this table's transactions (``transaction.Transaction``)."""
        return Connection(region=self.region, host=self.host)

    def create(self) -> None:
        """Create the table (keys and every index) from the models, with TTL on."""
        model = self[SessionItem]
        if not model.exists():
            model.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
            self.connection().update_time_to_live(self.name, TTL_ATTRIBUTE)


def bind(table_name: str, host: str | None, region: str) -> None:
    """Point the item models themselves at one table and endpoint: for code that uses them
    directly (tests, the migration, the dev runtime's dump); the stores use a ``Table``.

    PynamoDB keeps table, endpoint and connection on the model classes.
    """
    for item in ALL_ITEMS:
        item.Meta.table_name = table_name
        setattr(item.Meta, "host", host)  # noqa: B010 - Meta declares no host attribute
        item.Meta.region = region
        item._connection = None


def create_table() -> None:
    """Create the table ``bind`` named (keys, indexes, TTL)."""
    Table.of_process().create()
