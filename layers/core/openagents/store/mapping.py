"""The mapping between PynamoDB items and domain models (store internals; their keys are
built in ``keys``)."""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from typing import Any

from pynamodb.attributes import MapAttribute
from pynamodb.expressions.update import Action

from openagents.domain.lifecycle import index_fields
from openagents.domain.models import (
    AuditEntry,
    Chat,
    ChatMark,
    Model,
    Session,
    TitleSource,
    pr_key,
)
from openagents.events import Event, from_entry
from openagents.store.items import (
    OUTBOX_EVENT_ATTRIBUTE,
    OUTBOX_TTL_SECONDS,
    AuditItem,
    ChatItem,
    OutboxItem,
    SessionItem,
)
from openagents.store.keys import chat_key, created_key, event_key, outbox_key, session_key
from openagents.store.shared import iso, iso_or_none, mark_map, marks_of, parse_dt


def set_or_remove(name: str, value: Any) -> Action:
    attribute = getattr(SessionItem, name)
    if value is None:
        return attribute.remove()  # type: ignore[no-any-return]
    if isinstance(value, datetime):
        value = iso(value)
    elif isinstance(value, StrEnum):
        value = value.value
    elif isinstance(value, Model):
        value = stored_map(value)
    return attribute.set(value)  # type: ignore[no-any-return]


def stored_map(ref: Model | None) -> dict[str, Any] | None:
    """A sandbox, snapshot or bundle ref as the session item's map keeps it."""
    return None if ref is None else ref.model_dump(mode="json", by_alias=True)


def plain(raw: Any) -> dict[str, Any]:
    """A raw MapAttribute (or a plain dict) as a plain dict."""
    if isinstance(raw, MapAttribute):
        return dict(raw.as_dict())  # type: ignore[no-untyped-call]
    return dict(raw or {})


def marks(raw: Any) -> dict[str, ChatMark]:
    return marks_of(plain(raw))


def session_item(session: Session, model: type[SessionItem] = SessionItem) -> SessionItem:
    index = index_fields(session)
    return model(
        *session_key(session.id),
        id=session.id,
        user_id=session.user_id,
        user_status=f"{session.user_id}#{session.status.value}",
        created_key=created_key(session),
        title=session.title,
        title_source=session.title_source.value,
        status=session.status.value,
        repo_owner=session.repo_owner,
        repo_name=session.repo_name,
        clone_url=session.clone_url,
        branch=session.branch,
        is_new_branch=session.is_new_branch,
        own_branch=session.own_branch,
        auto_commit_push_override=session.auto_commit_push_override,
        auto_create_pr_override=session.auto_create_pr_override,
        ask_before_bash=session.ask_before_bash,
        lifecycle_state=session.lifecycle_state.value if session.lifecycle_state else None,
        lifecycle_version=session.lifecycle_version,
        lifecycle_error=session.lifecycle_error,
        lifecycle_error_code=session.lifecycle_error_code,
        last_activity_at=iso_or_none(session.last_activity_at),
        hibernate_after=iso_or_none(session.hibernate_after),
        sandbox_expires_at=iso_or_none(session.sandbox_expires_at),
        lines_added=session.lines_added,
        lines_removed=session.lines_removed,
        pr_number=session.pr_number,
        pr_status=session.pr_status.value if session.pr_status else None,
        created_at=iso(session.created_at),
        updated_at=iso(session.updated_at),
        chats={chat_id: mark_map(mark) for chat_id, mark in session.chats.items()},
        chat_count=len(session.chats),
        owner_name=session.owner_name,
        owner_email=session.owner_email,
        sandbox=stored_map(session.sandbox),
        sandbox_generation=session.sandbox_generation,
        cached_diff_at=iso_or_none(session.cached_diff_at),
        lifecycle_run_id=session.lifecycle_run_id,
        snapshot=stored_map(session.snapshot),
        turn_active_until=iso_or_none(session.turn_active_until),
        hibernated_at=iso_or_none(session.hibernated_at),
        due_shard=index["due_shard"],  # a new session being provisioned is in the overdue index
        due_at=iso_or_none(index["due_at"]),
        bundle=stored_map(session.bundle),
        archive_pending=session.archive_pending,
        pr_key=pr_key(session.repo_owner, session.repo_name, session.pr_number),
    )


def to_session(item: SessionItem) -> Session:
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
        "own_branch": item.own_branch,
        "auto_commit_push_override": item.auto_commit_push_override,
        "auto_create_pr_override": item.auto_create_pr_override,
        "ask_before_bash": bool(item.ask_before_bash),
        "lifecycle_state": item.lifecycle_state,
        "lifecycle_version": int(item.lifecycle_version or 0),
        "lifecycle_error": item.lifecycle_error,
        "lifecycle_error_code": item.lifecycle_error_code,
        "last_activity_at": parse_dt(item.last_activity_at),
        "hibernate_after": parse_dt(item.hibernate_after),
        "sandbox_expires_at": parse_dt(item.sandbox_expires_at),
        "lines_added": None if item.lines_added is None else int(item.lines_added),
        "lines_removed": None if item.lines_removed is None else int(item.lines_removed),
        "pr_number": None if item.pr_number is None else int(item.pr_number),
        "pr_status": item.pr_status,
        "created_at": datetime.fromisoformat(item.created_at),
        "updated_at": datetime.fromisoformat(item.updated_at),
        "chats": marks(item.chats),
        "owner_name": item.owner_name,
        "owner_email": item.owner_email,
        "sandbox": plain(item.sandbox) if item.sandbox is not None else None,
        "sandbox_generation": int(item.sandbox_generation or 0),
        "cached_diff_at": parse_dt(item.cached_diff_at),
        "lifecycle_run_id": item.lifecycle_run_id,
        "snapshot": plain(item.snapshot) if item.snapshot is not None else None,
        "turn_active_until": parse_dt(item.turn_active_until),
        "hibernated_at": parse_dt(item.hibernated_at),
        "bundle": plain(item.bundle) if item.bundle is not None else None,
        "archive_pending": item.archive_pending,
    }
    if item.title_source is not None:  # absent from list projections and older items
        values["title_source"] = item.title_source
    return Session.model_validate(values)


def chat_item(chat: Chat, model: type[ChatItem] = ChatItem) -> ChatItem:
    return model(
        *chat_key(chat.session_id, chat.id),
        id=chat.id,
        session_id=chat.session_id,
        title=chat.title,
        title_source=chat.title_source.value,
        model_id=chat.model_id,
        active_stream_id=chat.active_stream_id,
        last_assistant_message_at=iso_or_none(chat.last_assistant_message_at),
        message_count=chat.message_count,
        share_id=chat.share_id,
        created_at=iso(chat.created_at),
        updated_at=iso(chat.updated_at),
    )


def to_chat(item: ChatItem) -> Chat:
    return Chat(
        id=item.id,
        session_id=item.session_id,
        title=item.title,
        title_source=TitleSource(item.title_source or TitleSource.AUTO),
        model_id=item.model_id,
        active_stream_id=item.active_stream_id,
        last_assistant_message_at=parse_dt(item.last_assistant_message_at),
        message_count=int(item.message_count or 0),
        share_id=item.share_id,
        created_at=datetime.fromisoformat(item.created_at),
        updated_at=datetime.fromisoformat(item.updated_at),
    )


def audit_item(entry: AuditEntry, model: type[AuditItem] = AuditItem) -> AuditItem:
    return model(
        *event_key(entry),
        id=entry.id,
        session_id=entry.session_id,
        at=iso(entry.at),
        type=entry.type,
        detail=entry.detail,
    )


def to_audit(item: AuditItem) -> AuditEntry:
    detail = plain(item.detail)
    return AuditEntry(
        id=item.id,
        session_id=item.session_id,
        at=datetime.fromisoformat(item.at),
        type=item.type,
        detail=detail,
    )


def outbox_item(
    entry: AuditEntry, user_id: str, model: type[OutboxItem] = OutboxItem
) -> OutboxItem:
    """The domain event of ``entry``, written in the same transaction as the entry (the stream
    and the pipe publish it; it expires after ``OUTBOX_TTL_SECONDS``)."""
    event = from_entry(entry, user_id)
    return model(
        *outbox_key(entry),
        event=json.dumps(event.detail),  # what EventBridgeBus sent as PutEvents' Detail
        detail_type=event.detail_type,
        expires_at=int(entry.at.timestamp()) + OUTBOX_TTL_SECONDS,
    )


def to_event(item: OutboxItem) -> Event:
    detail: dict[str, Any] = json.loads(item.event)
    return Event(
        detail_type=item.detail_type,
        detail=detail,
        time=datetime.fromisoformat(detail["time"]),
    )


def stream_detail(record: dict[str, Any]) -> dict[str, Any]:
    """The event ``detail`` of one DynamoDB stream record of an outbox item (NEW_IMAGE), as the
    pipe's enrichment returns it to the bus target."""
    image = record["dynamodb"]["NewImage"]
    detail: dict[str, Any] = json.loads(image[OUTBOX_EVENT_ATTRIBUTE]["S"])
    return detail
