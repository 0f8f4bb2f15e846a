"""Domain events: every audit entry is also published (EventBridge on AWS, an in-process bus on
one machine), so automation reacts to sessions without polling."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from openagents.domain.models import AuditEntry

SOURCE = "openagents"

# audit entry type -> EventBridge detail-type (the event catalog, docs/events.md)
DETAIL_TYPES: dict[str, str] = {
    "session.created": "Session Created",
    "session.renamed": "Session Renamed",
    "session.archived": "Session Archived",  # detail.finalize: the archiver has work to do
    "session.archive_finalized": "Session Archive Finalized",
    "session.archive_failed": "Session Archive Failed",
    "session.unarchived": "Session Unarchived",
    "session.deleted": "Session Deleted",
    "sandbox.starting": "Sandbox Starting",
    "sandbox.active": "Sandbox Provisioned",
    "sandbox.failed": "Sandbox Failed",
    "sandbox.retry": "Sandbox Retry",
    "sandbox.hibernating": "Sandbox Hibernating",
    "sandbox.hibernated": "Sandbox Hibernated",
    "sandbox.snapshot_failed": "Sandbox Snapshot Failed",
    "sandbox.hibernate_aborted": "Sandbox Hibernate Aborted",
    "sandbox.hibernate_failed": "Sandbox Hibernate Failed",
    "sandbox.pause_requested": "Sandbox Pause Requested",
    "sandbox.restoring": "Sandbox Restoring",
    "sandbox.resumed": "Sandbox Resumed",
    "sandbox.extended": "Sandbox Extended",
    "sandbox.lost": "Sandbox Lost",
}


@dataclass(frozen=True)
class Event:
    detail_type: str
    detail: dict[str, Any]
    time: datetime
    source: str = SOURCE
    resources: tuple[str, ...] = field(default_factory=tuple)


def from_entry(entry: AuditEntry, user_id: str) -> Event:
    detail_type = DETAIL_TYPES.get(entry.type) or entry.type.replace(".", " ").title()
    detail = {
        "sessionId": entry.session_id,
        "userId": user_id,
        "type": entry.type,
        "entryId": entry.id,
        "at": entry.at.isoformat(),
        **entry.detail,
    }
    return Event(detail_type=detail_type, detail=detail, time=entry.at)


class EventBus(Protocol):
    def publish(self, events: Sequence[Event]) -> None: ...
