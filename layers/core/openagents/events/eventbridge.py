"""Events on an EventBridge bus: PutEvents in batches of 10 (the API's limit per call).

A partial failure (``FailedEntryCount`` > 0: throttling, an internal error) is retried once with
just the failed entries — PutEvents accepted the others, so nothing is sent twice. Entries that
fail again raise ``PublishFailed`` after every batch was tried, so one bad batch does not hold
back the next ones. A failing *call* (network, credentials) raises at once; botocore's own
retries have already run by then. No service calls it (every event leaves through the store's
outbox); it is the reference entry the pipe reproduces and re-publishes a dead-lettered batch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from openagents.events import Event

BATCH = 10


class PublishFailed(RuntimeError):
    """Entries PutEvents rejected twice; ``failed`` of ``total`` events were not published."""

    def __init__(self, failed: int, total: int, codes: set[str]) -> None:
        super().__init__(f"{failed} of {total} events not published: {sorted(codes)}")
        self.failed = failed
        self.total = total
        self.codes = codes


class EventBridgeBus:
    def __init__(self, client: Any, bus_name: str) -> None:
        self._client = client
        self._bus = bus_name

    def publish(self, events: Sequence[Event]) -> None:
        entries = [self._entry(event) for event in events]
        failed = 0
        codes: set[str] = set()
        for start in range(0, len(entries), BATCH):
            rejected = self._put(entries[start : start + BATCH])
            if rejected:
                rejected = self._put([entry for entry, _ in rejected])
            failed += len(rejected)
            codes.update(code for _, code in rejected)
        if failed:
            raise PublishFailed(failed, len(entries), codes)

    def _put(self, entries: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
        """PutEvents; the entries it rejected, with their error codes."""
        response = self._client.put_events(Entries=entries)
        if not response.get("FailedEntryCount"):
            return []
        return [
            (entry, str(result["ErrorCode"]))
            for entry, result in zip(entries, response["Entries"], strict=True)
            if result.get("ErrorCode")
        ]

    def _entry(self, event: Event) -> dict[str, Any]:
        return {
            "Source": event.source,
            "DetailType": event.detail_type,
            "Detail": json.dumps(event.detail),
            "EventBusName": self._bus,
            "Time": event.time,
            "Resources": list(event.resources),
        }
