"""A deleted session's sandbox, stopped and removed: its running generation, its snapshot,
whatever the driver still keeps of it on disk (``Remains``: stopped generations' volumes), and
its attachments (``Discard``: deleted, and given back to its user's storage)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from openagents.domain.models import Session
from openagents.sandbox.port import SandboxDriver


class Remains(Protocol):
    def discard(self, session_id: str) -> None:
        """Remove what the driver keeps of the session once its sandbox is stopped."""
        ...


class SandboxTeardown:
    """Idempotent: a second call after a failure finishes the job."""

    def __init__(
        self,
        driver: SandboxDriver,
        remains: Remains | None = None,
        attachments: Callable[[Session], None] | None = None,
    ) -> None:
        self._driver = driver
        self._remains = remains
        self._attachments = attachments

    def __call__(self, session: Session) -> None:
        if session.sandbox is not None:
            self._driver.stop(session.sandbox)
        if session.snapshot is not None:
            self._driver.delete_snapshot(session.snapshot)
        if self._remains is not None:
            self._remains.discard(session.id)
        if self._attachments is not None:
            self._attachments(session)
