"""Public share links of chats (reference §2.2, §6.9): the owner creates, reads and revokes a
chat's link; anyone holding it reads the transcript (`.env` tool contents redacted) and
whether a turn is live."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from openagents.domain import transcript
from openagents.domain.errors import NotFound
from openagents.domain.identity import Identity
from openagents.domain.models import Chat
from openagents.services.chats import ChatService, LiveTurns
from openagents.store.port import Gone, Store

SHARE_ID_BYTES = 12  # 96 bits from `secrets`, 16 URL-safe characters


def new_share_id() -> str:
    return secrets.token_urlsafe(SHARE_ID_BYTES)


@dataclass(frozen=True)
class SharedChat:
    chat: Chat
    messages: list[dict[str, Any]]  # UI messages, oldest first, redacted

    @property
    def markdown(self) -> str:
        return transcript.markdown(self.chat.title, self.messages)


class ShareService:
    def __init__(
        self,
        store: Store,
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
        chat = self._shared(share_id)
        messages = [transcript.redact(m.parts) for m in self._chats.all_messages(chat)]
        return SharedChat(chat=chat, messages=messages)

    def is_streaming(self, share_id: str) -> bool:
        chat = self._shared(share_id)
        return self._turns.active_run_id(chat.session_id, chat.id) is not None
