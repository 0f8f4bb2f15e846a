"""What the composition root builds on first use, so an invocation that never needs a piece
pays nothing for it (and nothing is built at import)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Once(Generic[T]):
    """``factory()`` called once, on the first call, its result returned ever after;
    ``ready()`` says whether that call happened (the API's dependencies build the container
    off the event loop until it has)."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._built: list[T] = []
        self._lock = threading.Lock()

    def ready(self) -> bool:
        return bool(self._built)

    def __call__(self) -> T:
        if not self._built:
            with self._lock:
                if not self._built:
                    self._built.append(self._factory())
        return self._built[0]


class Lazy(Generic[T]):
    """An object built on its first attribute access (the sandbox driver: API calls that never
    touch a sandbox pay nothing for it)."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._built = Once(factory)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._built(), name)
