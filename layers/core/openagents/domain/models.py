"""Domain models. JSON field names are camelCase, as in the reference product."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, PlainSerializer, model_validator
from pydantic.alias_generators import to_camel


class Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class SessionStatus(StrEnum):
    RUNNING = "running"
    ARCHIVED = "archived"


class LifecycleState(StrEnum):
    PROVISIONING = "provisioning"
    ACTIVE = "active"
    HIBERNATING = "hibernating"
    HIBERNATED = "hibernated"
    RESTORING = "restoring"
    ARCHIVED = "archived"
    FAILED = "failed"


class PrStatus(StrEnum):
    OPEN = "open"
    MERGED = "merged"
    CLOSED = "closed"


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


class TitleSource(StrEnum):
    """How a session's or a chat's title came to be. Only an ``auto`` title (a random city; a
    chat's "New chat" or its first message's text) is replaced by a generated one."""

    AUTO = "auto"
    GIVEN = "given"  # at create (a session), or by the product (a fork's "Fork of …")
    GENERATED = "generated"  # from the first user message, through the chat's model
    USER = "user"  # renamed by its user


class ListFilter(StrEnum):
    ALL = "all"
    ACTIVE = "active"
    ARCHIVED = "archived"


class ChatMark(Model):
    """What the session item keeps about each chat, so a list needs no per-chat reads."""

    created_at: datetime
    updated_at: datetime
    last_assistant_message_at: datetime | None = None
    last_read_at: datetime | None = None
    streaming: bool = False

    @property
    def has_unread(self) -> bool:
        return is_unread(self.last_assistant_message_at, self.last_read_at)


def is_unread(last_assistant_message_at: datetime | None, last_read_at: datetime | None) -> bool:
    """Reference §6.2: no assistant message → read; never read → unread; else compare."""
    if last_assistant_message_at is None:
        return False
    if last_read_at is None:
        return True
    return last_assistant_message_at > last_read_at


class Repo(Model):
    owner: str | None = None
    name: str | None = None
    clone_url: str | None = None


IsoTime = Annotated[datetime, PlainSerializer(datetime.isoformat, when_used="json")]
"""A time kept as ``datetime.isoformat()`` (``+00:00``), the stored shape of the refs below."""


class SandboxHandle(Model):
    """Where a sandbox lives. Persisted on the session (the token is not: it is derived)."""

    driver: str  # "local" | "fargate"
    session_id: str
    generation: int
    ref: str  # driver id: a pid for local, a task ARN for Fargate
    endpoint: str | None = None  # once known; informative: clients ask driver.endpoint()
    volume_id: str | None = None  # EBS volume / EFS access point, when the driver has one


class SnapshotRef(Model):
    """A completed, verified snapshot: ``id`` is a file path, an EBS snapshot id or an S3 key."""

    driver: str
    id: str
    session_id: str
    generation: int
    size_bytes: int
    sha256: str | None = None
    created_at: IsoTime
    manifest: dict[str, Any] = {}  # what the driver (and sandboxd) recorded, free-form


class BundleRef(Model):
    """An archived session's git bundle in the artifact store (every ref plus uncommitted
    work), with what restoring it needs."""

    key: str
    generation: int
    sha256: str
    size_bytes: int
    branch: str | None = None
    head: str | None = None
    upstream: str | None = None
    origin_head: str | None = None
    created_at: IsoTime


class Session(Model):
    id: str
    user_id: str
    title: str
    title_source: TitleSource = TitleSource.GIVEN  # stored before it was recorded: kept
    status: SessionStatus = SessionStatus.RUNNING
    repo_owner: str | None = None
    repo_name: str | None = None
    clone_url: str | None = None
    branch: str | None = None  # the branch the sandbox was last seen on (display, PR lookups)
    is_new_branch: bool = False
    # the one branch the control plane pushes and opens pull requests from: recorded at create
    # (the new branch, or the one given) and never taken from a sandbox's answers
    own_branch: str | None = None
    auto_commit_push_override: bool | None = None
    auto_create_pr_override: bool | None = None
    ask_before_bash: bool = False  # every bash (and task) call waits for the user's approval
    lifecycle_state: LifecycleState | None = LifecycleState.PROVISIONING
    lifecycle_version: int = 0
    lifecycle_error: str | None = None
    lifecycle_error_code: str | None = None  # domain.lifecycle.Failure; None without an error
    last_activity_at: datetime | None = None
    hibernate_after: datetime | None = None
    sandbox_expires_at: datetime | None = None
    lines_added: int | None = 0
    lines_removed: int | None = 0
    pr_number: int | None = None
    pr_status: PrStatus | None = None
    created_at: datetime
    updated_at: datetime
    chats: dict[str, ChatMark] = {}
    # sandbox bookkeeping (never returned by the API as such)
    owner_name: str | None = None
    owner_email: str | None = None
    sandbox: SandboxHandle | None = None
    sandbox_generation: int = 0
    cached_diff_at: datetime | None = None
    lifecycle_run_id: str | None = None  # the lease of the one lifecycle run
    snapshot: SnapshotRef | None = None  # the last verified snapshot
    turn_active_until: datetime | None = None  # an agent turn holds activity until then
    hibernated_at: datetime | None = None  # while hibernated (auto-archive)
    bundle: BundleRef | None = None  # the archive's git bundle
    archive_pending: bool | None = None  # archive finalisation has not completed yet

    @property
    def has_unread(self) -> bool:
        return any(mark.has_unread for mark in self.chats.values())

    @property
    def repo(self) -> Repo:
        """The session's repository as the git host takes it."""
        return Repo(owner=self.repo_owner, name=self.repo_name, clone_url=self.clone_url)

    @property
    def checkout_branch(self) -> str | None:
        """The branch a fresh clone checks out: the own branch (sessions recorded before it
        was: the branch last seen; None: the repository's default)."""
        return self.own_branch or self.branch

    @property
    def has_streaming(self) -> bool:
        return any(mark.streaming for mark in self.chats.values())

    @property
    def latest_chat_id(self) -> str | None:
        """The most recently updated chat (ties: the newest created), reference §6.1."""
        if not self.chats:
            return None
        return max(self.chats.items(), key=lambda kv: (kv[1].updated_at, kv[1].created_at))[0]

    @property
    def chat_activity_at(self) -> datetime:
        return max((mark.updated_at for mark in self.chats.values()), default=self.created_at)

    @model_validator(mode="before")
    @classmethod
    def _code_goes_with_its_error(cls, data: Any) -> Any:
        """A write that cleared ``lifecycle_error`` cleared its code too."""
        if isinstance(data, dict):
            error = data.get("lifecycle_error", data.get("lifecycleError"))
            if error is None:
                data = {
                    k: v
                    for k, v in data.items()
                    if k not in ("lifecycle_error_code", "lifecycleErrorCode")
                }
        return data


def pr_key(owner: str | None, name: str | None, number: int | None) -> str | None:
    """The webhook's lookup key: ``lower(owner/name)#number`` (None without a PR)."""
    if not owner or not name or number is None:
        return None
    return f"{owner}/{name}".lower() + f"#{number}"


class Chat(Model):
    id: str
    session_id: str
    title: str
    title_source: TitleSource = TitleSource.AUTO
    model_id: str | None = None
    active_stream_id: str | None = None
    last_assistant_message_at: datetime | None = None
    message_count: int = 0
    share_id: str | None = None  # the chat's public share link, while it has one
    created_at: datetime
    updated_at: datetime


class Message(Model):
    id: str
    chat_id: str
    role: Role
    parts: dict[str, Any]  # the entire UI message object, as the reference stores it
    created_at: datetime


class AuditEntry(Model):
    id: str
    session_id: str
    at: datetime
    type: str
    detail: dict[str, Any] = {}


class Preferences(Model):
    default_model_id: str | None = None
    auto_commit_push: bool = False
    auto_create_pr: bool = False


T = TypeVar("T")


class Page(Model, Generic[T]):
    """One page of a list; ``cursor`` is opaque and ``None`` on the last page."""

    items: list[T]
    cursor: str | None = None
