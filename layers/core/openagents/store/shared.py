"""What both store adapters share besides the keys (``keys``): time formats, the session's chat
marks as stored maps, the list projection, the item size limit, page cutting and the first
message's chat title. No PynamoDB here: the SQLite adapter imports this module."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar

from openagents.domain.models import Chat, ChatMark, Message, Page, Role
from openagents.domain.naming import chat_title_from_text
from openagents.store import cursor

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
