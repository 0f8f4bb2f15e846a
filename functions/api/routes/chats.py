"""/api/sessions/{id}/chats: chats, messages and read markers."""

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query
from openagents.domain.models import Role

from functions.api.deps import App, Caller
from functions.api.lazy_route import AnalysedRoute
from functions.api.schemas import (
    ChatListOut,
    ChatOneOut,
    ChatOut,
    CreateChatIn,
    DeletedMessagesOut,
    ForkChatIn,
    MessageListOut,
    PostMessageIn,
    PostMessageOut,
    ShareOut,
    SharePreviewOut,
    SuccessOut,
    UpdateChatIn,
    error_responses,
)
from functions.api.strict_query import known_query

router = APIRouter(
    route_class=AnalysedRoute,
    prefix="/api/sessions/{session_id}/chats",
    tags=["chats"],
    dependencies=[Depends(known_query)],
)
ERRORS = error_responses()


@router.get("", responses=ERRORS)
def list_chats(session_id: str, app: App, caller: Caller) -> ChatListOut:
    """Chats in creation order, each with its unread flag."""
    views = app.chats.list(caller, session_id)
    default_model = app.sessions.preferences(caller).default_model_id
    return ChatListOut(
        chats=[ChatOut.view(v) for v in views],
        default_model_id=default_model or app.settings.default_model_id,
    )


@router.post("", responses=error_responses(409))
def create_chat(
    session_id: str,
    app: App,
    caller: Caller,
    body: Annotated[CreateChatIn | None, Body()] = None,
) -> ChatOneOut:
    """Create a chat; a client-chosen `id` makes retries idempotent (409 if used elsewhere)."""
    chat = app.chats.create(caller, session_id, body.id if body else None)
    return ChatOneOut(chat=ChatOut.of(chat))


@router.get("/{chat_id}", responses=ERRORS)
def get_chat(session_id: str, chat_id: str, app: App, caller: Caller) -> ChatOneOut:
    return ChatOneOut(chat=ChatOut.view(app.chats.get(caller, session_id, chat_id)))


@router.patch("/{chat_id}", responses=ERRORS)
def update_chat(
    session_id: str, chat_id: str, body: UpdateChatIn, app: App, caller: Caller
) -> ChatOneOut:
    """Rename and/or pick the chat's model: 400 `model_unavailable` on `modelId` unless
    `GET /api/models` offers it."""
    chat = app.chats.update(caller, session_id, chat_id, title=body.title, model_id=body.model_id)
    return ChatOneOut(chat=ChatOut.of(chat))


@router.delete("/{chat_id}", responses=ERRORS)
def delete_chat(session_id: str, chat_id: str, app: App, caller: Caller) -> SuccessOut:
    """Delete a chat and its messages; the last chat of a session cannot be deleted (400)."""
    app.chats.delete(caller, session_id, chat_id)
    return SuccessOut()


@router.get("/{chat_id}/messages", responses=ERRORS)
def list_messages(
    session_id: str,
    chat_id: str,
    app: App,
    caller: Caller,
    limit: Annotated[int | None, Query(ge=0, le=1000)] = None,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
    before: Annotated[
        str | None,
        Query(
            max_length=2048,
            description="`end` for the last page, or a `nextCursor` of a `before` page for"
            " the page before it",
        ),
    ] = None,
) -> MessageListOut:
    """A page of messages, oldest first: after `cursor`, or before `before`."""
    page = app.chats.messages(caller, session_id, chat_id, limit, cursor, before)
    return MessageListOut(messages=[m.parts for m in page.items], next_cursor=page.cursor)


@router.delete("/{chat_id}/messages/{message_id}", responses=error_responses(409))
def delete_messages_from(
    session_id: str, chat_id: str, message_id: str, app: App, caller: Caller
) -> DeletedMessagesOut:
    """Delete a user message and every later one (400 for an assistant message, 409
    `turn_in_progress` while a turn runs)."""
    deleted = app.chats.delete_from(caller, session_id, chat_id, message_id)
    return DeletedMessagesOut(deleted_message_ids=deleted)


@router.post("/{chat_id}/fork", responses=error_responses(409))
def fork_chat(
    session_id: str, chat_id: str, body: ForkChatIn, app: App, caller: Caller
) -> ChatOneOut:
    """A new chat with copies of the messages up to and including the assistant message
    `messageId`; a client `id` makes retries idempotent (409 if used elsewhere)."""
    chat = app.chats.fork(caller, session_id, chat_id, body.message_id or "", body.id)
    return ChatOneOut(chat=ChatOut.of(chat))


@router.get("/{chat_id}/share", responses=ERRORS)
def get_share(session_id: str, chat_id: str, app: App, caller: Caller) -> ShareOut:
    return ShareOut(share_id=app.shares.get(caller, session_id, chat_id))


@router.get("/{chat_id}/share/preview", responses=ERRORS)
def preview_share(session_id: str, chat_id: str, app: App, caller: Caller) -> SharePreviewOut:
    """What the chat's share link shows (or will show, once created): the redacted transcript,
    as JSON and as Markdown, and how many secrets were redacted."""
    shared = app.shares.preview(caller, session_id, chat_id)
    return SharePreviewOut(
        title=shared.title,
        messages=shared.messages,
        redactions=shared.redactions,
        markdown=shared.markdown,
    )


@router.post("/{chat_id}/share", responses=ERRORS)
def create_share(session_id: str, chat_id: str, app: App, caller: Caller) -> ShareOut:
    """The chat's public share link, created once (the same id on every call)."""
    return ShareOut(share_id=app.shares.create(caller, session_id, chat_id))


@router.delete("/{chat_id}/share", responses=ERRORS)
def revoke_share(session_id: str, chat_id: str, app: App, caller: Caller) -> SuccessOut:
    """Revoke the link (idempotent): `/api/shared/{shareId}` answers 404 from now on."""
    app.shares.revoke(caller, session_id, chat_id)
    return SuccessOut()


@router.post(
    "/{chat_id}/messages",
    responses=error_responses(409, 413),
)
def post_message(
    session_id: str, chat_id: str, body: PostMessageIn, app: App, caller: Caller
) -> PostMessageOut:
    """Store a user or assistant UI message. Assistant messages upsert by id within the chat
    and role (409 across); user messages are written once and refresh session activity."""
    message = body.message
    result = app.chats.post_message(
        caller,
        session_id,
        chat_id,
        message_id=message.id,
        role=Role(message.role),
        ui_message=message.model_dump(mode="json", exclude_none=True),
    )
    return PostMessageOut(status=result)


@router.post("/{chat_id}/read", responses=ERRORS)
def mark_read(session_id: str, chat_id: str, app: App, caller: Caller) -> SuccessOut:
    app.chats.mark_read(caller, session_id, chat_id)
    return SuccessOut()
