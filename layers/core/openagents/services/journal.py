"""Publishing audit entries as events, after their transaction committed."""

from __future__ import annotations

import logging

from openagents.domain.models import AuditEntry
from openagents.events import EventBus, from_entry
from openagents.services import Metrics

log = logging.getLogger(__name__)


class Journal:
    """A failed publish never undoes a committed transition: it is logged and counted (the
    audit log keeps the record, ``GET /api/sessions/{id}/events``)."""

    def __init__(self, bus: EventBus | None, metrics: Metrics) -> None:
        self._bus = bus
        self._metrics = metrics

    def publish(self, user_id: str, *entries: AuditEntry | None) -> None:
        events = [from_entry(entry, user_id) for entry in entries if entry is not None]
        if self._bus is None or not events:
            return
        try:
            self._bus.publish(events)
        except Exception as exc:
            log.warning("could not publish %d events: %s", len(events), exc)
            self._metrics.count("EventPublishFailed", len(events))
