"""The one-machine bus: records every event (JSON lines under the state folder) and runs the
rules' targets in process, by handler string, as EventBridge rules would invoke Lambdas."""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from openagents.events import Event

log = logging.getLogger(__name__)
Target = Callable[[dict[str, Any]], object]


class LocalBus:
    def __init__(self, log_file: Path, rules: dict[str, list[Target]] | None = None) -> None:
        self._file = log_file
        self._rules = rules or {}
        self._lock = threading.Lock()
        self.published: list[Event] = []

    def publish(self, events: Sequence[Event]) -> None:
        with self._lock:
            self.published.extend(events)
            self._file.parent.mkdir(parents=True, exist_ok=True)
            with self._file.open("a") as out:
                for event in events:
                    out.write(json.dumps(envelope(event)) + "\n")
        for event in events:
            for target in self._rules.get(event.detail_type, []):
                threading.Thread(target=self._deliver, args=(target, event), daemon=True).start()

    @staticmethod
    def _deliver(target: Target, event: Event) -> None:
        try:
            target(envelope(event))
        except Exception as exc:  # EventBridge would retry; the target's own retries apply
            log.warning("event target failed for %s: %s", event.detail_type, exc)


def envelope(event: Event) -> dict[str, Any]:
    """The event as an EventBridge target receives it (``account`` and ``region`` left out).
    ``version`` is EventBridge's own ("0"); the event's version is ``detail.version``. ``id``
    is the audit entry id, unique per event as EventBridge's is."""
    return {
        "version": "0",
        "id": str(event.detail.get("entryId") or uuid.uuid4()),
        "source": event.source,
        "detail-type": event.detail_type,
        "time": event.time.isoformat(),
        "resources": list(event.resources),
        "detail": event.detail,
    }
