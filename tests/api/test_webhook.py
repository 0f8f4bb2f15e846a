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
from openagents.domain.models import LifecycleState, PrStatus, SessionStatus
from openagents.services.pull_requests import PullRequestEventId, event_identity
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
        changes={"pr_number": 7, "pr_status": PrStatus.OPEN, "pr_key": "acme/widget#7"},
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
    assert deliver(hook_api, body, delivery="x" * 201).status == 400


def pr_session(hook_api: Api) -> tuple[Any, str]:
    """A session of PR acme/widget#7, and the server's own container."""
    container = build(settings_of(hook_api), NoMetrics())
    session, _ = container.sessions.create(
        ALICE, NewSession(repo_url="https://github.com/acme/widget")
    )
    container.archive._store.transition(
        session.id,
        expect=frozenset({LifecycleState.PROVISIONING}),
        changes={"pr_number": 7, "pr_status": PrStatus.OPEN, "pr_key": "acme/widget#7"},
        entry=None,
    )
    return container, session.id


def at(updated_at: str, **override: Any) -> dict[str, Any]:
    """A closed event as GitHub sends it: with the PR's head sha and ``updated_at``."""
    pull = {"number": 7, "merged": True, "head": {"sha": "a" * 40}, "updated_at": updated_at}
    return closed(pull_request=pull, **override)


def test_the_same_signed_body_is_a_replay_under_any_delivery_id_or_none(hook_api: Api) -> None:
    container, session_id = pr_session(hook_api)
    body = json.dumps(at("2026-12-01T10:00:00Z")).encode()
    assert deliver(hook_api, body, delivery="d-1").body["archivedSessions"] == 1
    for replayed_as in (None, "d-2", "forged-id"):  # the header is not signed: anyone sets it
        container.sessions.update(ALICE, session_id, title=None, status=SessionStatus.RUNNING)
        replay = deliver(hook_api, body, delivery=replayed_as)
        assert replay.status == 200, replay.body
        assert replay.body["duplicate"] is True, replayed_as
        assert container.sessions.get(ALICE, session_id).status is SessionStatus.RUNNING
    # the same fields in a body spelled otherwise (keys reordered, spaces) are the same event
    respelled = json.dumps(at("2026-12-01T10:00:00Z"), indent=2, sort_keys=True).encode()
    assert deliver(hook_api, respelled).body["duplicate"] is True
    # a later event of the PR (closed again after a reopen: a new updated_at) is acted on
    later = deliver(hook_api, json.dumps(at("2026-12-01T11:00:00Z")).encode(), delivery="d-3")
    assert later.body["archivedSessions"] == 1


def test_without_updated_at_the_body_itself_is_the_identity(hook_api: Api) -> None:
    container, session_id = pr_session(hook_api)
    body = json.dumps(closed()).encode()  # no head sha, no updated_at
    assert deliver(hook_api, body).body["archivedSessions"] == 1
    container.sessions.update(ALICE, session_id, title=None, status=SessionStatus.RUNNING)
    assert deliver(hook_api, body).body["duplicate"] is True  # the same body: a replay
    other = json.dumps(closed(pull_request={"number": 7, "merged": False})).encode()
    assert deliver(hook_api, other).body["archivedSessions"] == 1  # another body: an event


@pytest.mark.parametrize(
    "pull",
    [
        {"number": 7, "head": "abc"},
        {"number": 7, "updated_at": 5},
        {"number": 7, "head": {"sha": 1}},
    ],
)
def test_head_and_updated_at_of_the_wrong_type_are_400(hook_api: Api, pull: Any) -> None:
    reply = deliver(hook_api, json.dumps(closed(pull_request=pull)).encode())
    assert reply.status == 400, reply.body
    assert reply.error["code"] == "invalid_payload"


def test_a_failed_event_is_forgotten_under_both_keys(
    hook_api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    container, _ = pr_session(hook_api)
    pull_requests = container.pull_requests
    said = PullRequestEventId("closed", "acme", "widget", 7, "a" * 40, "2026-12-01T10:00:00Z")
    identity = event_identity(said, b"")

    def fail(*_: Any) -> None:
        raise RuntimeError("the store is down")

    def handle() -> Any:
        return pull_requests.pull_request_event(
            "closed", "acme", "widget", 7, True, identity=identity, delivery="d-9"
        )

    with monkeypatch.context() as patched:
        patched.setattr(pull_requests, "_pull_request_event", fail)
        with pytest.raises(RuntimeError):
            handle()
    assert handle().archived_sessions == 1  # GitHub's redelivery runs it again
    assert handle().duplicate is True
