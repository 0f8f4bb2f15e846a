"""Chats, messages and read markers of one session (reference §2.2, §6.2, §6.4, §6.8)."""

from __future__ import annotations

import builtins
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from openagents.domain import validation
from openagents.domain.errors import (
    Conflict,
    DomainError,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    SessionArchived,
    StorageFull,
    TurnConflict,
)
from openagents.domain.identity import Identity
from openagents.domain.lifecycle import with_due
from openagents.domain.models import Chat, Message, Page, Role, Session, SessionStatus, TitleSource
from openagents.services import Clock, IdFactory, Metrics, OfferedModel
from openagents.services.sessions import FIRST_CHAT_TITLE, owned
from openagents.settings import Settings
from openagents.store.port import (
    Activity,
    BadCursor,
    ChatIdTaken,
    Gone,
    LastChat,
    MessageIdTaken,
    NoSuchMessage,
    NotUserMessage,
    Store,
    TooManyChats,
    UpsertResult,
)
from openagents.store.runs import TurnMessage

MESSAGES_DEFAULT_LIMIT = 100
MESSAGES_MAX_LIMIT = 500
FORK_PREFIX = "Fork of "


class LiveTurns(Protocol):
    """What the chats need of the run store: is a turn live in a chat?"""

    def active_run_id(self, session_id: str, chat_id: str) -> str | None: ...


@dataclass(frozen=True)
class ChatView:
    chat: Chat
    has_unread: bool


def message_error(error: MessageIdTaken | Gone | StorageFull) -> DomainError:
    """The API's answer to a message the store refused (413 ``storage_full`` naming what to
    delete when it would pass the user's storage)."""
    if isinstance(error, StorageFull):
        error.field = "message"
        return error
    if isinstance(error, MessageIdTaken):
        return Conflict(
            "Message ID already belongs to a different chat or role", field="message.id"
        )
    return NotFound("Chat not found")


class ChatService:
    def __init__(
        self,
        store: Store,
        settings: Settings,
        clock: Clock,
        ids: IdFactory,
        metrics: Metrics,
        turns: LiveTurns,
        offered: OfferedModel,
    ) -> None:
        self._store = store
        self._turns = turns
        self._offered = offered
        self._settings = settings
        self._clock = clock
        self._ids = ids
        self._metrics = metrics

    def _session(self, identity: Identity, session_id: str) -> Session:
        return owned(self._store.get_session(session_id), identity)

    def chat(self, identity: Identity, session_id: str, chat_id: str) -> tuple[Session, Chat]:
        """The caller's chat of the caller's session (404 otherwise)."""
        return self._chat(identity, session_id, chat_id)

    def _chat(self, identity: Identity, session_id: str, chat_id: str) -> tuple[Session, Chat]:
        session = self._session(identity, session_id)
        chat = self._store.get_chat(session.id, chat_id)
        if chat is None:
            raise NotFound("Chat not found")
        return session, chat

    def list(self, identity: Identity, session_id: str) -> list[ChatView]:
        session = self._session(identity, session_id)
        return [self._view(session, chat) for chat in self._store.list_chats(session.id)]

    def get(self, identity: Identity, session_id: str, chat_id: str) -> ChatView:
        session, chat = self._chat(identity, session_id, chat_id)
        return self._view(session, chat)

    def create(self, identity: Identity, session_id: str, chat_id: str | None) -> Chat:
        session = self._session(identity, session_id)
        now = self._clock()
        prefs = self._store.get_user(identity.user_id).preferences
        chat = Chat(
            id=chat_id or self._ids(),
            session_id=session.id,
            title=FIRST_CHAT_TITLE,
            model_id=prefs.default_model_id or self._settings.new_chat_model,
            created_at=now,
            updated_at=now,
        )
        try:
            self._store.create_chat(session, chat, self._settings.max_chats_per_session)
        except ChatIdTaken as exc:
            existing = self._store.get_chat(session.id, chat.id)
            if exc.session_id == session.id and existing is not None:
                return existing  # idempotent retry of the same create
            raise Conflict("Chat ID conflict", field="id") from None
        except TooManyChats:
            limit = self._settings.max_chats_per_session
            raise Conflict(f"A session holds at most {limit} chats") from None
        except Gone:
            raise NotFound("Session not found") from None
        self._metrics.count("ChatCreated")
        return chat

    def update(
        self,
        identity: Identity,
        session_id: str,
        chat_id: str,
        *,
        title: str | None,
        model_id: str | None,
    ) -> Chat:
        title = title.strip() if title is not None else None
        model_id = model_id.strip() if model_id is not None else None
        if not title and not model_id:
            raise InvalidInput("At least one field is required", field="title")
        if title:
            title = validation.title(title)
        _, chat = self._chat(identity, session_id, chat_id)
        if model_id:
            model_id = self._offered(model_id, "modelId")
        try:
            return self._store.update_chat(
                chat, title=title or None, model_id=model_id or None, at=self._clock()
            )
        except Gone:
            raise NotFound("Chat not found") from None

    def delete(self, identity: Identity, session_id: str, chat_id: str) -> None:
        session, chat = self._chat(identity, session_id, chat_id)
        try:
            self._store.delete_chat(session, chat.id)
        except LastChat:
            raise InvalidInput("Cannot delete the only chat in a session", field="chatId") from None
        except Gone:
            raise NotFound("Chat not found") from None

    def mark_read(self, identity: Identity, session_id: str, chat_id: str) -> None:
        session, chat = self._chat(identity, session_id, chat_id)
        try:
            self._store.mark_read(session, chat.id, self._clock())
        except Gone:
            raise NotFound("Chat not found") from None

    def post_message(
        self,
        identity: Identity,
        session_id: str,
        chat_id: str,
        *,
        message_id: str,
        role: Role,
        ui_message: dict[str, Any],
    ) -> UpsertResult:
        turn = self.new_message(identity, session_id, chat_id, message_id, role, ui_message)
        try:
            result = self._store.put_message(
                turn.session, turn.chat, turn.message, activity=turn.activity
            )
        except (MessageIdTaken, Gone, StorageFull) as error:
            raise message_error(error) from None
        if result == "inserted":
            self.count(role)
        return result

    def new_message(
        self,
        identity: Identity,
        session_id: str,
        chat_id: str,
        message_id: str,
        role: Role,
        ui_message: dict[str, Any],
    ) -> TurnMessage:
        """A checked message of the caller's chat, with the activity a user message refreshes
        (polls never do), ready to store."""
        try:
            size = len(json.dumps(ui_message, separators=(",", ":"), ensure_ascii=False).encode())
        except UnicodeEncodeError:  # a lone surrogate: valid JSON, not storable text
            raise InvalidInput("Message contains invalid Unicode", field="message") from None
        if size > self._settings.max_message_bytes:
            raise PayloadTooLarge(
                f"Message is {size} bytes; the limit is {self._settings.max_message_bytes}",
                field="message",
            )
        session, chat = self._chat(identity, session_id, chat_id)
        if session.status is SessionStatus.ARCHIVED:
            raise SessionArchived("Session is archived; unarchive it first", field="sessionId")
        now = self._clock()
        activity = None
        if role is Role.USER:  # user messages keep the sandbox awake
            hibernate_after = now + timedelta(seconds=self._settings.idle_timeout_seconds)
            due = with_due(session, {"hibernate_after": hibernate_after})
            activity = Activity(
                at=now,
                hibernate_after=hibernate_after,
                due_at=due["due_at"],
                due_shard=due["due_shard"],
            )
        message = Message(
            id=message_id, chat_id=chat.id, role=role, parts=ui_message, created_at=now
        )
        return TurnMessage(session, chat, message, activity)

    def count(self, role: Role) -> None:
        """The business metric of a stored message."""
        self._metrics.count("UserMessage" if role is Role.USER else "AssistantMessage")

    def messages(
        self,
        identity: Identity,
        session_id: str,
        chat_id: str,
        limit: int | None,
        cursor: str | None,
        before: str | None = None,
    ) -> Page[Message]:
        """A page oldest first: after ``cursor``, or before ``before`` (``"end"``: the last
        page); the page's cursor continues in the same direction."""
        if cursor is not None and before is not None:
            raise InvalidInput("Pass cursor or before, not both", field="before")
        _, chat = self._chat(identity, session_id, chat_id)
        size = min(
            max(limit if limit is not None else MESSAGES_DEFAULT_LIMIT, 1), MESSAGES_MAX_LIMIT
        )
        backward = before is not None
        start = (before if before != "end" else None) if backward else cursor
        try:
            return self._store.list_messages(chat.session_id, chat.id, size, start, before=backward)
        except BadCursor:
            raise InvalidInput("Invalid cursor", field="before" if backward else "cursor") from None

    def all_messages(self, chat: Chat) -> builtins.list[Message]:
        """Every message of a chat the caller already holds, oldest first."""
        found: builtins.list[Message] = []
        cursor: str | None = None
        while True:
            page = self._store.list_messages(chat.session_id, chat.id, MESSAGES_MAX_LIMIT, cursor)
            found += page.items
            if page.cursor is None:
                return found
            cursor = page.cursor

    def delete_from(
        self, identity: Identity, session_id: str, chat_id: str, message_id: str
    ) -> builtins.list[str]:
        """Delete a user message and every later one (edit and resend); 409 while a turn runs."""
        session, chat = self._chat(identity, session_id, chat_id)
        if self._turns.active_run_id(chat.session_id, chat.id) is not None:
            raise TurnConflict(
                "Cannot delete messages while a response is streaming", field="chatId"
            )
        try:
            return self._store.delete_messages_from(session, chat, message_id, self._clock())
        except NoSuchMessage:
            raise NotFound("Message not found", field="messageId") from None
        except NotUserMessage:
            raise InvalidInput("Only user messages can be deleted", field="messageId") from None
        except Gone:
            raise NotFound("Chat not found") from None

    def fork(
        self,
        identity: Identity,
        session_id: str,
        chat_id: str,
        message_id: str,
        fork_id: str | None,
    ) -> Chat:
        """A new chat in the session with copies (new ids) of the messages up to and including
        the assistant message ``message_id``; the same ``fork_id`` again returns that chat."""
        session, source = self._chat(identity, session_id, chat_id)
        message_id = message_id.strip()
        if not message_id:
            raise InvalidInput("A messageId is required", field="messageId")
        if fork_id is not None:
            existing = self._existing(session, fork_id)
            if existing is not None:
                return existing
        chat, copies = self._copy_through(session, source, message_id, fork_id)
        try:
            self._store.fork_chat(session, chat, copies, self._settings.max_chats_per_session)
        except ChatIdTaken:
            existing = self._existing(session, chat.id)
            if existing is None:
                raise
            return existing  # a concurrent retry of the same fork won
        except TooManyChats:
            limit = self._settings.max_chats_per_session
            raise Conflict(f"A session holds at most {limit} chats") from None
        except Gone:
            raise NotFound("Session not found") from None
        self._metrics.count("ChatForked")
        return chat

    def _copy_through(
        self, session: Session, source: Chat, message_id: str, fork_id: str | None
    ) -> tuple[Chat, builtins.list[Message]]:
        """The fork and its copies of the source's messages up to ``message_id``."""
        history = self.all_messages(source)
        through = next((i for i, m in enumerate(history) if m.id == message_id), None)
        if through is None:
            raise NotFound("Message not found", field="messageId")
        if history[through].role is not Role.ASSISTANT:
            raise InvalidInput("Only assistant messages can be forked", field="messageId")
        now = self._clock()
        chat = Chat(
            id=fork_id or self._ids(),
            session_id=session.id,
            title=(FORK_PREFIX + source.title)[: validation.MAX_TITLE_LENGTH],
            title_source=TitleSource.GIVEN,  # never replaced by a generated title
            model_id=source.model_id,
            last_assistant_message_at=history[through].created_at,
            message_count=through + 1,
            created_at=now,
            updated_at=now,
        )
        copies: builtins.list[Message] = []
        for original in history[: through + 1]:
            new_id = self._ids()
            parts = {**original.parts, "id": new_id}
            copies.append(
                original.model_copy(update={"id": new_id, "chat_id": chat.id, "parts": parts})
            )
        return chat, copies

    def _existing(self, session: Session, chat_id: str) -> Chat | None:
        """The session's chat of that id (a retry); 409 if the id is another session's."""
        owner = self._store.chat_session(session.user_id, chat_id)
        if owner is None:
            return None
        existing = self._store.get_chat(session.id, chat_id) if owner == session.id else None
        if existing is None:
            raise Conflict("Chat ID conflict", field="id")
        return existing

    @staticmethod
    def _view(session: Session, chat: Chat) -> ChatView:
        mark = session.chats.get(chat.id)
        return ChatView(chat=chat, has_unread=bool(mark and mark.has_unread))
