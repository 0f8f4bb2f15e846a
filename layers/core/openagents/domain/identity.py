"""Who is calling, as established by the auth adapters."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Identity:
    user_id: str
    username: str | None = None
    name: str | None = None
    email: str | None = None
    machine: bool = False  # a client-credentials token (automation), not a person
