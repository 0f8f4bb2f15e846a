"""How a model call (and a tool) learns that stop was requested: a cheap check, polled."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeAlias

CancelCheck: TypeAlias = Callable[[], bool]
"""True once stop was requested. Called often (every 100 ms while waiting, and between
chunks): keep it cheap, e.g. wrap a store read in ``every(0.5, read)``."""


def never() -> bool:
    return False


def every(
    seconds: float, check: CancelCheck, *, clock: Callable[[], float] = time.monotonic
) -> CancelCheck:
    """``check`` called at most once per ``seconds``; once true, true for good."""
    return _Every(seconds, check, clock)


class _Every:
    def __init__(self, seconds: float, check: CancelCheck, clock: Callable[[], float]) -> None:
        self._seconds, self._check, self._clock = seconds, check, clock
        self._at: float | None = None
        self._value = False

    def __call__(self) -> bool:
        if not self._value:
            now = self._clock()
            if self._at is None or now - self._at >= self._seconds:
                self._at = now
                self._value = bool(self._check())
        return self._value
