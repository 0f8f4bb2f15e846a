"""Shared pieces of the reliability suites: a live runtime (real provisioning and lifecycle
workflows on moto, real sandboxes, the local server), moto serialised for races, and helpers to
wait for states, fingerprint workspaces, and kill sandboxd."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto.dynamodb.responses import DynamoHandler
from openagents.settings import Settings

from tests.support import HttpApi, local_server, make_origin, provisioning_runtime

SESSIONS = "/api/sessions"
# every regular file outside .git, with its sha256: what "no lost files" compares
FINGERPRINT = "find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 sha256sum"


@pytest.fixture
def serialised_dynamodb(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's DynamoDB is not safe under concurrent transactions (a failed one restores a copy
    of the whole table); DynamoDB serialises them, so moto answers one request at a time here
    (see tests/api/test_session_concurrency.py)."""
    lock = threading.RLock()
    handle = DynamoHandler.call_action

    def one_at_a_time(self: DynamoHandler) -> Any:
        with lock:
            return handle(self)

    monkeypatch.setattr(DynamoHandler, "call_action", one_at_a_time)


@pytest.fixture
def http_api(settings: Settings) -> Iterator[HttpApi]:
    """The local server (local mode, HS256 tokens), provisioning off."""
    with local_server(settings) as base_url:
        client = HttpApi(settings, base_url)
        yield client
        client.client.close()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "snapshot_retry(seconds): OPENAGENTS_SNAPSHOT_RETRY_SECONDS for live_settings"
    )


@pytest.fixture
def live_settings(settings: Settings, request: pytest.FixtureRequest) -> Settings:
    """Timings for fault tests: nothing hibernates on its own; a pause runs at once; a failed
    hibernation is retried after one second (unless the test's snapshot_retry mark says)."""
    marker = request.node.get_closest_marker("snapshot_retry")
    return settings.model_copy(
        update={
            "idle_timeout_seconds": 3600,
            "lifecycle_min_sleep_seconds": 0.5,
            "snapshot_retry_seconds": marker.args[0] if marker else 1,
        }
    )


@pytest.fixture
def live_api(
    live_settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[HttpApi]:
    with (
        provisioning_runtime(live_settings, moto_endpoint, monkeypatch) as live,
        local_server(live) as base_url,
    ):
        client = HttpApi(live, base_url)
        yield client
        client.client.close()


def session_of(api: HttpApi, session_id: str, user: str = "alice") -> dict[str, Any]:
    reply = api.get(f"{SESSIONS}/{session_id}", user=user)
    assert reply.status == 200, reply.body
    session: dict[str, Any] = reply.body["session"]
    return session


def wait_state(
    api: HttpApi, session_id: str, *states: str, limit: float = 60, user: str = "alice"
) -> dict[str, Any]:
    deadline = time.monotonic() + limit
    session = session_of(api, session_id, user)
    while time.monotonic() < deadline:
        session = session_of(api, session_id, user)
        if session["lifecycleState"] in states:
            return session
        time.sleep(0.1)
    raise AssertionError(
        f"session stayed {session['lifecycleState']} (wanted {states}): {session['lifecycleError']}"
    )


def start_session(api: HttpApi, tmp_path: Path, user: str = "alice") -> str:
    origin = make_origin(tmp_path)
    created = api.post(SESSIONS, {"repoUrl": f"file://{origin}", "branch": "feature"}, user=user)
    assert created.status == 201, created.body
    session_id: str = created.body["session"]["id"]
    active = wait_state(api, session_id, "active", "failed", user=user)
    assert active["lifecycleState"] == "active", active["lifecycleError"]
    return session_id


def tool(session_id: str, tail: str) -> str:
    return f"{SESSIONS}/{session_id}/sandbox/{tail}"


def run(api: HttpApi, session_id: str, command: str, user: str = "alice") -> str:
    reply = api.post(tool(session_id, "exec"), {"command": command}, user=user)
    assert reply.status == 200, reply.body
    assert reply.body["exitCode"] == 0, reply.body
    stdout: str = reply.body["stdout"]
    return stdout


def fingerprint(api: HttpApi, session_id: str) -> str:
    return run(api, session_id, FINGERPRINT)


def hibernate(api: HttpApi, session_id: str) -> dict[str, Any]:
    paused = api.post("/api/sandbox/snapshot", {"sessionId": session_id})
    assert paused.status == 202, paused.body
    return wait_state(api, session_id, "hibernated")


def resume(api: HttpApi, session_id: str) -> dict[str, Any]:
    resumed = api.put("/api/sandbox/snapshot", {"sessionId": session_id})
    assert resumed.status == 200, resumed.body
    session = wait_state(api, session_id, "active", "hibernated", "failed")
    assert session["lifecycleState"] == "active", session["lifecycleError"]
    return session


def post_message(api: HttpApi, session_id: str, text: str, user: str = "alice") -> str:
    chat = api.get(f"{SESSIONS}/{session_id}/chats", user=user).body["chats"][0]["id"]
    message_id = f"msg-{time.monotonic_ns()}"
    body = {
        "message": {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}
    }
    reply = api.post(f"{SESSIONS}/{session_id}/chats/{chat}/messages", body, user=user)
    assert reply.status == 200, reply.body
    return message_id


def message_ids(api: HttpApi, session_id: str, user: str = "alice") -> list[str]:
    found: list[str] = []
    for chat in api.get(f"{SESSIONS}/{session_id}/chats", user=user).body["chats"]:
        page = api.get(
            f"{SESSIONS}/{session_id}/chats/{chat['id']}/messages",
            user=user,
            query={"limit": "500"},
        )
        found += [m["id"] for m in page.body["messages"]]
    return found


def audit_types(api: HttpApi, session_id: str) -> list[str]:
    events = api.get(f"{SESSIONS}/{session_id}/events", query={"limit": "100"}).body["events"]
    return [e["type"] for e in events]


# ------------------------------------------------------------------ processes


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def sandbox_handle(settings: Settings, session_id: str, generation: int) -> dict[str, Any]:
    import json

    path = settings.home / "sandboxes" / session_id / str(generation) / "sandbox.json"
    handle: dict[str, Any] = json.loads(path.read_text())
    return handle
