"""The chat's git cards: what auto-commit and the git routes did, recorded in the session's chat
as an assistant message of its own holding one AI SDK ``data-*`` part (``data-commit``,
``data-push``, ``data-pr``; docs/api.md, "The chat's git cards"). The model never sees data
parts (``agent/ui.history`` keeps text, reasoning and tools). A card is best effort: failing to
store one is logged, never raised."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from openagents.domain.models import Chat, Message, Role, Session
from openagents.services import Clock, IdFactory
from openagents.store.port import Store

log = logging.getLogger(__name__)
CardKind = Literal["commit", "push", "pr"]
Source = Literal["auto", "button"]
CardValue = str | int | bool | None


@dataclass(frozen=True)
class Card:
    kind: CardKind
    data: dict[str, CardValue]
    source: Source


class GitCards:
    def __init__(self, store: Store, clock: Clock, ids: IdFactory) -> None:
        self._store, self._clock, self._ids = store, clock, ids

    def record(self, session: Session, *cards: Card) -> list[str]:
        """Store each card in the session's latest chat; the ids of the messages stored."""
        stored: list[str] = []
        try:
            current = self._store.get_session(session.id) or session
            chat = latest_chat(self._store.list_chats(current.id))
            if chat is None:
                return stored
            for card in cards:
                card_id = self._ids()
                message_id = f"card_{card_id}"
                part = {
                    "type": f"data-{card.kind}",
                    "id": card_id,
                    "data": {**card.data, "source": card.source},
                }
                ui: dict[str, object] = {
                    "id": message_id,
                    "role": "assistant",
                    "parts": [part],
                    "metadata": {"card": True},
                }
                message = Message(
                    id=message_id,
                    chat_id=chat.id,
                    role=Role.ASSISTANT,
                    parts=ui,
                    created_at=self._clock(),
                )
                self._store.put_message(current, chat, message, activity=None)
                stored.append(message_id)
        except Exception:
            log.exception("recording git cards for session %s", session.id)
        return stored


def latest_chat(chats: list[Chat]) -> Chat | None:
    """The chat with the newest assistant message (the turn that just ran), else the first."""
    if not chats:
        return None
    answered = [chat for chat in chats if chat.last_assistant_message_at is not None]
    if answered:
        return max(answered, key=lambda chat: chat.last_assistant_message_at or chat.created_at)
    return min(chats, key=lambda chat: chat.created_at)
