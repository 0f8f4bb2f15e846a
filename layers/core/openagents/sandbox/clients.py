"""Sandboxd clients kept per sandbox: building one costs ~1.4 ms (urllib's opener), and a
status poll or a turn's step asks for one every time."""

from __future__ import annotations

import threading
from typing import Protocol

from openagents.domain.models import SandboxHandle
from openagents.sandbox.port import Sandboxd

KEPT = 256  # sandboxes whose client is kept (a new token: a new one); the oldest goes first


class Addresses(Protocol):
    """Where a sandbox's sandboxd answers, and its token (the driver says)."""

    def endpoint(self, handle: SandboxHandle) -> str: ...
    def token(self, handle: SandboxHandle) -> str: ...


class KeptClients:
    """``SandboxdClients``: a sandbox's client from its handle, one per (endpoint, token)."""

    def __init__(self, driver: Addresses, kept: int = KEPT) -> None:
        self._driver, self._kept = driver, kept
        self._clients: dict[tuple[str, str], Sandboxd] = {}
        self._lock = threading.Lock()

    def __call__(self, handle: SandboxHandle) -> Sandboxd:
        from openagents.sandbox.client import SandboxClient

        key = (self._driver.endpoint(handle), self._driver.token(handle))
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                if len(self._clients) >= self._kept:
                    self._clients.pop(next(iter(self._clients)))
                client = self._clients[key] = SandboxClient(*key)
            return client
