"""The moto runtime's pipe (``OPENAGENTS_STORE=dynamodb openagents dev``): the table's stream
read as the EventBridge pipe reads it on AWS (``infra/constructs/outbox.py``) — new images only,
INSERTs of ``O#`` sort keys, each shard in order — and each record's event (``stream_detail``,
the outbox enrichment's answer) put on the local bus. The store writes the outbox items in the
change's own transaction, so no service publishes anything itself, here as on AWS."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from openagents.events import Event
from openagents.store.keys import OUTBOX_PREFIX
from openagents.store.mapping import stream_detail

log = logging.getLogger(__name__)
POLL_SECONDS = 0.2


def outbox_event(record: dict[str, Any]) -> Event | None:
    """The bus event of one stream record, or None when the pipe's filter drops it."""
    if record.get("eventName") != "INSERT":
        return None
    keys = record["dynamodb"].get("Keys", {})
    if not keys.get("sk", {}).get("S", "").startswith(OUTBOX_PREFIX):
        return None
    detail = stream_detail(record)
    return Event(
        detail_type=str(detail["name"]),
        detail=detail,
        time=datetime.fromisoformat(str(detail["time"])),
    )


class StreamDrain:
    """Polls every shard of the table's stream from its latest record on (what an earlier run
    wrote was published by it) and publishes the outbox's events, in order per shard. A failed
    publish is logged and retried from the same records, as the pipe retries a batch."""

    def __init__(
        self,
        dynamodb: Any,
        streams: Any,
        table: str,
        publish: Callable[[Sequence[Event]], None],
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self._dynamodb, self._streams, self._table = dynamodb, streams, table
        self._publish = publish
        self._poll = poll_seconds
        self._iterators: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def enable(self) -> None:
        """Turn the table's stream on (new images), as the CDK app declares it."""
        described = self._dynamodb.describe_table(TableName=self._table)["Table"]
        if not described.get("StreamSpecification", {}).get("StreamEnabled"):
            self._dynamodb.update_table(
                TableName=self._table,
                StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
            )
        arn = self._dynamodb.describe_table(TableName=self._table)["Table"]["LatestStreamArn"]
        stream = self._streams.describe_stream(StreamArn=arn)["StreamDescription"]
        for shard in stream["Shards"]:
            iterator = self._streams.get_shard_iterator(
                StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="LATEST"
            )
            self._iterators[shard["ShardId"]] = iterator["ShardIterator"]

    def drain(self) -> int:
        """One pass over every shard: the events published."""
        published = 0
        for shard, iterator in list(self._iterators.items()):
            answer = self._streams.get_records(ShardIterator=iterator)
            events = [e for r in answer["Records"] if (e := outbox_event(r)) is not None]
            if events:
                self._publish(events)  # raises: the same records next pass
                published += len(events)
            self._iterators[shard] = answer["NextShardIterator"]
        return published

    def start(self) -> None:
        self.enable()
        self._thread = threading.Thread(target=self._run, name="outbox-stream", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._poll):
            try:
                self.drain()
            except Exception as exc:  # the bus or moto hiccuped: the next pass retries
                log.warning("outbox stream drain failed: %s", exc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
