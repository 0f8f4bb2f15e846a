"""DynamoDB throttling, injected at the client: the k-th DynamoDB request of one API call
raises ``ProvisionedThroughputExceededException`` (what botocore raises once its own retries are
spent), for every k. The API must answer 503 ``unavailable`` with ``Retry-After``, and write
nothing half: the table is exactly as before, and the same request retried succeeds. Deletes
commit in one transaction with a tombstone: a throttle before it is that 503; a throttle on
the children's removal after it answers success, and the reconciler's purge leaves no orphan.

Requests go through the Lambda handler (AWS mode, in process): the failure is injected only in
the request's own context (a context variable follows it into FastAPI's thread pool)."""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.client import BaseClient
from botocore.exceptions import ClientError
from openagents.composition import build
from openagents.settings import Settings

from tests.support import LambdaApi, NoMetrics, Reply

pytestmark = pytest.mark.timeout(120)
SESSIONS = "/api/sessions"


@dataclass
class Plan:
    fail_at: int | None = None  # the k-th DynamoDB request fails (1-based); None: count only
    seen: int = 0
    operations: list[str] = field(default_factory=list)


THROTTLED: Any = {
    "Error": {
        "Code": "ProvisionedThroughputExceededException",
        "Message": "The level of configured provisioned throughput for the table was exceeded.",
    },
    "ResponseMetadata": {"HTTPStatusCode": 400},
}
_plan: contextvars.ContextVar[Plan | None] = contextvars.ContextVar("throttle", default=None)


@pytest.fixture(autouse=True)
def injector(monkeypatch: pytest.MonkeyPatch) -> None:
    original = getattr(BaseClient, "_make_api_call")  # noqa: B009 - private, untyped

    def maybe_throttled(self: Any, operation: str, params: Any) -> Any:
        plan = _plan.get()
        if plan is not None and self.meta.service_model.service_name == "dynamodb":
            plan.seen += 1
            plan.operations.append(operation)
            if plan.seen == plan.fail_at:
                raise ClientError(THROTTLED, operation)
        return original(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", maybe_throttled)


@contextlib.contextmanager
def planned(plan: Plan) -> Iterator[Plan]:
    token = _plan.set(plan)
    try:
        yield plan
    finally:
        _plan.reset(token)


@pytest.fixture
def api(settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> LambdaApi:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_endpoint)
    bucket = f"artifacts-{settings.table_name}"
    boto3.client("s3", region_name=settings.region).create_bucket(Bucket=bucket)
    return LambdaApi(settings.model_copy(update={"artifact_bucket": bucket}))


def table(settings: Settings) -> list[str]:
    """Every item of the table, canonical (what "nothing written" compares)."""
    client = boto3.client(
        "dynamodb", endpoint_url=settings.dynamodb_endpoint, region_name=settings.region
    )
    rows = []
    for page in client.get_paginator("scan").paginate(TableName=settings.table_name):
        rows += [json.dumps(item, sort_keys=True) for item in page["Items"]]
    return sorted(rows)


@dataclass
class World:
    session: str
    chat: str
    second_chat: str


def world(api: LambdaApi) -> World:
    created = api.post(SESSIONS, {"title": "throttled"})
    assert created.status == 201, created.body
    sid, chat = created.body["session"]["id"], created.body["chat"]["id"]
    second = api.post(f"{SESSIONS}/{sid}/chats", {}).body["chat"]["id"]
    message = {"message": {"id": f"seed-{sid}", "role": "user", "parts": ["hello"]}}
    assert api.post(f"{SESSIONS}/{sid}/chats/{chat}/messages", message).status == 200
    return World(sid, chat, second)


Operation = Callable[[LambdaApi, World], Reply]


def _message(role: str) -> Operation:
    def call(api: LambdaApi, w: World) -> Reply:
        body = {"message": {"id": f"{role}-{w.session}", "role": role, "parts": ["x"]}}
        return api.post(f"{SESSIONS}/{w.session}/chats/{w.chat}/messages", body)

    return call


OPERATIONS: dict[str, Operation] = {
    "create session": lambda api, w: api.post(SESSIONS, {"title": "new"}),
    "create untitled session": lambda api, w: api.post(SESSIONS, {}),
    "list sessions": lambda api, w: api.get(SESSIONS),
    "get session": lambda api, w: api.get(f"{SESSIONS}/{w.session}"),
    "status poll": lambda api, w: api.get("/api/sandbox/status", query={"sessionId": w.session}),
    "rename session": lambda api, w: api.patch(f"{SESSIONS}/{w.session}", {"title": "renamed"}),
    "post user message": _message("user"),
    "post assistant message": _message("assistant"),
    "create chat": lambda api, w: api.post(
        f"{SESSIONS}/{w.session}/chats", {"id": f"c-{w.session}"}
    ),
    "rename chat": lambda api, w: api.patch(
        f"{SESSIONS}/{w.session}/chats/{w.chat}", {"title": "t"}
    ),
    "mark read": lambda api, w: api.post(f"{SESSIONS}/{w.session}/chats/{w.chat}/read"),
    "put preferences": lambda api, w: api.put("/api/user/preferences", {"autoCommitPush": True}),
    "archive session": lambda api, w: api.patch(f"{SESSIONS}/{w.session}", {"status": "archived"}),
}
# Deletes: their children are removed after the committing transaction (tombstone + purge).
DELETES: dict[str, tuple[Operation, Callable[[World], tuple[str, ...]]]] = {
    "delete chat": (
        lambda api, w: api.delete(f"{SESSIONS}/{w.session}/chats/{w.chat}"),
        lambda w: (w.chat, f"seed-{w.session}"),  # the chat, its message and their claims
    ),
    "delete session": (
        lambda api, w: api.delete(f"{SESSIONS}/{w.session}"),
        lambda w: (w.session, w.chat, w.second_chat, f"seed-{w.session}"),
    ),
}


def calls_of(api: LambdaApi, operation: Operation) -> list[str]:
    w = world(api)
    with planned(Plan()) as plan:
        reply = operation(api, w)
    assert reply.status < 300, reply.body
    return plan.operations


def check_every_failure_point(
    api: LambdaApi, settings: Settings, name: str, operation: Operation
) -> list[str]:
    problems = []
    calls = calls_of(api, operation)
    assert calls, f"{name} made no DynamoDB request"
    for k in range(1, len(calls) + 1):
        w = world(api)
        before = table(settings)
        with planned(Plan(fail_at=k)) as plan:
            reply = operation(api, w)
        where = f"{name}, DynamoDB request {k} ({plan.operations[-1]})"
        if reply.status != 503 or (reply.body or {}).get("code") != "unavailable":
            problems.append(f"{where}: answered {reply.status} {reply.body}")
            continue
        if reply.headers.get("retry-after") != "1":
            problems.append(f"{where}: no Retry-After ({reply.headers})")
        if table(settings) != before:
            problems.append(f"{where}: 503 but the table changed")
        retried = operation(api, w)
        if retried.status >= 300:
            problems.append(f"{where}: the retry answered {retried.status} {retried.body}")
    return problems


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_a_throttled_store_answers_503_and_writes_nothing(
    api: LambdaApi, settings: Settings, name: str
) -> None:
    assert not check_every_failure_point(api, settings, name, OPERATIONS[name])


@pytest.mark.parametrize("name", sorted(DELETES))
def test_a_throttled_delete_is_all_or_finished_by_the_reconciler(
    api: LambdaApi, settings: Settings, name: str
) -> None:
    operation, ids_of = DELETES[name]
    store = build(api.settings, NoMetrics()).lifecycle._store
    calls = calls_of(api, operation)
    problems, finished_later = [], 0
    for k in range(1, len(calls) + 1):
        w = world(api)
        before = table(settings)
        with planned(Plan(fail_at=k)) as plan:
            reply = operation(api, w)
        where = f"{name}, DynamoDB request {k} ({plan.operations[-1]})"
        if reply.status == 503:  # before the commit: nothing written, and a retry deletes
            if table(settings) != before:
                problems.append(f"{where}: 503 but the table changed")
            if operation(api, w).status >= 300:
                problems.append(f"{where}: the retry failed")
        elif reply.status < 300:  # after the commit: gone for readers at once
            finished_later += 1
            assert operation(api, w).status == 404, where
        else:
            problems.append(f"{where}: answered {reply.status} {reply.body}")
            continue
        store.purge_deleted()  # the reconciler's sweep
        left = [row for row in table(settings) if any(i in row for i in ids_of(w))]
        left += [row for row in table(settings) if '"PURGE"' in row]
        if left:
            problems.append(f"{where}: orphans after the purge: {left}")
    assert not problems
    assert finished_later, "no throttle fell after the commit: the test proves nothing"


def test_throttling_reaches_the_local_server_as_503(settings: Settings) -> None:
    """Over HTTP too (the context does not follow a request into the server, so the store is
    throttled for everyone here). The local server on the DynamoDB adapter (its default store is
    SQLite, which botocore never reaches)."""
    from tests.support import HttpApi, local_server

    dynamodb = settings.model_copy(update={"store": "dynamodb"})
    with local_server(dynamodb) as base_url:
        http = HttpApi(dynamodb, base_url)
        sid = http.post(SESSIONS, {"title": "x"}).body["session"]["id"]
        original = getattr(BaseClient, "_make_api_call")  # noqa: B009 - private, untyped

        def throttled(self: Any, operation: str, params: Any) -> Any:
            if self.meta.service_model.service_name == "dynamodb":
                error: Any = {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}
                raise ClientError(error, operation)
            return original(self, operation, params)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(BaseClient, "_make_api_call", throttled)
            polled = http.get("/api/sandbox/status", query={"sessionId": sid})
            created = http.post(SESSIONS, {"title": "y"})
        for reply in (polled, created):
            assert reply.status == 503, reply.body
            assert reply.body["code"] == "unavailable"
            assert reply.headers["retry-after"] == "1"
        assert [s["id"] for s in http.get(SESSIONS).body["sessions"]] == [sid]
        http.client.close()
