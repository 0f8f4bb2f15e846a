"""Long-polls of ``GET /api/chat/{id}/stream``: waited on the event loop, never on a thread, and
capped per chat, per user and per process (429 ``too_many_streams`` with ``Retry-After``).

A held long-poll is a coroutine asleep between short store reads (each one a moment on the
threadpool), so any number of them leave the API's threads to other requests. The caps bound
the store reads they cost. Counters are per process: on Lambda, where a container serves one
request at a time, they are advisory per container (as the exec caps are)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from openagents.domain.errors import RateLimited

STREAM_RETRY_AFTER_SECONDS = 2


class TooManyStreams(RateLimited):
    """Over a long-poll cap (429 with ``Retry-After``)."""

    code = "too_many_streams"


@dataclass(frozen=True)
class PollCaps:
    per_chat: int
    per_user: int
    total: int


class LongPolls:
    """How many long-polls wait at once, per chat, per user and in all; ``hold`` admits one
    for the block or raises ``TooManyStreams`` (nothing counted then)."""

    def __init__(self, caps: Callable[[], PollCaps]) -> None:
        self._caps = caps
        self._lock = threading.Lock()
        self._chats: Counter[tuple[str, str]] = Counter()
        self._users: Counter[str] = Counter()
        self._total = 0

    @property
    def held(self) -> int:
        with self._lock:
            return self._total

    @contextmanager
    def hold(self, user_id: str, chat_id: str) -> Iterator[None]:
        caps = self._caps()
        chat = (user_id, chat_id)
        with self._lock:
            if self._chats[chat] >= caps.per_chat:
                raise TooManyStreams(
                    f"At most {caps.per_chat} streams wait at once on a chat",
                    retry_after_seconds=STREAM_RETRY_AFTER_SECONDS,
                )
            if self._users[user_id] >= caps.per_user:
                raise TooManyStreams(
                    f"At most {caps.per_user} streams wait at once per user",
                    retry_after_seconds=STREAM_RETRY_AFTER_SECONDS,
                )
            if self._total >= caps.total:
                raise TooManyStreams(
                    "The server holds as many streams as it can; retry shortly",
                    retry_after_seconds=STREAM_RETRY_AFTER_SECONDS,
                )
            self._chats[chat] += 1
            self._users[user_id] += 1
            self._total += 1
        try:
            yield
        finally:
            with self._lock:
                self._chats[chat] -= 1
                self._users[user_id] -= 1
                self._total -= 1
                if self._chats[chat] <= 0:
                    del self._chats[chat]
                if self._users[user_id] <= 0:
                    del self._users[user_id]
