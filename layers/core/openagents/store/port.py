"""What the services need from persistence. Adapters raise the errors defined here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from openagents.domain.lifecycle import LifecycleFields
from openagents.domain.models import (
    AuditEntry,
    Chat,
    LifecycleState,
    ListFilter,
    Message,
    Page,
    Preferences,
    Repo,
    Session,
    SessionStatus,
)
from openagents.domain.previews import PublicPreview


class TitleTaken(Exception):
    """The generated title was claimed by another session of the same user."""


class RateLimitExceeded(Exception):
    def __init__(self, retry_at: datetime) -> None:
        super().__init__("rate limit exceeded")
        self.retry_at = retry_at  # when the oldest counted hit leaves the window


class ChatIdTaken(Exception):
    def __init__(self, session_id: str) -> None:
        super().__init__("chat id taken")
        self.session_id = session_id


class MessageIdTaken(Exception):
    """The message id belongs to another chat or role (of the same user: message ids are
    unique per user, never across users)."""


class LastChat(Exception):
    """The chat is the only one of its session."""


class TooManyChats(Exception):
    pass


class Gone(Exception):
    """The session or chat disappeared (deleted concurrently)."""


class BadCursor(Exception):
    pass


class NoSuchMessage(Exception):
    """The message is not in the chat."""


class NotUserMessage(Exception):
    """The message is not a user message (only a user message starts a deletion)."""


class StaleState(Exception):
    """A conditional lifecycle write lost: the session is not in the expected state."""


class RepositoryAlreadySet(Exception):
    """The session has a repository already (``SessionStore.set_repository``)."""


LIFECYCLE_FIELDS = LifecycleFields.__optional_keys__


def check_lifecycle_fields(changes: Mapping[str, object]) -> None:
    """A lifecycle write changes lifecycle fields only (a bug otherwise, never user input)."""
    unknown = set(changes) - LIFECYCLE_FIELDS
    if unknown:
        raise ValueError(f"not lifecycle fields: {sorted(unknown)}")


@dataclass(frozen=True)
class RateWindow:
    """A sliding window: a hit at ``at`` is admitted when fewer than ``limit`` hits of this
    action lie in (at - seconds, at] — whatever minute boundary falls in between."""

    action: str
    at: datetime
    seconds: int
    limit: int

    @property
    def at_ms(self) -> int:
        return int(self.at.timestamp() * 1000)

    def admit(self, hits: Iterable[int]) -> list[int]:
        """The hits (epoch ms) still in the window, oldest first, when one more fits; else
        ``RateLimitExceeded`` with the moment enough of them have left it. Both adapters
        decide with this, inside the create's transaction."""
        since = self.at_ms - self.seconds * 1000
        recent = sorted(hit for hit in hits if hit > since)
        if len(recent) >= self.limit:
            # a concurrent create may have stamped its hit after ``at``: never more than a window
            leaves = min(recent[len(recent) - self.limit], self.at_ms) + self.seconds * 1000
            raise RateLimitExceeded(datetime.fromtimestamp(leaves / 1000, self.at.tzinfo))
        return recent


@dataclass(frozen=True)
class UserRecord:
    preferences: Preferences
    archived_count: int


@dataclass(frozen=True)
class Activity:
    """Activity fields a user message refreshes on its session (with the due time they imply)."""

    at: datetime
    hibernate_after: datetime
    due_at: datetime | None = None
    due_shard: str | None = None


UpsertResult = Literal["inserted", "updated", "unchanged"]


# --- the ports, one per aggregate -------------------------------------------------------------
#
# A service depends on the ports it uses; ``Store`` is their union, for the composition root and
# the callers that need all. Both adapters implement every port (``dynamodb.DynamoStore``,
# ``sqlite.SqliteStore``); the run store is its own port (``store/runs.py``). Rate limits have
# no port of their own: the window (``RateWindow``) is decided inside a session's create, in
# its transaction. Writes that span aggregates (a turn's start: message, run, claim and marks)
# are composed on each adapter's unit of work (``sqlite_writes`` / ``dynamodb_writes``).


class UserStore(Protocol):
    """A user's preferences and counters, and the titles their sessions hold."""

    def get_user(self, user_id: str) -> UserRecord: ...
    def put_preferences(self, user_id: str, preferences: Preferences) -> None: ...
    def used_titles(self, user_id: str) -> set[str]: ...
    def storage_used(self, user_id: str) -> int:
        """The bytes the user's stored messages, live runs' event logs and attachments take
        (``store/storage.py``)."""
        ...

    def charge_storage(self, user_id: str, delta: int) -> None:
        """Add ``delta`` bytes to the user's count (give back when negative: never below 0),
        in one conditional write: ``StorageFull`` when a positive ``delta`` would pass the
        store's limit (nothing written). For what the store does not write itself
        (attachments in the artifact store)."""
        ...


class SessionStore(Protocol):
    """Sessions as their owner sees them: create (with the first chat and the rate window),
    read, list, rename, settings, archive, delete; and their audit log."""

    def create_session(
        self,
        session: Session,
        chat: Chat,
        entry: AuditEntry,
        *,
        claim_title: bool,
        rate: RateWindow,
    ) -> None: ...
    def get_session(self, session_id: str) -> Session | None: ...
    def list_sessions(
        self, user_id: str, which: ListFilter, limit: int, cursor: str | None
    ) -> Page[Session]: ...
    def rename_session(self, session: Session, title: str, entry: AuditEntry) -> Session:
        """A user's rename (the title's source becomes ``user``): the title registry and the
        audit entry (and its event) in the same write. ``Gone``."""
        ...

    def set_ask_before_bash(self, session: Session, ask: bool, entry: AuditEntry) -> Session:
        """The session's "ask before running" setting, with its audit entry (and event) in
        the same write. ``Gone``."""
        ...

    def set_repository(
        self, session: Session, repo: Repo, branch: str, is_new_branch: bool, entry: AuditEntry
    ) -> Session:
        """The repository of a session started without one (``POST
        /api/sessions/{id}/repository``): owner, name, clone URL and the branch the session
        pushes (``own_branch`` and ``branch``; ``is_new_branch``: the session made it), with its
        audit entry (and event) in the same write, only while the session has no repository
        (no clone URL, owner or name): ``RepositoryAlreadySet`` otherwise, writing nothing.
        ``Gone``."""
        ...

    def title_session(self, session: Session, title: str, entry: AuditEntry) -> bool:
        """A generated title, as ``rename_session`` writes it, but only while the stored title
        is still the automatic one read (``session.title``, source ``auto``): a rename in
        between wins. False when it did not apply (or the session is gone)."""
        ...

    def set_status(
        self,
        session: Session,
        status: SessionStatus,
        lifecycle_state: LifecycleState | None,
        entry: AuditEntry,
        changes: LifecycleFields | None = None,
    ) -> Session: ...
    def sessions_for_pr(self, owner: str, name: str, number: int) -> list[Session]: ...
    def delete_session(self, session: Session) -> None:
        """Gone at once for every reader; children an adapter cannot remove in the same
        transaction are left under a tombstone written in it (``purge_deleted``)."""
        ...

    def purge_deleted(self, limit: int = 25) -> int:
        """Remove the children of up to ``limit`` deleted sessions and chats (their tombstones)
        and the tombstones; how many were finished. Idempotent; the reconciler runs it."""
        ...

    def list_events(self, session_id: str, limit: int, cursor: str | None) -> Page[AuditEntry]: ...
    def append_entry(self, entry: AuditEntry) -> bool:
        """An outcome's audit entry and its event, in one write; False, writing nothing, when
        this entry (its id and time) is already recorded: a replayed step records once."""
        ...


class LifecycleStore(Protocol):
    """A session's lifecycle: conditional transitions (``LIFECYCLE_FIELDS`` only), the sandbox
    generation, the lifecycle lease, and the sparse due and idle indexes."""

    def get_session(self, session_id: str) -> Session | None: ...
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
    ) -> Session: ...
    def claim_generation(self, session_id: str, generation: int) -> bool: ...
    def claim_lease(
        self,
        session_id: str,
        run_id: str,
        stale_due_before: datetime,
        *,
        replace_active: bool = False,
    ) -> bool: ...
    def release_lease(self, session_id: str, run_id: str) -> None: ...
    def overdue(self, now: datetime) -> list[str]: ...
    def hibernated_before(self, moment: datetime) -> list[str]: ...
    def append_entry(self, entry: AuditEntry) -> bool: ...


class ChatStore(Protocol):
    """A session's chats and their messages."""

    def get_chat(self, session_id: str, chat_id: str) -> Chat | None: ...
    def chat_session(self, user_id: str, chat_id: str) -> str | None:
        """The session of the user's chat of that id (chat ids are unique per user, across
        their sessions; another user's same id is theirs, and None here)."""
        ...

    def list_chats(self, session_id: str) -> list[Chat]: ...
    def create_chat(self, session: Session, chat: Chat, max_chats: int) -> None: ...
    def update_chat(
        self, chat: Chat, *, title: str | None, model_id: str | None, at: datetime
    ) -> Chat: ...
    def title_chat(self, chat: Chat, title: str) -> bool:
        """A generated title while the chat's title is still its automatic one (source
        ``auto``); False when it did not apply (renamed meanwhile, or gone)."""
        ...

    def delete_chat(self, session: Session, chat_id: str) -> None: ...
    def mark_read(self, session: Session, chat_id: str, at: datetime) -> None: ...

    # messages
    def put_message(
        self, session: Session, chat: Chat, message: Message, *, activity: Activity | None
    ) -> UpsertResult: ...
    def list_messages(
        self, session_id: str, chat_id: str, limit: int, cursor: str | None, *, before: bool = False
    ) -> Page[Message]:
        """A page of messages, oldest first. Forward (default): the ones after ``cursor``
        (from the start when None), the page's cursor naming its newest message. ``before``:
        the ones before ``cursor`` (before the end when None), the page's cursor naming its
        oldest message, to pass back for the page before it."""
        ...

    def delete_messages_from(
        self, session: Session, chat: Chat, message_id: str, at: datetime
    ) -> list[str]:
        """Delete the user message ``message_id`` and every later message of the chat, and
        recompute the chat's last-assistant time; the deleted ids, oldest first.
        ``NoSuchMessage``, ``NotUserMessage``, ``Gone``."""
        ...

    def fork_chat(
        self, session: Session, chat: Chat, messages: list[Message], max_chats: int
    ) -> None:
        """Create ``chat`` holding ``messages`` (new ids, in ``chat``), visible only once
        complete. ``ChatIdTaken``, ``TooManyChats``, ``Gone`` as ``create_chat``."""
        ...


class ShareStore(Protocol):
    """Public share links of chats."""

    def share_chat(self, chat: Chat, share_id: str) -> str:
        """Give the chat the share link ``share_id`` unless it has one (a conditional write:
        concurrent calls agree on one); the chat's share id. ``Gone``."""
        ...

    def unshare_chat(self, chat: Chat) -> None:
        """Revoke the chat's share link, if any."""
        ...

    def shared_chat(self, share_id: str) -> Chat | None:
        """The chat a live share link points at (None once revoked or deleted)."""
        ...


class PreviewStore(Protocol):
    """Public previews of a session's ports (``domain/previews.py``), at most one per port."""

    def publish_preview(self, preview: PublicPreview) -> PublicPreview:
        """Record ``preview`` unless its port has one (a conditional write: concurrent calls
        agree on one); the port's public preview."""
        ...

    def public_preview(self, session_id: str, port: int) -> PublicPreview | None:
        """The port's public preview, if any."""
        ...

    def public_previews(self, session_id: str) -> list[PublicPreview]:
        """The session's public previews, by port."""
        ...

    def revoke_preview(self, session_id: str, port: int) -> bool:
        """Remove the port's public preview; False when it had none."""
        ...


class DeliveryStore(Protocol):
    """Webhook deliveries already handled (replays are acknowledged and ignored)."""

    def claim_delivery(self, delivery_id: str, at: datetime, expires_at: datetime) -> bool:
        """Record a delivery id until ``expires_at``; False when it is recorded and not expired
        at ``at`` (a replay). Two concurrent claims of one id: exactly one wins."""
        ...

    def forget_delivery(self, delivery_id: str) -> None:
        """Drop a delivery's record (its handling failed: a redelivery must run again)."""
        ...


class Store(
    UserStore,
    SessionStore,
    LifecycleStore,
    ChatStore,
    ShareStore,
    PreviewStore,
    DeliveryStore,
    Protocol,
):
    """Every port: what the composition root builds, and callers that need all of them."""
