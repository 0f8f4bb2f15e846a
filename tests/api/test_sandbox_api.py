"""Sandbox routes over HTTP against the local server, with real provisioning and sandboxes."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openagents.domain.lifecycle import FAILURE_TEXT, Failure
from openagents.services.lifecycle import LifecycleService
from openagents.services.lifecycle_api import StatusView
from openagents.settings import Settings

from tests.support import HttpApi, git, local_server, make_origin, provisioning_runtime


@pytest.fixture
def live_api(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[HttpApi]:
    with (
        provisioning_runtime(settings, moto_endpoint, monkeypatch) as live,
        local_server(live) as base_url,
    ):
        client = HttpApi(live, base_url)
        yield client
        client.client.close()


def wait_state(api: HttpApi, session_id: str, *states: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        session: dict[str, Any] = api.get(f"/api/sessions/{session_id}").body["session"]
        if session["lifecycleState"] in states:
            return session
        time.sleep(0.2)
    raise AssertionError(f"session stayed {session['lifecycleState']}")


@pytest.fixture
def active_session(live_api: HttpApi, tmp_path: Path) -> str:
    origin = make_origin(tmp_path)
    created = live_api.post("/api/sessions", {"repoUrl": f"file://{origin}", "branch": "feature"})
    assert created.status == 201, created.body
    session = wait_state(live_api, created.body["session"]["id"], "active", "failed")
    assert session["lifecycleState"] == "active", session["lifecycleError"]
    return str(session["id"])


def tools(session_id: str, tail: str) -> str:
    return f"/api/sessions/{session_id}/sandbox/{tail}"


def test_exec_files_git_status_and_diff(live_api: HttpApi, active_session: str) -> None:
    ran = live_api.post(tools(active_session, "exec"), {"command": "echo hi && echo oops >&2"})
    assert ran.status == 200
    assert (ran.body["stdout"], ran.body["stderr"], ran.body["exitCode"]) == ("hi\n", "oops\n", 0)
    listed = live_api.get(tools(active_session, "files"))
    assert "feature.txt" in {entry["path"] for entry in listed.body["entries"]}
    content = live_api.get(tools(active_session, "files/content"), query={"path": "feature.txt"})
    assert content.body["content"] == "feature\n"
    status = live_api.get(tools(active_session, "git-status"))
    assert status.body["branch"] == "feature"
    assert status.body["hasUncommittedChanges"] is False
    live_api.post(tools(active_session, "exec"), {"argv": ["sh", "-c", "echo x >> app.py"]})
    diff = live_api.get(tools(active_session, "diff"))
    assert diff.status == 200
    assert diff.body["totalAdditions"] >= 1
    cached = live_api.get(tools(active_session, "diff/cached"))
    assert cached.body["data"] == diff.body
    assert cached.body["isStale"] is True
    session = live_api.get(f"/api/sessions/{active_session}").body["session"]
    assert session["linesAdded"] == diff.body["totalAdditions"]


def test_sandbox_input_errors(live_api: HttpApi, active_session: str) -> None:
    escape = live_api.get(
        tools(active_session, "files/content"), query={"path": "../../etc/passwd"}
    )
    assert escape.status == 400
    assert escape.error["field"] == "path"
    missing = live_api.get(tools(active_session, "files/content"), query={"path": "nope.txt"})
    assert missing.status == 404, missing.body
    assert missing.error["field"] == "path"
    assert "nope.txt" in missing.error["error"]
    home = str(live_api.settings.home)
    for reply in (escape, missing):  # neither sandboxd's routes nor host paths
        text = reply.error["error"]
        for leak in ("/files", "status code", home):
            assert leak not in text, text
    bad_cwd = live_api.post(tools(active_session, "exec"), {"command": "ls", "cwd": "no/dir"})
    assert bad_cwd.status == 404, bad_cwd.body
    assert "/exec" not in bad_cwd.error["error"]
    both = live_api.post(tools(active_session, "exec"), {"command": "ls", "argv": ["ls"]})
    assert both.status == 422
    neither = live_api.post(tools(active_session, "exec"), {})
    assert neither.status == 422
    too_long = live_api.post(
        tools(active_session, "exec"), {"command": "ls", "timeoutSeconds": 601}
    )
    assert too_long.status == 422
    assert too_long.error["field"] == "timeoutSeconds"


def test_another_users_sandbox_is_not_found(live_api: HttpApi, active_session: str) -> None:
    for reply in (
        live_api.post(tools(active_session, "exec"), {"command": "id"}, user="mallory"),
        live_api.get(tools(active_session, "files"), user="mallory"),
        live_api.get(tools(active_session, "git-status"), user="mallory"),
        live_api.get(tools(active_session, "diff"), user="mallory"),
        live_api.post("/api/sandbox", {"sessionId": active_session}, user="mallory"),
    ):
        assert reply.status == 404
        assert "stdout" not in (reply.body or {})


def test_no_running_sandbox_answers_409_and_resume_hint(http_api: HttpApi) -> None:
    # provisioning is off in the plain fixture: the session never gets a sandbox
    session_id = http_api.post("/api/sessions", {"title": "idle"}).body["session"]["id"]
    for reply in (
        http_api.post(tools(session_id, "exec"), {"command": "ls"}),
        http_api.get(tools(session_id, "files")),
        http_api.get(tools(session_id, "git-status")),
        http_api.get(tools(session_id, "diff")),
    ):
        assert reply.status == 409
        assert reply.error["code"] == "sandbox_not_running"
    assert http_api.get(tools(session_id, "diff/cached")).status == 404


def test_ensure_sandbox_retries_a_failed_provisioning(live_api: HttpApi, tmp_path: Path) -> None:
    origin = make_origin(tmp_path)
    created = live_api.post("/api/sessions", {"repoUrl": f"file://{origin}", "branch": "later"})
    session_id = created.body["session"]["id"]
    failed = wait_state(live_api, session_id, "failed")
    # a sentence for the user with a stable code; the internals are in the audit entry
    assert failed["lifecycleErrorCode"] == "provisioning_failed"
    assert failed["lifecycleError"] == FAILURE_TEXT[Failure.PROVISIONING_FAILED]
    status = live_api.get("/api/sandbox/status", query={"sessionId": session_id}).body
    assert status["lifecycle"]["errorCode"] == "provisioning_failed"
    events = live_api.get(f"/api/sessions/{session_id}/events").body["events"]
    (entry,) = [e for e in events if e["type"] == "sandbox.failed"]
    assert entry["detail"]["code"] == "provisioning_failed"
    assert "later" in entry["detail"]["error"]  # the branch git could not find
    # When the user retries after pushing the branch
    git(tmp_path / "seed", "push", "-q", "origin", "feature:later")
    retry = live_api.post("/api/sandbox", {"sessionId": session_id})
    assert retry.status == 200
    assert (retry.body["provisioningStarted"], retry.body["generation"]) == (True, 2)
    active = wait_state(live_api, session_id, "active", "failed")
    assert active["lifecycleState"] == "active"
    assert active["lifecycleError"] is None
    assert active["lifecycleErrorCode"] is None
    again = live_api.post("/api/sandbox", {"sessionId": session_id})
    assert again.body["provisioningStarted"] is False
    assert live_api.post("/api/sandbox", {}).status == 422


def test_an_overdue_status_poll_kicks_its_run_off_the_event_loop(
    http_api: HttpApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The status route reads on the event loop; an overdue session's kick (a workflow start)
    runs on a thread, once per poll that finds it overdue, and a poll that does not kicks
    nothing."""
    overdue: set[str] = set()
    kicked: list[tuple[str, bool]] = []
    status = LifecycleService.status

    def seen(self: LifecycleService, identity: Any, session_id: str) -> StatusView:
        view = status(self, identity, session_id)
        return dataclasses.replace(view, overdue=session_id in overdue)

    def kick(self: LifecycleService, session: Any) -> None:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        kicked.append((session.id, on_loop))

    monkeypatch.setattr(LifecycleService, "status", seen)
    monkeypatch.setattr(LifecycleService, "kick_overdue", kick)
    session_id = http_api.post("/api/sessions", {"title": "due"}).body["session"]["id"]
    assert http_api.get("/api/sandbox/status", query={"sessionId": session_id}).status == 200
    assert kicked == []
    overdue.add(session_id)
    assert http_api.get("/api/sandbox/status", query={"sessionId": session_id}).status == 200
    assert kicked == [(session_id, False)]
