"""Domain events: every audit entry is also published (EventBridge on AWS, an in-process bus on
one machine), so automation reacts to sessions without polling.

An event's ``detail`` is a versioned envelope (``docs/events.md``)::

    {"name": "Sandbox Hibernated", "version": 1, "source": "openagents",
     "sessionId": "…", "userId": "…", "correlationId": "…", "time": "…",
     "type": "sandbox.hibernated", "entryId": "…", <the audit entry's detail fields>}

The entry's own fields sit next to the envelope fields, not under a key of their own: rule
patterns and targets read them there (``detail.finalize``, ``detail.sessionId``). Each
detail-type has a JSON Schema in ``docs/events/``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from openagents.domain.models import AuditEntry

log = logging.getLogger(__name__)

SOURCE = "openagents"
# The envelope version. Adding an event, an optional field or a value keeps it; removing,
# renaming or retyping a field is a new version, published next to this one for a while.
VERSION = 1
# The envelope's fields: an entry detail field of the same name never replaces them.
ENVELOPE_FIELDS = (
    "name",
    "version",
    "source",
    "sessionId",
    "userId",
    "correlationId",
    "time",
    "type",
    "entryId",
)

# audit entry type -> EventBridge detail-type (the event catalog, docs/events.md; one schema
# per detail-type in docs/events/). Every type a service writes must be here
# (tests/unit/test_event_schemas.py scans the services).
DETAIL_TYPES: dict[str, str] = {
    "session.created": "Session Created",
    "session.renamed": "Session Renamed",
    "session.settings_changed": "Session Settings Changed",  # PATCH askBeforeBash
    "session.archived": "Session Archived",  # detail.finalize: the archiver has work to do
    "session.archive_finalized": "Session Archive Finalized",
    "session.archive_failed": "Session Archive Failed",
    "session.unarchived": "Session Unarchived",
    "session.pr_merged": "Session PR Merged",  # POST /api/sessions/{id}/merge (then archived)
    "session.pr_closed": "Session PR Closed",  # POST /api/sessions/{id}/close-pr
    "sandbox.starting": "Sandbox Starting",
    "sandbox.active": "Sandbox Provisioned",
    "sandbox.failed": "Sandbox Failed",
    "sandbox.retry": "Sandbox Retry",
    "sandbox.waiting": "Sandbox Waiting",  # provisioning waits for AWS capacity (retried)
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
    "sandbox.run_rescued": "Sandbox Run Rescued",
    "sandbox.auto_commit": "Sandbox Auto Commit",  # an agent's turn ended: committed/pushed/PR
    "agent.turn_started": "Agent Turn Started",  # POST /api/chat (or respond) started a run
    "agent.turn_finished": "Agent Turn Finished",  # the run ended: status, steps, usage
    "agent.turn_reverted": "Agent Turn Reverted",  # the workspace went back to before a run
    "git.committed": "Git Committed",  # POST /api/sessions/{id}/commit
    "git.discarded": "Git Discarded",  # POST /api/sessions/{id}/discard
    "git.pushed": "Git Pushed",  # POST /api/sessions/{id}/push
    "git.pr_opened": "Git PR Opened",  # POST /api/sessions/{id}/pr opened a pull request
}


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
    return Event(detail_type=detail_type, detail={**envelope, **data}, time=entry.at)


class EventBus(Protocol):
    def publish(self, events: Sequence[Event]) -> None: ...
