"""The events outbox on AWS: the table's stream (new images), the pipe (filtered to outbox
INSERTs, enriched into the envelope, targeting the domain bus, retried and dead-lettered), the
pipe's least-privilege role, and that nothing else may put events on the bus any more.

The envelope is checked end to end offline: an outbox item written by the store, as its stream
record, through the enrichment handler and the pipe's target parameters, gives exactly the
PutEvents entry ``events/eventbridge.py`` sends (Source, DetailType, Detail, Time)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from openagents.domain.models import AuditEntry
from openagents.events import from_entry
from openagents.events.eventbridge import EventBridgeBus
from openagents.store.mapping import outbox_item

from functions.outbox.handler import lambda_handler
from infra.constructs import outbox
from tests.infra.conftest import Synth
from tests.infra.iam import Resolver, role_statements
from tests.support import LambdaContext

ENTRY = AuditEntry(
    id="V1StGXR8_Z5jdHi6B-myT",
    session_id="sess-1",
    at=datetime(2026, 11, 29, 10, 0, tzinfo=UTC),
    type="sandbox.hibernated",
    detail={"from": "hibernating", "to": "hibernated", "generation": 2, "snapshotBytes": 18231},
)


def pipe(synth: Synth) -> tuple[str, dict[str, Any]]:
    logical, resource = synth.one("AWS::Pipes::Pipe")
    return logical, resource["Properties"]


def logical(synth: Synth, construct: Any) -> str:
    return synth.logical_id(construct)


# ------------------------------------------------------------------ the stream and the pipe


def test_the_table_streams_new_images(dev: Synth) -> None:
    (table,) = [
        r
        for r in dev.resources("AWS::DynamoDB::Table").values()
        if "StreamSpecification" in r["Properties"]
    ]
    assert table["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}


def test_the_pipe_reads_the_table_stream_filtered_to_outbox_inserts(dev: Synth) -> None:
    _, props = pipe(dev)
    table = logical(dev, dev.stack.data.table)
    assert props["Source"] == {"Fn::GetAtt": [table, "StreamArn"]}
    stream = props["SourceParameters"]["DynamoDBStreamParameters"]
    assert stream["StartingPosition"] == "TRIM_HORIZON"
    assert stream["ParallelizationFactor"] == 1  # one batch per shard at a time: in order
    assert stream["BatchSize"] == 10  # one PutEvents call's worth
    (only,) = props["SourceParameters"]["FilterCriteria"]["Filters"]
    assert json.loads(only["Pattern"]) == {
        "eventName": ["INSERT"],
        "dynamodb": {"Keys": {"sk": {"S": [{"prefix": "O#"}]}}},
    }


def _matches(pattern: Any, value: Any) -> bool:
    """The EventBridge pattern features the filter uses: nested objects, value lists, prefix."""
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(
            _matches(p, value.get(k)) for k, p in pattern.items()
        )
    return any(
        (isinstance(p, dict) and isinstance(value, str) and value.startswith(p["prefix"]))
        or p == value
        for p in pattern
    )


def test_the_filter_keeps_outbox_inserts_only() -> None:
    def record(name: str, sk: str) -> dict[str, Any]:
        return {"eventName": name, "dynamodb": {"Keys": {"pk": {"S": "S#s"}, "sk": {"S": sk}}}}

    assert _matches(outbox.FILTER, record("INSERT", "O#2026-11-29T10:00:00+00:00#e"))
    assert not _matches(outbox.FILTER, record("REMOVE", "O#2026-11-29T10:00:00+00:00#e"))  # TTL
    assert not _matches(outbox.FILTER, record("MODIFY", "O#2026-11-29T10:00:00+00:00#e"))
    for other in ("SESSION", "E#2026-11-29T10:00:00+00:00#e", "C#chat", "M#1#m"):
        assert not _matches(outbox.FILTER, record("INSERT", other))


def test_the_pipe_enriches_and_targets_the_domain_bus(dev: Synth) -> None:
    _, props = pipe(dev)
    bus = logical(dev, dev.stack.events.bus)
    assert props["Target"] == {"Fn::GetAtt": [bus, "Arn"]}
    function = logical(dev, dev.stack.outbox.enrichment.function)
    assert props["Enrichment"] == {"Fn::GetAtt": [function, "Arn"]}
    assert dev.function("functions.outbox.handler.lambda_handler")[0] == function
    assert props["TargetParameters"] == {
        "EventBridgeEventBusParameters": {
            "DetailType": "$.name",
            "Source": "$.source",
            "Time": "$.time",
        }
    }
    assert "InputTemplate" not in props["TargetParameters"]  # the enrichment's output is the detail


def test_the_pipe_retries_then_dead_letters(dev: Synth) -> None:
    _, props = pipe(dev)
    stream = props["SourceParameters"]["DynamoDBStreamParameters"]
    queue = logical(dev, dev.stack.outbox.dead_letters)
    assert stream["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [queue, "Arn"]}}
    assert stream["MaximumRetryAttempts"] == outbox.RETRY_ATTEMPTS
    assert stream["MaximumRecordAgeInSeconds"] == 6 * 3600  # inside the stream's 24 h
    assert stream["OnPartialBatchItemFailure"] == "AUTOMATIC_BISECT"
    dlq = dev.data["Resources"][queue]["Properties"]
    assert dlq["SqsManagedSseEnabled"] is True
    assert dlq["MessageRetentionPeriod"] == 14 * 24 * 3600
    dev.template.has_output("OutboxDeadLettersQueueUrl", {"Value": {"Ref": queue}})
    assert props["LogConfiguration"]["Level"] == "ERROR"


# ------------------------------------------------------------------ least privilege


def test_the_pipe_role_has_exactly_its_statements(dev: Synth) -> None:
    resolve = Resolver(dev.data)
    _, props = pipe(dev)
    role = props["RoleArn"]["Fn::GetAtt"][0]
    trust = dev.data["Resources"][role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust == [
        {
            "Action": "sts:AssumeRole",
            "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}},
            "Effect": "Allow",
            "Principal": {"Service": "pipes.amazonaws.com"},
        }
    ]
    found = {
        s.sid: (sorted(s.actions), s.resources, s.conditions)
        for s in role_statements(dev.data, role, resolve)
    }
    stack = dev.stack

    def arn(construct: Any, attribute: str = "Arn") -> list[str]:
        return [str(resolve({"Fn::GetAtt": [logical(dev, construct), attribute]}))]

    assert found == {
        "ReadTableStream": (
            sorted(outbox.STREAM_READ_ACTIONS),
            arn(stack.data.table, "StreamArn"),
            {},
        ),
        "Enrich": (["lambda:InvokeFunction"], arn(stack.outbox.enrichment.function), {}),
        "PublishDomainEvents": (["events:PutEvents"], arn(stack.events.bus), {}),
        "DeadLetter": (["sqs:SendMessage"], arn(stack.outbox.dead_letters), {}),
        "WritePipeLogs": (
            ["logs:CreateLogStream", "logs:PutLogEvents"],
            arn(stack.outbox.log_group),
            {},
        ),
    }
    # no wildcard but a log group ARN's own ":*" (its log streams)
    wild = [r for _, resources, _ in found.values() for r in resources if "*" in r]
    assert wild == arn(stack.outbox.log_group)


def test_only_the_pipe_may_put_events_on_the_bus(stages: tuple[Synth, ...]) -> None:
    """The functions no longer publish (the journal has no bus on AWS): no role but the pipe's
    is granted events:PutEvents, in any stage."""
    for synth in stages:
        pipe_role = pipe(synth)[1]["RoleArn"]["Fn::GetAtt"][0]
        putters = {
            role["Ref"]
            for policy in synth.resources("AWS::IAM::Policy").values()
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
            if any(a in ("events:PutEvents", "events:*", "*") for a in _list(statement["Action"]))
            for role in policy["Properties"]["Roles"]
        }
        assert putters == {pipe_role}, synth.stack.config.stage


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_the_enrichment_role_is_only_the_runtime(dev: Synth) -> None:
    resolve = Resolver(dev.data)
    role = logical(dev, dev.stack.outbox.enrichment.role)
    sids = {s.sid for s in role_statements(dev.data, role, resolve)}
    assert sids <= {"WriteOwnLogs", None}  # its log group, and X-Ray (the CDK's own statement)
    actions = {a for s in role_statements(dev.data, role, resolve) for a in s.actions}
    assert actions == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
    }


# ------------------------------------------------------------------ the envelope, end to end


def stream_record(entry: AuditEntry, user_id: str) -> dict[str, Any]:
    """The stream record of the outbox item the store writes for ``entry`` (NEW_IMAGE)."""
    item = outbox_item(entry, user_id)
    serialized = item.serialize()
    keys = {"pk": serialized["pk"], "sk": serialized["sk"]}
    return {
        "eventName": "INSERT",
        "eventSource": "aws:dynamodb",
        "dynamodb": {"Keys": keys, "NewImage": serialized, "StreamViewType": "NEW_IMAGE"},
    }


def _path(document: dict[str, Any], path: str) -> Any:
    value: Any = document
    for part in path.removeprefix("$.").split("."):
        value = value[part]
    return value


def test_the_pipe_puts_exactly_the_entry_put_events_sent() -> None:
    records = [
        stream_record(ENTRY, "alice"),
        stream_record(ENTRY.model_copy(update={"id": "e2"}), "bob"),
    ]
    assert _matches(outbox.FILTER, records[0])
    enriched = lambda_handler(records, LambdaContext())
    assert enriched == [
        from_entry(ENTRY, "alice").detail,
        from_entry(ENTRY.model_copy(update={"id": "e2"}), "bob").detail,
    ]
    # what the pipe puts on the bus for each element: the element is the Detail, the target
    # parameters' paths give DetailType, Source and Time
    expected = EventBridgeBus(None, "bus")._entry(from_entry(ENTRY, "alice"))
    detail = enriched[0]
    params = {"DetailType": "$.name", "Source": "$.source", "Time": "$.time"}
    put = {key: _path(detail, path) for key, path in params.items()}
    assert put["DetailType"] == expected["DetailType"] == "Sandbox Hibernated"
    assert put["Source"] == expected["Source"] == "openagents"
    assert datetime.fromisoformat(put["Time"]) == expected["Time"]
    assert detail == json.loads(expected["Detail"])
    assert expected["Resources"] == []  # the pipe sends none either
