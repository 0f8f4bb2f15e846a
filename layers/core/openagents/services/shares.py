"""Public share links of chats (reference §2.2, §6.9): the owner creates, reads and revokes a
chat's link; anyone holding it reads the transcript and whether a turn is live. The transcript
is redacted twice: tool calls on `.env` files (``transcript.redact``), then every secret of a
known shape wherever it appears (``domain/secrets.py``); the owner sees the same beforehand
(``preview``)."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from openagents.domain import transcript
from openagents.domain.errors import NotFound
from openagents.domain.identity import Identity
from openagents.domain.models import Chat
from openagents.domain.secrets import Redactor, scrubbed, strings
from openagents.services.chats import ChatService, LiveTurns
from openagents.store.port import Gone, ShareStore

SHARE_ID_BYTES = 12  # 96 bits from `secrets`, 16 URL-safe characters


def new_share_id() -> str:
    return secrets.token_urlsafe(SHARE_ID_BYTES)


@dataclass(frozen=True)
class SharedChat:
    title: str
    messages: list[dict[str, Any]]  # UI messages, oldest first, redacted
    redactions: int  # secrets redacted by their shape (the .env tool calls not counted)

    @property
    def markdown(self) -> str:
        return transcript.markdown(self.title, self.messages)


class ShareService:
    def __init__(
        self,
        store: ShareStore,
        chats: ChatService,
        turns: LiveTurns,
        share_ids: Callable[[], str] = new_share_id,
    ) -> None:
        self._store = store
        self._chats = chats
        self._turns = turns
        self._share_ids = share_ids

    def get(self, identity: Identity, session_id: str, chat_id: str) -> str | None:
        _, chat = self._chats.chat(identity, session_id, chat_id)
        return chat.share_id

    def create(self, identity: Identity, session_id: str, chat_id: str) -> str:
        """The chat's link: the one it has, else a new one (concurrent calls agree on one)."""
        _, chat = self._chats.chat(identity, session_id, chat_id)
        if chat.share_id is not None:
            return chat.share_id
        try:
            return self._store.share_chat(chat, self._share_ids())
        except Gone:
            raise NotFound("Chat not found") from None

    def preview(self, identity: Identity, session_id: str, chat_id: str) -> SharedChat:
        """What the chat's link shows (or would show, once created), for its owner."""
        _, chat = self._chats.chat(identity, session_id, chat_id)
        return self._redacted(chat)

    def revoke(self, identity: Identity, session_id: str, chat_id: str) -> None:
        _, chat = self._chats.chat(identity, session_id, chat_id)
        self._store.unshare_chat(chat)

    # ------------------------------------------------------------------ public

    def _shared(self, share_id: str) -> Chat:
        chat = self._store.shared_chat(share_id)
        if chat is None:
            raise NotFound("Not found")
        return chat

    def transcript(self, share_id: str) -> SharedChat:
        return self._redacted(self._shared(share_id))

    def _redacted(self, chat: Chat) -> SharedChat:
        messages = [transcript.redact(m.parts) for m in self._chats.all_messages(chat)]
        redactor = Redactor()
        for text in strings([chat.title, messages]):  # learn every secret value first
            redactor.learn(text)
        title = redactor.redact(chat.title)
        kept: list[dict[str, Any]] = scrubbed(messages, redactor)
        return SharedChat(title=title, messages=kept, redactions=redactor.count)

    def is_streaming(self, share_id: str) -> bool:
        chat = self._shared(share_id)
        return self._turns.active_run_id(chat.session_id, chat.id) is not None
