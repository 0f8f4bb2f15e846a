"""A public preview: a port of a session's sandbox that anyone holding its link may reach,
until its owner revokes it (or the session is archived or deleted). One per session and port;
``secret`` is what its link carries, compared in constant time on every request."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class PublicPreview:
    session_id: str
    port: int
    user_id: str  # the session's owner (whose sandbox it reaches)
    secret: str
    created_at: datetime
