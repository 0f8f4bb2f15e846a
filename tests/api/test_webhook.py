"""The GitHub webhook refuses what is not a pull_request payload (a 400, never a 500 or a
dropped connection) and acknowledges a replayed delivery without acting on it. Both
transports (the Lambda handler on DynamoDB, the local server on SQLite)."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from typing import Any

import pytest
from openagents.composition import build
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState, SessionStatus
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from tests.support import Api, HttpApi, LambdaApi, NoMetrics, Reply, local_server

SECRET = "s3cret"
ALICE = Identity(user_id="alice", username="alice", name="Alice", email="a@example.com")
HOOK = "/api/github/webhook"


@pytest.fixture(params=["lambda", "http"])
def hook_api(request: pytest.FixtureRequest, settings: Settings) -> Iterator[Api]:
    configured = settings.model_copy(
        update={"github_webhook_secret": SECRET, "artifact_bucket": "unused"}
    )
    if request.param == "lambda":
        yield LambdaApi(configured)
        return
    with local_server(configured) as base_url:
        client = HttpApi(configured, base_url)
        yield client
        client.client.close()


def settings_of(api: Api) -> Settings:
    assert isinstance(api, LambdaApi | HttpApi)
    return api.settings


def deliver(api: Api, body: bytes, delivery: str | None = None) -> Reply:
    headers = {
        "x-github-event": "pull_request",
        "x-hub-signature-256": "sha256="
        + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
    }
    if delivery is not None:
        headers["x-github-delivery"] = delivery
    return api.request("POST", HOOK, user=None, raw_body=body, headers=headers)


def closed(**override: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "action": "closed",
        "number": 7,
        "pull_request": {"number": 7, "merged": True},
        "repository": {"name": "widget", "owner": {"login": "acme"}},
    }
    return payload | override


WRONG_SHAPES = [
    closed(repository="acme/widget"),
    closed(repository={"name": "widget", "owner": "acme"}),
    closed(repository={"name": 5, "owner": {"login": "acme"}}),
    closed(pull_request="7"),
    closed(pull_request={"number": True}, number=None),
    closed(number=True, pull_request={}),
    closed(action=["closed"]),
    {"action": "closed"},
    [1, 2],
    "closed",
]


def test_validly_signed_bodies_of_the_wrong_shape_are_400(hook_api: Api) -> None:
    for payload in WRONG_SHAPES:
        reply = deliver(hook_api, json.dumps(payload).encode())
        assert reply.status == 400, (payload, reply.body)
        assert reply.error["code"] == "invalid_payload", reply.body
    for raw in (b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 100_000, b"{not json"):
        reply = deliver(hook_api, raw)
        assert reply.status == 400, reply.body
        assert reply.error["code"] == "invalid_json"
        assert reply.error["field"] == "body"


def test_a_replayed_delivery_is_acknowledged_and_does_nothing(hook_api: Api) -> None:
    container = build(settings_of(hook_api), NoMetrics())  # the server's own store
    session, _ = container.sessions.create(
        ALICE, NewSession(repo_url="https://github.com/acme/widget")
    )
    container.archive._store.transition(
        session.id,
        expect=frozenset({LifecycleState.PROVISIONING}),
        changes={"pr_number": 7, "pr_status": "open", "pr_key": "acme/widget#7"},
        entry=None,
    )
    body = json.dumps(closed()).encode()
    first = deliver(hook_api, body, delivery="d-1")
    assert first.status == 200, first.body
    assert first.body["archivedSessions"] == 1
    # the user unarchives; GitHub (or an attacker holding the signed body) replays d-1
    container.sessions.update(ALICE, session.id, title=None, status=SessionStatus.RUNNING)
    replay = deliver(hook_api, body, delivery="d-1")
    assert replay.status == 200, replay.body
    assert replay.body == {
        "ok": True,
        "event": "pull_request",
        "action": "closed",
        "duplicate": True,
    }
    assert container.sessions.get(ALICE, session.id).status is SessionStatus.RUNNING
    fresh = deliver(hook_api, body, delivery="d-2")  # a new delivery is acted on
    assert fresh.body["archivedSessions"] == 1
    assert deliver(hook_api, body, delivery="x" * 201).status == 400
