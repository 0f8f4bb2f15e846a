"""Concurrency caps per scope (a session, a chat), per user and in all, counted in this process:
sandbox commands (``sandbox_tools.ExecPool``) and stream long-polls (``functions/api/longpoll.py``).
Over a cap is a ``RateLimited`` error with ``Retry-After``; nothing is counted then. On Lambda,
where a container serves one request at a time, the counts are advisory per container."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from openagents.domain.errors import RateLimited


@dataclass(frozen=True)
class Caps:
    per_scope: int
    per_user: int
    total: int


@dataclass(frozen=True)
class Wording:
    """How a refusal reads: ``At most 4 streams wait at once on a chat``."""

    things: str  # "commands run", "streams wait"
    scope: str  # "in a session", "on a chat"
    full: str  # the whole process is full


class Slot:
    """One admitted holder; leaving it (``with``, or ``release``) frees its place, once."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._release = release
        self._lock = threading.Lock()
        self._held = True

    def release(self) -> None:
        with self._lock:
            held, self._held = self._held, False
        if held:
            self._release()

    def __enter__(self) -> Slot:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.release()


class Counted:
    """How many hold a place at once, per scope, per user and in all; ``admit`` gives a slot or
    raises ``refuse`` (a ``RateLimited``) naming the cap, with ``retry_after`` seconds."""

    def __init__(
        self,
        caps: Callable[[], Caps],
        wording: Wording,
        refuse: type[RateLimited],
        retry_after: int,
    ) -> None:
        self._caps, self._wording = caps, wording
        self._refuse, self._retry_after = refuse, retry_after
        self._lock = threading.Lock()
        self._scopes: Counter[tuple[str, str]] = Counter()
        self._users: Counter[str] = Counter()
        self._total = 0

    @property
    def held(self) -> int:
        with self._lock:
            return self._total

    def admit(self, user_id: str, scope_id: str) -> Slot:
        caps, words = self._caps(), self._wording
        scope = (user_id, scope_id)
        with self._lock:
            if self._scopes[scope] >= caps.per_scope:
                raise self._over(f"At most {caps.per_scope} {words.things} at once {words.scope}")
            if self._users[user_id] >= caps.per_user:
                raise self._over(f"At most {caps.per_user} {words.things} at once per user")
            if self._total >= caps.total:
                raise self._over(words.full)
            self._scopes[scope] += 1
            self._users[user_id] += 1
            self._total += 1

        def release() -> None:
            with self._lock:
                self._scopes[scope] -= 1
                self._users[user_id] -= 1
                self._total -= 1
                if self._scopes[scope] <= 0:
                    del self._scopes[scope]
                if self._users[user_id] <= 0:
                    del self._users[user_id]

        return Slot(release)

    def _over(self, message: str) -> RateLimited:
        return self._refuse(message, retry_after_seconds=self._retry_after)
