"""Domain objects for the contract tests."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from openagents.domain.models import (
    AuditEntry,
    Chat,
    ChatMark,
    Message,
    Role,
    SandboxHandle,
    Session,
)
from openagents.store.port import RateWindow, Store


def new_objects(
    user_id: str,
    title: str,
    suffix: str | None = None,
    *,
    limit: int = 1000,
    action: str | None = None,
    at: datetime | None = None,
) -> tuple[Session, Chat, AuditEntry, RateWindow]:
    suffix = suffix or uuid.uuid4().hex[:10]
    now = at or datetime.now(UTC)
    chat = Chat(
        id=f"chat-{suffix}",
        session_id=f"sess-{suffix}",
        title="New chat",
        created_at=now,
        updated_at=now,
    )
    session = Session(
        id=f"sess-{suffix}",
        user_id=user_id,
        title=title,
        created_at=now,
        updated_at=now,
        chats={chat.id: ChatMark(created_at=now, updated_at=now)},
    )
    entry = AuditEntry(
        id=f"evt-{suffix}", session_id=session.id, at=now, type="session.created", detail={}
    )
    rate = RateWindow(action=action or f"test-{suffix}", at=now, seconds=3600, limit=limit)
    return session, chat, entry, rate


def create(store: Store, user_id: str = "alice", title: str | None = None, **kw: Any) -> Session:
    """A session (with its first chat) through the store's create transaction."""
    session, chat, entry, rate = new_objects(user_id, title or f"T {uuid.uuid4().hex[:6]}", **kw)
    store.create_session(session, chat, entry, claim_title=True, rate=rate)
    return session


def entry(session_id: str, kind: str = "test.event", at: datetime | None = None) -> AuditEntry:
    return AuditEntry(
        id=uuid.uuid4().hex[:12],
        session_id=session_id,
        at=at or datetime.now(UTC),
        type=kind,
        detail={"n": 1},
    )


def new_chat(session_id: str, chat_id: str | None = None) -> Chat:
    now = datetime.now(UTC)
    return Chat(
        id=chat_id or f"chat-{uuid.uuid4().hex[:10]}",
        session_id=session_id,
        title="New chat",
        created_at=now,
        updated_at=now,
    )


def message(
    chat: Chat,
    message_id: str,
    role: Role = Role.ASSISTANT,
    text: str = "hi",
    at: datetime | None = None,
) -> Message:
    return Message(
        id=message_id,
        chat_id=chat.id,
        role=role,
        parts={"id": message_id, "role": role.value, "parts": [{"type": "text", "text": text}]},
        created_at=at or datetime.now(UTC),
    )


def sandbox_handle(session_id: str, generation: int = 1) -> SandboxHandle:
    return SandboxHandle(driver="local", session_id=session_id, generation=generation, ref="4242")
