"""The base of every test fake of sandboxd. A fake subclasses ``SandboxdFake`` and defines the
methods of the one client protocol (``openagents.sandbox.port.Sandboxd``) its test expects;
calling any other fails the test. mypy checks each fake against the protocol: a method a fake
defines must match it, and ``__getattr__`` stands in for the rest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class NotFaked(AssertionError):
    def __init__(self, method: str) -> None:
        super().__init__(f"the test's sandboxd fake does not answer {method}")


class SandboxdFake:
    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):  # dunders and private names: a plain missing attribute
            raise AttributeError(name)

        def not_faked(*args: Any, **kwargs: Any) -> Any:
            raise NotFaked(name)

        return not_faked
