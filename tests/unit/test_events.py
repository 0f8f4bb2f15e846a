"""Event publishing: EventBridge batches and retries, the local bus's log and rules."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from openagents.domain.models import AuditEntry
from openagents.events import ENVELOPE_FIELDS, Event, from_entry
from openagents.events.eventbridge import EventBridgeBus, PublishFailed
from openagents.events.local import LocalBus, envelope

AT = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def event(n: int) -> Event:
    return Event(detail_type="Sandbox Hibernated", detail={"n": n}, time=AT)


def test_audit_entries_become_catalogued_events_in_a_versioned_envelope() -> None:
    entry = AuditEntry(
        id="e1", session_id="s1", at=AT, type="sandbox.active", detail={"generation": 2}
    )
    published = from_entry(entry, "alice")
    assert published.detail_type == "Sandbox Provisioned"
    assert published.source == "openagents"
    assert published.time == AT
    assert published.detail == {
        "name": "Sandbox Provisioned",
        "version": 1,
        "source": "openagents",
        "sessionId": "s1",
        "userId": "alice",
        "correlationId": "e1",
        "time": AT.isoformat(),
        "type": "sandbox.active",
        "entryId": "e1",
        "generation": 2,
    }
    assert tuple(published.detail)[: len(ENVELOPE_FIELDS)] == ENVELOPE_FIELDS


def test_a_correlation_id_given_replaces_the_entry_id() -> None:
    entry = AuditEntry(id="e1", session_id="s1", at=AT, type="session.created")
    assert from_entry(entry, "alice", "req-7").detail["correlationId"] == "req-7"


def test_entry_fields_never_replace_envelope_fields() -> None:
    entry = AuditEntry(
        id="e1",
        session_id="s1",
        at=AT,
        type="session.archived",
        detail={"sessionId": "other", "version": 9, "finalize": True},
    )
    detail = from_entry(entry, "alice").detail
    assert (detail["sessionId"], detail["version"], detail["finalize"]) == ("s1", 1, True)


def test_an_uncatalogued_type_is_still_published_under_a_derived_name() -> None:
    entry = AuditEntry(id="e1", session_id="s1", at=AT, type="git.auto_commit")
    assert from_entry(entry, "alice").detail_type == "Git Auto Commit"


def test_eventbridge_puts_batches_of_ten_and_retries_failed_entries_once() -> None:
    client = boto3.client("events", region_name="us-east-1")
    bus = EventBridgeBus(client, "openagents-bus")
    with Stubber(client) as stub:
        first = {"Entries": ANY}
        stub.add_response(
            "put_events", {"FailedEntryCount": 0, "Entries": [{"EventId": "x"}] * 10}, first
        )
        stub.add_response(
            "put_events",
            {
                "FailedEntryCount": 1,
                "Entries": [{"EventId": "y"}, {"ErrorCode": "InternalFailure"}],
            },
            first,
        )
        stub.add_response(
            "put_events", {"FailedEntryCount": 0, "Entries": [{"EventId": "z"}]}, first
        )
        bus.publish([event(n) for n in range(12)])
        stub.assert_no_pending_responses()


def test_eventbridge_raises_when_a_retry_fails_too() -> None:
    client = boto3.client("events", region_name="us-east-1")
    bus = EventBridgeBus(client, "b")
    failed = {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "ThrottlingException"}]}
    with Stubber(client) as stub:
        stub.add_response("put_events", failed, {"Entries": ANY})
        stub.add_response("put_events", failed, {"Entries": ANY})
        with pytest.raises(PublishFailed, match="ThrottlingException") as raised:
            bus.publish([event(1)])
    assert (raised.value.failed, raised.value.total) == (1, 1)


def test_eventbridge_tries_every_batch_before_raising() -> None:
    client = boto3.client("events", region_name="us-east-1")
    bus = EventBridgeBus(client, "b")
    throttled = {"ErrorCode": "ThrottlingException"}
    with Stubber(client) as stub:
        first = {"FailedEntryCount": 2, "Entries": [{"EventId": "x"}] * 8 + [throttled] * 2}
        stub.add_response("put_events", first, {"Entries": ANY})
        stub.add_response(
            "put_events",
            {"FailedEntryCount": 1, "Entries": [{"EventId": "y"}, throttled]},
            {"Entries": ANY},
        )
        stub.add_response(
            "put_events",
            {"FailedEntryCount": 0, "Entries": [{"EventId": "z"}] * 5},
            {"Entries": ANY},
        )
        with pytest.raises(PublishFailed, match="1 of 15 events") as raised:
            bus.publish([event(n) for n in range(15)])
        stub.assert_no_pending_responses()
    assert raised.value.codes == {"ThrottlingException"}


def test_an_entry_carries_bus_source_type_and_json_detail() -> None:
    client = boto3.client("events", region_name="us-east-1")
    expected = {
        "Entries": [
            {
                "Source": "openagents",
                "DetailType": "Sandbox Hibernated",
                "Detail": json.dumps({"n": 7}),
                "EventBusName": "b",
                "Time": AT,
                "Resources": [],
            }
        ]
    }
    with Stubber(client) as stub:
        stub.add_response(
            "put_events", {"FailedEntryCount": 0, "Entries": [{"EventId": "1"}]}, expected
        )
        EventBridgeBus(client, "b").publish([event(7)])


def test_local_bus_logs_every_event_and_runs_rule_targets(tmp_path: Path) -> None:
    delivered: list[dict[str, Any]] = []
    done = threading.Event()

    def target(envelope: dict[str, Any]) -> None:
        delivered.append(envelope)
        done.set()

    bus = LocalBus(tmp_path / "events.jsonl", {"Sandbox Hibernated": [target]})
    bus.publish([event(1), Event(detail_type="Other", detail={}, time=AT)])
    assert done.wait(5)
    assert delivered[0]["detail-type"] == "Sandbox Hibernated"
    assert delivered[0]["detail"] == {"n": 1}
    lines = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [line["detail-type"] for line in lines] == ["Sandbox Hibernated", "Other"]


def test_the_local_envelope_is_eventbridge_shaped_with_the_entry_id() -> None:
    entry = AuditEntry(id="e1", session_id="s1", at=AT, type="session.created")
    received = envelope(from_entry(entry, "alice"))
    assert received["id"] == "e1"
    assert received["version"] == "0"  # EventBridge's; the event's own is detail.version
    assert received["detail"]["version"] == 1
    assert (received["source"], received["detail-type"]) == ("openagents", "Session Created")
    assert received["time"] == AT.isoformat()


class Counting:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def count(self, name: str, value: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + value


def test_on_aws_nothing_in_process_publishes() -> None:
    """AWS: the table's outbox items reach the bus through Streams and the pipe; the functions
    have no bus (their roles have no events:PutEvents, tests/infra/test_outbox.py)."""
    from openagents import composition
    from openagents.settings import Mode, Settings

    assert composition._bus(Settings(mode=Mode.AWS, event_bus_name="openagents-bus")) is None
