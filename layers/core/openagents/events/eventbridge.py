"""Events on an EventBridge bus: PutEvents in batches of 10, failed entries retried once."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from openagents.events import Event

BATCH = 10


class EventBridgeBus:
    def __init__(self, client: Any, bus_name: str) -> None:
        self._client = client
        self._bus = bus_name

    def publish(self, events: Sequence[Event]) -> None:
        entries = [self._entry(event) for event in events]
        for start in range(0, len(entries), BATCH):
            self._put(entries[start : start + BATCH])

    def _put(self, entries: list[dict[str, Any]], retry: bool = True) -> None:
        response = self._client.put_events(Entries=entries)
        if not response.get("FailedEntryCount"):
            return
        failed = [e for e, r in zip(entries, response["Entries"], strict=True) if "ErrorCode" in r]
        if retry:
            self._put(failed, retry=False)
            return
        codes = {r.get("ErrorCode") for r in response["Entries"] if "ErrorCode" in r}
        raise RuntimeError(f"{len(failed)} events not published: {sorted(map(str, codes))}")

    def _entry(self, event: Event) -> dict[str, Any]:
        return {
            "Source": event.source,
            "DetailType": event.detail_type,
            "Detail": json.dumps(event.detail),
            "EventBusName": self._bus,
            "Time": event.time,
            "Resources": list(event.resources),
        }
