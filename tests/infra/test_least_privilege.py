"""Least privilege, proven: drive every API route in-process through the Lambda handler (AWS
mode, moto behind it) while recording each botocore call, map the calls to IAM actions and
resources, and compare with the API function's synthesized policy: everything used is granted
on the narrowest resource, and nothing granted goes unused."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
import botocore.session
import pytest
from openagents.settings import Settings

from tests.infra.conftest import Synth
from tests.support import LambdaApi

API_HANDLER = "functions.api.handler.lambda_handler"
TABLE, BUCKET = "<table>", "<bucket>"
# Per-item actions inside TransactWriteItems / TransactGetItems (IAM has no Transact* actions)
TRANSACT = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
S3_ACTIONS = {"HeadObject": "GetObject", "ListObjectsV2": "ListBucket"}
# Granted for the runtime, not for the code: CloudWatch Logs (own log group) and X-Ray
RUNTIME_ACTIONS = {
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
}


@dataclass(frozen=True)
class Call:
    service: str
    operation: str
    params: dict[str, Any]


@contextmanager
def recording() -> Iterator[list[Call]]:
    """Record every call made by botocore clients created meanwhile (boto3's and PynamoDB's)."""
    calls: list[Call] = []
    original = botocore.session.Session.create_client

    def create_client(self: botocore.session.Session, *args: Any, **kwargs: Any) -> Any:
        client = original(self, *args, **kwargs)
        service = client.meta.service_model.service_name

        def before_parameter_build(model: Any, params: dict[str, Any], **_: Any) -> None:
            calls.append(Call(service, model.name, dict(params)))

        # the API's own parameters, once per call, before botocore serialises them
        client.meta.events.register("before-parameter-build", before_parameter_build)
        return client

    botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        botocore.session.Session.create_client = original  # type: ignore[method-assign]


def iam_actions(call: Call, table: str, bucket: str) -> set[tuple[str, str]]:
    """The (IAM action, symbolic resource) pairs one call needs."""

    def table_resource(name: str, index: str | None = None) -> str:
        assert name == table, f"unexpected table {name}"
        return TABLE if index is None else f"{TABLE}/index/{index}"

    p = call.params
    if call.service == "dynamodb":
        if call.operation in ("TransactWriteItems", "TransactGetItems"):
            return {
                (f"dynamodb:{TRANSACT[kind]}", table_resource(body["TableName"]))
                for item in p["TransactItems"]
                for kind, body in item.items()
            }
        if call.operation in ("BatchWriteItem", "BatchGetItem"):
            return {(f"dynamodb:{call.operation}", table_resource(t)) for t in p["RequestItems"]}
        return {(f"dynamodb:{call.operation}", table_resource(p["TableName"], p.get("IndexName")))}
    if call.service == "s3":
        assert p["Bucket"] == bucket, f"unexpected bucket {p['Bucket']}"
        action = f"s3:{S3_ACTIONS.get(call.operation, call.operation)}"
        return {(action, f"{BUCKET}/{p['Key']}" if "Key" in p else BUCKET)}
    raise AssertionError(f"unexpected service call {call.service}.{call.operation}")


# ------------------------------------------------------------------ the synthesized policy


def _resolve(value: Any, names: dict[str, str]) -> str:
    """Template intrinsics -> symbolic strings (table and bucket ARNs become <table>/<bucket>)."""
    if isinstance(value, str):
        return value
    if "Fn::GetAtt" in value:
        logical, attribute = value["Fn::GetAtt"]
        return names.get(logical, f"<{logical}.{attribute}>")
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_resolve(part, names) for part in parts)
    if "Ref" in value:
        return f"<{value['Ref']}>"
    raise AssertionError(f"unexpected intrinsic {value}")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def granted(synth: Synth) -> set[tuple[str, str]]:
    """(action, resource pattern) pairs the API function's role allows."""
    functions = {
        k: v for k, v in synth.resources("AWS::Lambda::Function").items()
        if v["Properties"].get("Handler") == API_HANDLER
    }  # fmt: skip
    assert len(functions) == 1
    role = next(iter(functions.values()))["Properties"]["Role"]["Fn::GetAtt"][0]
    role_props = synth.data["Resources"][role]["Properties"]
    assert not role_props.get("ManagedPolicyArns"), "no managed policies on the API role"
    assert not role_props.get("Policies"), "statements live in the role's one policy"
    names = {
        synth.logical_id(synth.stack.data.table): TABLE,
        synth.logical_id(synth.stack.data.artifacts): BUCKET,
    }
    pairs: set[tuple[str, str]] = set()
    for policy in synth.resources("AWS::IAM::Policy").values():
        props = policy["Properties"]
        if {"Ref": role} not in props.get("Roles", []):
            continue
        for statement in props["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow"
            for action in _as_list(statement["Action"]):
                for resource in _as_list(statement["Resource"]):
                    pairs.add((action, _resolve(resource, names)))
    return pairs


# ------------------------------------------------------------------------------- the flow


def _ok(reply: Any, status: int = 200) -> Any:
    assert reply.status == status, reply.body
    return reply.body


def drive_every_route(api: LambdaApi) -> None:
    _ok(api.get("/api/health"))
    _ok(api.put("/api/user/preferences", {"autoCommitPush": True, "defaultModelId": "m/1"}))
    _ok(api.get("/api/user/preferences"))
    created = _ok(api.post("/api/sessions", {"title": "Least privilege"}), 201)
    sid, first_chat = created["session"]["id"], created["chat"]["id"]
    for status in ("all", "active", "archived"):
        _ok(api.get("/api/sessions", query={"status": status}))
    _ok(api.get(f"/api/sessions/{sid}"))
    _ok(api.patch(f"/api/sessions/{sid}", {"title": "Renamed"}))
    _ok(api.get(f"/api/sessions/{sid}/events"))

    chats = f"/api/sessions/{sid}/chats"
    chat = _ok(api.post(chats, {"id": "chat-two"}))["chat"]["id"]
    _ok(api.get(chats))
    _ok(api.get(f"{chats}/{chat}"))
    _ok(api.patch(f"{chats}/{chat}", {"title": "Second"}))
    text = {"id": "m-user", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
    _ok(api.post(f"{chats}/{chat}/messages", {"message": text}))
    big = "x" * 400_000  # over the inline limit: the body goes to S3
    answer = {"id": "m-big", "role": "assistant", "parts": [{"type": "text", "text": big}]}
    _ok(api.post(f"{chats}/{chat}/messages", {"message": answer}))
    answer["parts"] = [{"type": "text", "text": big + "!"}]  # upsert: new object, old dropped
    assert _ok(api.post(f"{chats}/{chat}/messages", {"message": answer}))["status"] == "updated"
    listed = _ok(api.get(f"{chats}/{chat}/messages"))["messages"]
    assert listed[-1]["parts"][0]["text"].endswith("!")
    _ok(api.post(f"{chats}/{chat}/read"))
    _ok(api.post(f"{chats}/{first_chat}/messages", {"message": {**answer, "id": "m-big-2"}}))
    _ok(api.delete(f"{chats}/{chat}"))

    _ok(api.patch(f"/api/sessions/{sid}", {"status": "archived"}))
    _ok(api.patch(f"/api/sessions/{sid}", {"status": "running"}))
    _ok(api.delete(f"/api/sessions/{sid}"))


@pytest.fixture
def lambda_api(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> LambdaApi:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_endpoint)
    bucket = f"artifacts-{settings.table_name}"
    boto3.client("s3", region_name=settings.region).create_bucket(Bucket=bucket)
    return LambdaApi(settings.model_copy(update={"artifact_bucket": bucket}))


def test_api_role_grants_exactly_what_the_api_uses(lambda_api: LambdaApi, dev: Synth) -> None:
    # Given every route driven through the Lambda handler, each botocore call recorded
    with recording() as calls:
        drive_every_route(lambda_api)
    table, bucket = lambda_api.settings.table_name, lambda_api.settings.artifact_bucket
    assert bucket
    used = set().union(*(iam_actions(call, table, bucket) for call in calls))

    # When the synthesized role's statements are read
    allowed = granted(dev)
    runtime = {(a, r) for a, r in allowed if a in RUNTIME_ACTIONS}
    code = allowed - runtime

    # Then every call is allowed by some statement ...
    missing = {u for u in used if not any(_covers(g, u) for g in code)}
    assert not missing, f"used but not granted: {sorted(missing)}"
    # ... every statement is used by some call ...
    unused = {g for g in code if not any(_covers(g, u) for u in used)}
    assert not unused, f"granted but never used: {sorted(unused)}"
    # ... and the resources are the narrowest: exact table/index ARNs, one object prefix
    for action, resource in code:
        assert "*" not in action
        assert resource in {TABLE, f"{TABLE}/index/byUser", f"{TABLE}/index/byUserStatus"} or (
            resource == f"{BUCKET}/messages/*"
        ), (action, resource)
    assert {a for a, _ in runtime} == RUNTIME_ACTIONS
    assert {r for a, r in runtime if a.startswith("xray:")} == {"*"}
    log_group = synth_log_group(dev)
    assert {r for a, r in runtime if a.startswith("logs:")} == {log_group}


def _covers(grant: tuple[str, str], use: tuple[str, str]) -> bool:
    return grant[0] == use[0] and fnmatch.fnmatchcase(use[1], grant[1])


def synth_log_group(synth: Synth) -> str:
    logical = synth.logical_id(synth.stack.api.function.log_group)
    return f"<{logical}.Arn>"


def test_recorder_sees_pynamodb_and_boto3_calls(lambda_api: LambdaApi) -> None:
    """The hook itself: if botocore or PynamoDB stop creating clients this way, fail loudly."""
    with recording() as calls:
        _ok(lambda_api.post("/api/sessions", {"title": "Probe"}), 201)
    assert {(c.service, c.operation) for c in calls} >= {("dynamodb", "TransactWriteItems")}
