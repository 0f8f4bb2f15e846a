"""Long-polls of ``GET /api/chat/{id}/stream``: waited on the event loop, never on a thread, and
capped per chat, per user and per process (429 ``too_many_streams`` with ``Retry-After``).

A held long-poll is a coroutine asleep between short store reads (each one a moment on the
threadpool), so any number of them leave the API's threads to other requests. The caps
(``services/caps.py``, as exec's) bound the store reads they cost."""

from __future__ import annotations

from collections.abc import Callable

from openagents.domain.errors import RateLimited
from openagents.services.caps import Caps, Counted, Wording

STREAM_RETRY_AFTER_SECONDS = 2
STREAMS = Wording(
    "streams wait", "on a chat", "The server holds as many streams as it can; retry shortly"
)


class TooManyStreams(RateLimited):
    """Over a long-poll cap (429 with ``Retry-After``)."""

    code = "too_many_streams"


def long_polls(caps: Callable[[], Caps]) -> Counted:
    """The process's long-poll counts, under ``caps`` (read at each admission)."""
    return Counted(caps, STREAMS, TooManyStreams, STREAM_RETRY_AFTER_SECONDS)
