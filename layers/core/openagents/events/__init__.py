"""Domain events: every audit entry is also published (EventBridge on AWS, an in-process bus on
one machine), so automation reacts to sessions without polling.

An event's ``detail`` is a versioned envelope (``docs/events.md``)::

    {"name": "Sandbox Hibernated", "version": 1, "source": "openagents",
     "sessionId": "…", "userId": "…", "correlationId": "…", "time": "…",
     "type": "sandbox.hibernated", "entryId": "…", <the audit entry's detail fields>}

The entry's own fields sit next to the envelope fields, not under a key of their own: rule
patterns and targets read them there (``detail.finalize``, ``detail.sessionId``). Each
detail-type has a model (``catalog.EventDetail``, a union discriminated on ``type``) and a JSON
Schema generated from it in ``docs/events/`` (``openagents event-schemas``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from pydantic import ValidationError

from openagents.domain.models import AuditEntry
from openagents.events.envelope import ENVELOPE_FIELDS, SOURCE, VERSION

__all__ = [
    "ENVELOPE_FIELDS",
    "SOURCE",
    "VERSION",
    "Event",
    "EventBus",
    "detail_type_of",
    "from_entry",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    detail_type: str
    detail: dict[str, Any]
    time: datetime
    source: str = SOURCE
    resources: tuple[str, ...] = field(default_factory=tuple)


def detail_type_of(kind: str) -> str:
    """The catalogued detail-type; an uncatalogued kind (a bug the catalog test catches) is
    still published, under a derived name, rather than lost after its commit."""
    # The catalogue (every event model, their union's validator) is imported by the first
    # event published, not by every module that names ``Event``: the API's cold start builds
    # none of it, and on AWS the API never publishes (the table's stream does).
    from openagents.events.catalog import DETAIL_TYPES

    return DETAIL_TYPES.get(kind) or kind.replace(".", " ").replace("_", " ").title()


def from_entry(entry: AuditEntry, user_id: str, correlation_id: str | None = None) -> Event:
    """The event of a committed audit entry. ``correlation_id`` defaults to the entry id: the
    request's correlation id (``x-correlation-id``) does not reach the services today."""
    detail_type = detail_type_of(entry.type)
    envelope: dict[str, Any] = {
        "name": detail_type,
        "version": VERSION,
        "source": SOURCE,
        "sessionId": entry.session_id,
        "userId": user_id,
        "correlationId": correlation_id or entry.id,
        "time": entry.at.isoformat(),
        "type": entry.type,
        "entryId": entry.id,
    }
    clashes = sorted(set(entry.detail) & set(envelope))
    if clashes:
        log.warning("%s detail fields %s shadow envelope fields; dropped", entry.type, clashes)
    data = {key: value for key, value in entry.detail.items() if key not in envelope}
    detail = {**envelope, **data}
    from openagents.events.catalog import validate

    try:
        validate(detail)
    except ValidationError as error:  # published all the same: the entry is committed
        problems = "; ".join(
            f"{'.'.join(map(str, problem['loc'][1:]))}: {problem['msg']}"
            for problem in error.errors()
        )
        log.warning("%s does not match its event model: %s", entry.type, problems)
    return Event(detail_type=detail_type, detail=detail, time=entry.at)


class EventBus(Protocol):
    def publish(self, events: Sequence[Event]) -> None: ...
