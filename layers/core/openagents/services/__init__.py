"""Use cases. Each takes its ports in the constructor; none imports an SDK."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

Clock = Callable[[], datetime]
IdFactory = Callable[[], str]
OfferedModel = Callable[[str, str], str]
"""(model id, field) → the canonical id of a model the registry offers; a ``ModelUnavailable``
naming the field otherwise (``ModelRegistry.offered``)."""


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    """21 URL-safe characters, like the reference's nanoid()."""
    return secrets.token_urlsafe(16)[:21]


class Metrics(Protocol):
    """A business metric sink (Powertools EMF in AWS, a log line on one machine)."""

    def count(self, name: str, value: int = 1) -> None: ...
