"""Requests per operation: every AWS request one API call makes, counted at botocore.

Calls go through the Lambda handler (API Gateway v2 events, AWS mode, as deployed). Targets:
a status poll is 1 read and 0 writes; a session list is 1 Query plus at most 1 more read,
whatever the number of sessions and chats.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import (
    classify,
    counting,
    environment,
    fresh_settings,
    install_counter,
    moto_server,
    say,
    scratch,
)

SHAPES = ((1, 1), (10, 2), (50, 5))  # (sessions, chats per session) for the list


def _count(call: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    with counting() as tally:
        reply = call()
    return reply, classify(tally)


def _lambda_api(settings: Any, endpoint: str) -> Any:
    """The API through the Lambda handler; run() points boto3's S3 at moto for its bucket."""
    import boto3

    from tests.support import LambdaApi

    bucket = f"artifacts-{settings.table_name}"
    boto3.client("s3", region_name=settings.region).create_bucket(Bucket=bucket)
    return LambdaApi(settings.model_copy(update={"artifact_bucket": bucket}))


def _ok(reply: Any, status: int = 200) -> Any:
    if reply.status != status:
        raise RuntimeError(f"unexpected {reply.status}: {reply.body}")
    return reply.body


def _message(role: str, index: int) -> dict[str, Any]:
    return {
        "message": {
            "id": f"m-{role}-{index}-{time.monotonic_ns()}",
            "role": role,
            "parts": [{"type": "text", "text": f"{role} message {index}"}],
        }
    }


def _plain_operations(api: Any) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    api.get("/api/sessions", user="warmup")  # builds the container (no AWS request)
    reply, found["create"] = _count(lambda: api.post("/api/sessions", {"title": "counted"}))
    session = _ok(reply, 201)
    sid, chat = session["session"]["id"], session["chat"]["id"]
    status = "/api/sandbox/status"
    _, found["status poll"] = _count(lambda: api.get(status, query={"sessionId": sid}))
    messages = f"/api/sessions/{sid}/chats/{chat}/messages"
    _, found["post message (user)"] = _count(lambda: api.post(messages, _message("user", 1)))
    _, found["post message (assistant)"] = _count(
        lambda: api.post(messages, _message("assistant", 1))
    )
    _, found["get session"] = _count(lambda: api.get(f"/api/sessions/{sid}"))
    _, found["list messages"] = _count(lambda: api.get(messages))
    for sessions, chats in SHAPES:
        user = f"lister-{sessions}"
        for i in range(sessions):
            created = _ok(api.post("/api/sessions", {"title": f"s{i}"}, user=user), 201)
            for _ in range(chats - 1):
                _ok(api.post(f"/api/sessions/{created['session']['id']}/chats", {}, user=user))
        reply, found[f"list ({sessions} sessions x {chats} chats)"] = _count(
            lambda user=user: api.get("/api/sessions", user=user)  # type: ignore[misc]
        )
        listed = _ok(reply)
        if len(listed["sessions"]) != sessions:
            raise RuntimeError(f"listed {len(listed['sessions'])} of {sessions}")
    return found


def _wait(container: Any, identity: Any, session_id: str, *states: str, limit: float = 90) -> Any:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        session = container.sessions.get(identity, session_id)
        if str(session.lifecycle_state) in states:
            return session
        time.sleep(0.05)
    raise RuntimeError(f"session stayed {session.lifecycle_state}: {session.lifecycle_error}")


def _lifecycle_operations(settings: Any, endpoint: str, home: Path) -> dict[str, dict[str, Any]]:
    """Create (provisioning on), status of an active and a hibernated session, pause and
    resume, on the real workflows and sandboxes."""
    import pytest
    from openagents.composition import build
    from openagents.domain.identity import Identity
    from openagents.services.sessions import NewSession

    from tests.support import make_origin, provisioning_runtime

    found: dict[str, dict[str, Any]] = {}
    alice = Identity(user_id="alice", username="alice")
    with (
        pytest.MonkeyPatch.context() as patch,
        provisioning_runtime(settings, endpoint, patch) as live,
    ):
        container = build(live, _NoMetrics())
        api = _lambda_api(live, endpoint)
        api.get("/api/sessions", user="warmup")
        reply, found["create (provisioning on)"] = _count(
            lambda: api.post("/api/sessions", {"title": "no repository"})
        )
        _wait(container, alice, _ok(reply, 201)["session"]["id"], "active")
        # AWS mode refuses local repositories: this one is created in local mode
        origin = make_origin(home)
        created, _ = container.sessions.create(alice, NewSession(repo_url=f"file://{origin}"))
        sid = created.id
        _wait(container, alice, sid, "active")
        status = "/api/sandbox/status"
        _, found["status poll (active)"] = _count(lambda: api.get(status, query={"sessionId": sid}))
        _, found["pause"] = _count(lambda: api.post("/api/sandbox/snapshot", {"sessionId": sid}))
        _wait(container, alice, sid, "hibernated")
        _, found["status poll (hibernated)"] = _count(
            lambda: api.get(status, query={"sessionId": sid})
        )
        _, found["resume"] = _count(lambda: api.put("/api/sandbox/snapshot", {"sessionId": sid}))
        _wait(container, alice, sid, "active")
    return found


class _NoMetrics:
    def count(self, name: str, value: int = 1) -> None:
        pass


def verdict(found: dict[str, dict[str, Any]]) -> dict[str, Any]:
    polls = {k: v for k, v in found.items() if k.startswith("status poll")}
    status_met = all(
        v["reads"] == 1 and v["writes"] == 0 and v["other"] == 0 for v in polls.values()
    )
    lists = {k: v for k, v in found.items() if k.startswith("list (")}
    shapes = {(v["reads"], v["writes"], v["other"]) for v in lists.values()}
    list_met = (
        all(
            v["calls"].get("dynamodb:Query", 0) == 1 and v["reads"] <= 2 and v["writes"] == 0
            for v in lists.values()
        )
        and len(shapes) == 1
    )
    return {"statusTargetMet": status_met, "listTargetMet": list_met}


def run(args: Any) -> dict[str, Any]:
    install_counter()
    with (
        moto_server() as moto,
        scratch("requests") as home,
        environment(AWS_ENDPOINT_URL_S3=moto.endpoint),
    ):
        say("requests: plain operations and lists")
        plain = fresh_settings(moto.endpoint, home / "plain")
        found = _plain_operations(_lambda_api(plain, moto.endpoint))
        say("requests: create/pause/resume with real provisioning and sandboxes")
        live = fresh_settings(
            moto.endpoint,
            home / "live",
            lifecycle_min_sleep_seconds=0.5,
        )
        found.update(_lifecycle_operations(live, moto.endpoint, home))
    return {"operations": found, **verdict(found)}


def rows(result: dict[str, Any]) -> list[list[str]]:
    table = []
    for name, counts in result["operations"].items():
        calls = ", ".join(f"{k.split(':')[1]} {n}" for k, n in counts["calls"].items())
        table.append(
            [
                f"requests: {name}",
                f"{counts['reads']}r/{counts['writes']}w/{counts['other']}o",
                calls,
            ]
        )
    table.append(
        [
            "requests: targets",
            f"status {'met' if result['statusTargetMet'] else 'NOT met'}, "
            f"list {'met' if result['listTargetMet'] else 'NOT met'}",
            "status = 1 read, 0 writes; list = 1 Query + <=1 read, any size",
        ]
    )
    return table
