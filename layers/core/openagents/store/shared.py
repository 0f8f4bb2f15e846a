"""The rules both store adapters keep, written once (each adapter holds only what is specific
to its engine): time formats, the session's chat marks as stored maps, the list projection,
the item size limit, page cutting, the message body codec (``MessageBodies``), what inserting a
message changes (``message_insert``, with the first message's chat title), a user's chat edit,
"a generated title replaces only an automatic one", an archive's changes (``status_change``)
and which message starts a deletion. No PynamoDB here: the SQLite adapter imports this module."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from openagents.artifacts import ArtifactStore
from openagents.domain.models import (
    Chat,
    ChatMark,
    LifecycleState,
    Message,
    Page,
    Role,
    Session,
    SessionStatus,
    TitleSource,
)
from openagents.domain.naming import chat_title_from_text
from openagents.store import cursor
from openagents.store.port import (
    Activity,
    NoSuchMessage,
    NotUserMessage,
    check_lifecycle_fields,
)

LIST_FIELDS = [
    "id",
    "title",
    "status",
    "repoOwner",
    "repoName",
    "branch",
    "linesAdded",
    "linesRemoved",
    "prNumber",
    "prStatus",
    "lifecycleState",
    "createdAt",
    "updatedAt",
    "chats",
]  # fmt: skip  (userId is a key of byUser and part of userStatus: never a projected attribute)
ITEM_LIMIT_BYTES = 400 * 1024  # DynamoDB's item size limit, which both adapters keep


def iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def iso_or_none(value: datetime | None) -> str | None:
    return None if value is None else iso(value)


def parse_dt(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


T = TypeVar("T")


def page_of(items: list[T], limit: int, sort_key: Callable[[T], str]) -> Page[T]:
    """Items were fetched with ``limit + 1``: the extra one only tells that more exist."""
    if len(items) <= limit:
        return Page[T](items=items, cursor=None)
    kept = items[:limit]
    return Page[T](items=kept, cursor=cursor.encode(sort_key(kept[-1])))


def first_message_title(chat: Chat, message: Message) -> str | None:
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


def chat_mark(chat: Chat, *, read: bool = False) -> ChatMark:
    """A new chat's entry on its session; ``read``: already read by its owner (a fork)."""
    return ChatMark(
        created_at=chat.created_at,
        updated_at=chat.updated_at,
        last_assistant_message_at=chat.last_assistant_message_at,
        last_read_at=chat.created_at if read else None,
    )


def mark_map(mark: ChatMark) -> dict[str, Any]:
    return {
        key: value
        for key, value in {
            "createdAt": iso(mark.created_at),
            "updatedAt": iso(mark.updated_at),
            "lastAssistantMessageAt": iso_or_none(mark.last_assistant_message_at),
            "lastReadAt": iso_or_none(mark.last_read_at),
            "streaming": True if mark.streaming else None,
        }.items()
        if value is not None
    }


def marks_of(data: dict[str, Any]) -> dict[str, ChatMark]:
    return {
        chat_id: ChatMark(
            created_at=datetime.fromisoformat(entry["createdAt"]),
            updated_at=datetime.fromisoformat(entry["updatedAt"]),
            last_assistant_message_at=parse_dt(entry.get("lastAssistantMessageAt")),
            last_read_at=parse_dt(entry.get("lastReadAt")),
            streaming=bool(entry.get("streaming", False)),
        )
        for chat_id, entry in data.items()
    }


# --- message bodies ---------------------------------------------------------------------------


class MessageBodies:
    """The body codec both adapters keep: a message's UI message as compact JSON, inline up to
    ``inline_bytes``, else in the artifact store under ``messages/<chat>/<message>/<nonce>``
    (written before the transaction that names it, dropped when that transaction does not)."""

    def __init__(self, artifacts: ArtifactStore, inline_bytes: int) -> None:
        self._artifacts = artifacts
        self._inline = inline_bytes

    def stage_body(self, message: Message) -> tuple[str | None, str | None]:
        """The body inline, or the key of the artifact it was written to."""
        body, body_ref, _ = self.staged(message)
        return body, body_ref

    def staged(self, message: Message) -> tuple[str | None, str | None, int]:
        """``stage_body`` with the body's size in bytes (what the user's storage counts)."""
        body = json.dumps(message.parts, separators=(",", ":"), ensure_ascii=False)
        data = body.encode()
        if len(data) <= self._inline:
            return body, None, len(data)
        key = f"messages/{message.chat_id}/{message.id}/{secrets.token_hex(8)}.json"
        self._artifacts.put(key, data)
        return None, key, len(data)

    def drop_body(self, body_ref: str | None) -> None:
        if body_ref:
            self._artifacts.delete(body_ref)

    def segment(self, message: Message, start: int) -> tuple[str, int] | None:
        """The message's parts from ``start`` on as a segment's body (the UI message with only
        those parts) and its size; None when no segment can stand for the change (nothing is
        kept before ``start``, or the segment is larger than a body kept inline: the whole
        body is written then)."""
        parts = message.parts.get("parts")
        if not isinstance(parts, list) or not 0 < start <= len(parts):
            return None
        body = json.dumps(
            {**message.parts, "parts": parts[start:]}, separators=(",", ":"), ensure_ascii=False
        )
        size = len(body.encode())
        return None if size > self._inline else (body, size)

    def message(
        self,
        message_id: str,
        chat_id: str,
        role: str,
        body: str | None,
        body_ref: str | None,
        created_at: str,
        segments: Sequence[Segment] = (),
    ) -> Message:
        """A stored message back (its body read from the artifact store when not inline, its
        segments laid over it)."""
        text = body if body is not None else self._artifacts.get(str(body_ref)).decode()
        return Message(
            id=message_id,
            chat_id=chat_id,
            role=Role(role),
            parts=assembled(json.loads(text), segments),
            created_at=datetime.fromisoformat(created_at),
        )


@dataclass(frozen=True)
class Segment:
    """One step's write of a live assistant message: its parts from ``start`` on (the parts
    before stay as the body and the earlier segments hold them), and the message's other
    fields (metadata) as that step left them. A turn's steps write segments instead of the
    whole message, so a step's write is the size of what the step changed; the turn's end
    writes the whole message once, which replaces them."""

    start: int
    body: str  # JSON: the UI message with only the parts from ``start`` on


def assembled(body: dict[str, Any], segments: Sequence[Segment]) -> dict[str, Any]:
    """The UI message ``body`` with ``segments`` (in the order they were written) laid over
    it: each keeps the parts before its ``start`` and puts its own after them."""
    if not segments:
        return body
    message = body
    parts = list(body.get("parts") or [])
    for segment in segments:
        message = json.loads(segment.body)
        parts = parts[: segment.start] + list(message.get("parts") or [])
    return {**message, "parts": parts}


# --- what a write changes ------------------------------------------------------------------


@dataclass(frozen=True)
class MessageInsert:
    """What inserting a message changes besides the message: its chat (count, times, the
    title a first user message gives it) and the session's mark of that chat (times), and the
    session's activity when a user message refreshes it."""

    at: datetime
    count: int  # the chat's message count after the insert
    title: str | None  # the chat's first message names the chat
    assistant: bool  # an assistant message: the chat's last-assistant time moves
    activity: Activity | None

    def chat_changes(self) -> dict[str, Any]:
        changes: dict[str, Any] = {"updated_at": self.at, "message_count": self.count}
        if self.title is not None:
            changes["title"] = self.title
        if self.assistant:
            changes["last_assistant_message_at"] = self.at
        return changes

    def mark_changes(self) -> dict[str, Any]:
        changes: dict[str, Any] = {"updated_at": self.at}
        if self.assistant:
            changes["last_assistant_message_at"] = self.at
        return changes


def message_insert(chat: Chat, message: Message, activity: Activity | None) -> MessageInsert:
    return MessageInsert(
        at=message.created_at,
        count=chat.message_count + 1,
        title=first_message_title(chat, message),
        assistant=message.role is Role.ASSISTANT,
        activity=activity,
    )


def chat_edit(title: str | None, model_id: str | None, at: datetime) -> dict[str, Any]:
    """A user's edit of a chat: its title (now the user's) and model, and its time."""
    changes: dict[str, Any] = {"updated_at": at}
    if title is not None:
        changes |= {"title": title, "title_source": TitleSource.USER}
    if model_id is not None:
        changes["model_id"] = model_id
    return changes


def title_is_automatic(source: TitleSource | None) -> bool:
    """A generated title replaces only an automatic one (a title with no recorded source is)."""
    return source in (None, TitleSource.AUTO)


def generated_title_applies(stored: TitleSource | None, stored_title: str, read: str) -> bool:
    """A session's generated title: over an automatic title, and only the one its caller read
    (a rename in between wins)."""
    return title_is_automatic(stored) and stored_title == read


@dataclass(frozen=True)
class StatusChange:
    """An archive or unarchive: the session's fields after it (lifecycle fields checked) and
    the change of its owner's archived count."""

    update: dict[str, Any]
    archived_delta: int

    def applied(self, session: Session) -> Session:
        known = {name: value for name, value in self.update.items() if name in Session.model_fields}
        return session.model_copy(update=known)


def status_change(
    session: Session,
    status: SessionStatus,
    lifecycle_state: LifecycleState | None,
    at: datetime,
    changes: Mapping[str, Any] | None,
) -> StatusChange:
    extra = dict(changes or {})
    extra.pop("lifecycle_state", None)
    check_lifecycle_fields(extra)
    delta = (status is SessionStatus.ARCHIVED) - (session.status is SessionStatus.ARCHIVED)
    update = {**extra, "status": status, "lifecycle_state": lifecycle_state, "updated_at": at}
    return StatusChange(update=update, archived_delta=delta)


def deletion_target(role: str | None) -> None:
    """Only a user message of the chat starts a deletion: ``NoSuchMessage`` (None: not in the
    chat), ``NotUserMessage``."""
    if role is None:
        raise NoSuchMessage
    if role != Role.USER.value:
        raise NotUserMessage
