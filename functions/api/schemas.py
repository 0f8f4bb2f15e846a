"""Request and response bodies. These models are the OpenAPI schema."""

import json
import unicodedata
from datetime import datetime
from typing import Annotated, Any, Literal

from openagents.domain.models import (
    AuditEntry,
    Chat,
    LifecycleState,
    PrStatus,
    Session,
    SessionStatus,
)
from openagents.services.chats import ChatView
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

ClientId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[\w-]+$")]
MessageId = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^\S+$")]
# A refusal the API answers 400 ``invalid_input`` (not 422): the input is well-formed JSON of
# the right type, but not a value any route accepts (functions/api/errors.py).
REFUSED = "invalid_input"


def _no_controls(value: str) -> str:
    if any(unicodedata.category(c) == "Cc" for c in value):
        raise PydanticCustomError(REFUSED, "must not contain control characters")
    return value


ModelId = Annotated[str, AfterValidator(_no_controls)]


# defer_build: a model (and FastAPI's adapter of it) builds its validator and serializer on
# first use, so a cold start pays only for the routes its requests use (docs/benchmarks.md)
class Body(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )


class Out(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, defer_build=True)


class ErrorOut(Out):
    error: str = Field(description="Human-readable message")
    code: str = Field(description="Stable machine-readable code")
    field: str | None = Field(default=None, description="The request field at fault, if any")


ERROR_CONTENT = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}


def error_responses(*extra: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the errors every authenticated route can give, plus ``extra``.
    By reference: as ``{"model": ErrorOut}`` FastAPI would build a response field per route and
    code (~250, half the API's route set-up at import) for one schema. The routes that name
    ``ErrorOut`` as a model put it in the schema's components."""
    codes = sorted({400, 401, 404, 422, 503, *extra})
    return {code: {"content": ERROR_CONTENT} for code in codes}


class SuccessOut(Out):
    success: Literal[True] = True


# ----------------------------------------------------------------- sessions


class CreateSessionIn(Body):
    title: str | None = Field(default=None, max_length=1000)
    repo_url: str | None = Field(default=None, max_length=2048)
    repo_owner: str | None = Field(default=None, max_length=100)
    repo_name: str | None = Field(default=None, max_length=100)
    clone_url: str | None = Field(default=None, max_length=2048)
    branch: str | None = Field(default=None, max_length=1000)
    is_new_branch: StrictBool | None = None
    auto_commit_push: StrictBool | None = None
    auto_create_pr: StrictBool | None = None
    ask_before_bash: StrictBool | None = Field(
        default=None, description="Every bash command (and subagent task) waits for approval"
    )


class MergeIn(Body):
    method: Literal["merge", "squash", "rebase"] = "merge"


class UpdateSessionIn(Body):
    title: str | None = Field(default=None, max_length=1000)
    status: SessionStatus | None = None
    ask_before_bash: StrictBool | None = None


class SessionOut(Out):
    id: str
    title: str
    status: SessionStatus
    repo_owner: str | None
    repo_name: str | None
    clone_url: str | None
    branch: str | None
    is_new_branch: bool
    auto_commit_push_override: bool | None
    auto_create_pr_override: bool | None
    ask_before_bash: bool
    lifecycle_state: LifecycleState | None
    lifecycle_version: int
    lifecycle_error: str | None = Field(description="A sentence for the user, or null")
    lifecycle_error_code: str | None = Field(
        description="Stable code of lifecycleError: provisioning_not_started, "
        "provisioning_failed, restore_failed, snapshot_failed, pause_failed, sandbox_lost, "
        "sandbox_lost_no_snapshot, archive_failed"
    )
    last_activity_at: datetime | None
    hibernate_after: datetime | None
    sandbox_expires_at: datetime | None
    lines_added: int | None
    lines_removed: int | None
    pr_number: int | None
    pr_status: PrStatus | None
    created_at: datetime
    updated_at: datetime
    has_unread: bool
    latest_chat_id: str | None

    @classmethod
    def of(cls, session: Session) -> "SessionOut":
        data = session.model_dump(include=set(cls.model_fields) - {"has_unread", "latest_chat_id"})
        return cls(**data, has_unread=session.has_unread, latest_chat_id=session.latest_chat_id)


class SessionSummaryOut(Out):
    """The sidebar's projection (reference §6.1): no sandbox or diff payloads."""

    id: str
    title: str
    status: SessionStatus
    repo_owner: str | None
    repo_name: str | None
    branch: str | None
    lines_added: int | None
    lines_removed: int | None
    pr_number: int | None
    pr_status: PrStatus | None
    lifecycle_state: LifecycleState | None
    created_at: datetime
    last_activity_at: datetime
    has_unread: bool
    has_streaming: bool
    latest_chat_id: str | None

    @classmethod
    def of(cls, s: Session) -> "SessionSummaryOut":
        return cls(
            id=s.id,
            title=s.title,
            status=s.status,
            repo_owner=s.repo_owner,
            repo_name=s.repo_name,
            branch=s.branch,
            lines_added=s.lines_added,
            lines_removed=s.lines_removed,
            pr_number=s.pr_number,
            pr_status=s.pr_status,
            lifecycle_state=s.lifecycle_state,
            created_at=s.created_at,
            last_activity_at=s.chat_activity_at,
            has_unread=s.has_unread,
            has_streaming=s.has_streaming,
            latest_chat_id=s.latest_chat_id,
        )


class SessionListOut(Out):
    sessions: list[SessionSummaryOut]
    archived_count: int
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null at the end"
    )
    has_more: bool


class SessionOneOut(Out):
    session: SessionOut


class ChatOut(Out):
    id: str
    session_id: str
    title: str
    model_id: str | None
    active_run_id: str | None = Field(description="The chat's live agent run, if a turn runs")
    active_stream_id: str | None = Field(description="The reference's name for `activeRunId`")
    last_assistant_message_at: datetime | None
    created_at: datetime
    updated_at: datetime
    has_unread: bool
    is_streaming: bool

    @classmethod
    def of(cls, chat: Chat, has_unread: bool = False) -> "ChatOut":
        data = chat.model_dump(exclude={"message_count", "share_id"})
        live = chat.active_stream_id
        return cls(**data, active_run_id=live, has_unread=has_unread, is_streaming=live is not None)

    @classmethod
    def view(cls, view: ChatView) -> "ChatOut":
        return cls.of(view.chat, view.has_unread)


class CreatedSessionOut(Out):
    session: SessionOut
    chat: ChatOut


class EventOut(Out):
    id: str
    at: datetime
    type: str
    detail: dict[str, Any]

    @classmethod
    def of(cls, entry: AuditEntry) -> "EventOut":
        return cls(id=entry.id, at=entry.at, type=entry.type, detail=entry.detail)


class EventListOut(Out):
    events: list[EventOut]
    next_cursor: str | None


class PreferencesBody(Body):
    default_model_id: ModelId | None = Field(default=None, min_length=1, max_length=200)
    auto_commit_push: StrictBool = False
    auto_create_pr: StrictBool = False


# -------------------------------------------------------------------- chats


class CreateChatIn(Body):
    id: ClientId | None = None


class UpdateChatIn(Body):
    title: str | None = Field(default=None, max_length=1000)
    model_id: ModelId | None = Field(default=None, max_length=200)


class ChatListOut(Out):
    chats: list[ChatOut]
    default_model_id: str


class ChatOneOut(Out):
    chat: ChatOut


class UIMessage(BaseModel):
    """An AI-SDK UI message; stored whole, as the reference does."""

    model_config = ConfigDict(extra="allow")

    id: MessageId
    role: Literal["user", "assistant"]
    parts: list[Any]
    metadata: Any = None

    @model_validator(mode="after")
    def _finite(self) -> "UIMessage":
        """NaN and Infinity parse (Python's JSON allows them) but are no JSON: refused."""
        try:
            json.dumps(self.model_dump(), allow_nan=False)
        except ValueError:
            raise PydanticCustomError(REFUSED, "must not contain NaN or Infinity") from None
        return self


class PostMessageIn(Body):
    message: UIMessage


class PostMessageOut(Out):
    success: Literal[True] = True
    status: Literal["inserted", "updated", "unchanged"]


class MessageListOut(Out):
    messages: list[dict[str, Any]] = Field(description="UI messages, oldest first")
    next_cursor: str | None = Field(
        description="Pass back in the same parameter (`cursor` or `before`) for the next page"
        " in that direction; null at the end"
    )


class DeletedMessagesOut(Out):
    success: Literal[True] = True
    deleted_message_ids: list[str] = Field(description="Oldest first")


class ForkChatIn(Body):
    message_id: str | None = Field(default=None, max_length=200)
    id: ClientId | None = None


class ShareOut(Out):
    share_id: str | None


class SharedChatOut(Out):
    title: str
    messages: list[dict[str, Any]] = Field(
        description="UI messages, oldest first; tool calls on .env files and every secret of a "
        "known shape (keys, tokens, private keys, NAME=value secrets) redacted"
    )


class SharePreviewOut(SharedChatOut):
    redactions: int = Field(description="Secrets redacted by their shape")
    markdown: str = Field(description="The transcript as /api/shared/{shareId}/markdown gives it")


class SharedStatusOut(Out):
    is_streaming: bool


# ------------------------------------------------------------------ sandbox


class EnsureSandboxIn(Body):
    session_id: str = Field(min_length=1, max_length=64)


class EnsureSandboxOut(Out):
    session_id: str
    lifecycle_state: LifecycleState | None
    provisioning_started: bool
    generation: int | None


class ExecIn(Body):
    command: str | None = Field(default=None, min_length=1, max_length=100_000)
    argv: list[str] | None = Field(default=None, min_length=1, max_length=1000)
    cwd: str | None = Field(default=None, max_length=4096)
    env: dict[str, str] | None = None
    timeout_seconds: int = Field(default=60, ge=1, le=600)

    @model_validator(mode="after")
    def one_command(self) -> "ExecIn":
        if (self.command is None) == (self.argv is None):
            raise ValueError("give exactly one of command and argv")
        return self


class ExecOut(Out):
    exit_code: int | None
    stdout: str
    stderr: str
    truncated: bool
    timed_out: bool
    duration_ms: int


class FileEntry(Out):
    path: str
    type: Literal["file", "dir", "symlink"]
    size: int


class FilesOut(Out):
    entries: list[FileEntry]


class FileContentOut(Out):
    path: str
    content: str
    encoding: Literal["utf-8", "base64"]
    size: int
    truncated: bool


class UncommittedFile(Out):
    path: str
    status: str


class GitStatusOut(Out):
    branch: str | None
    is_detached_head: bool
    has_uncommitted_changes: bool
    has_unpushed_commits: bool
    staged_count: int
    unstaged_count: int
    untracked_count: int
    ahead: int
    behind: int
    uncommitted_files: list[UncommittedFile]


class DiffFile(Out):
    path: str
    status: Literal["modified", "added", "renamed", "deleted"]
    additions: int
    deletions: int
    diff: str | None


class DiffOut(Out):
    base: str | None
    files: list[DiffFile]
    total_additions: int
    total_deletions: int


class CachedDiffOut(Out):
    data: DiffOut
    cached_at: datetime
    is_stale: Literal[True] = True


class SessionRef(Body):
    session_id: str = Field(min_length=1, max_length=64)


class ActivityIn(SessionRef):
    turn: Literal["start", "end"] | None = Field(
        default=None, description="An agent marks a turn in progress (start, heartbeat) or done"
    )


class ActivityOut(Out):
    success: bool
    reason: str | None = None
    auto_commit: dict[str, Any] | None = Field(
        default=None,
        description="After `turn: end`: what auto-commit/auto-PR did or why it skipped",
    )


class LifecycleTimes(Out):
    server_time: int = Field(description="Milliseconds since the epoch, as every time here")
    state: LifecycleState | None
    last_activity_at: int | None
    hibernate_after: int | None
    sandbox_expires_at: int | None
    error: str | None
    error_code: str | None = Field(description="Stable code of error (as lifecycleErrorCode)")


class SnapshotInfo(Out):
    id: str
    created_at: int
    size_bytes: int


class SandboxStatusOut(Out):
    status: Literal["active", "paused", "no_sandbox"]
    has_snapshot: bool
    lifecycle_version: int
    lifecycle: LifecycleTimes
    snapshot: SnapshotInfo | None


class ExtendOut(Out):
    success: Literal[True] = True
    expires_at: int
    extended_by: int = Field(description="Milliseconds added")


class PauseOut(Out):
    success: Literal[True] = True
    hibernating: bool


class ResumeOut(Out):
    success: Literal[True] = True
    already_running: bool = False
    restoring: bool = False
    restored_from: str | None = None
