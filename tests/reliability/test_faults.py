"""Faults on the real runtime (workflows on moto's Step Functions, real sandboxes, the local
server): sandboxd killed mid-exec, mid-snapshot and mid-restore; a snapshot store that cannot be
written; the workflow crashing between snapshot and stop. After each: no lost messages, no lost
files (the fingerprint of every file at the last verified snapshot comes back), the session ends
where the user can continue (active, hibernated with a snapshot, or failed with a retry), and
the error is recorded (``lifecycleError`` or the audit log)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from openagents.composition import build
from openagents.domain.lifecycle import snapshot_ref
from openagents.sandbox.local import LocalDriver
from openagents.sandbox.port import SandboxError
from openagents.settings import Settings

from tests.reliability.conftest import (
    audit_types,
    fingerprint,
    hibernate,
    kill,
    message_ids,
    post_message,
    resume,
    run,
    sandbox_handle,
    session_of,
    start_session,
    tool,
    wait_state,
)
from tests.support import HttpApi, NoMetrics, sandbox_workspace, sandboxd_pid

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]
BIG = "head -c 60000000 /dev/urandom > big.bin"  # random: streams for a while, never shrinks


def until(check: Callable[[], Any], limit: float = 30, step: float = 0.02) -> Any:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(step)
    raise AssertionError("condition not reached in time")


def checkpoint(api: HttpApi, sid: str, tmp_path: Path) -> tuple[str, list[str]]:
    """A session with work, hibernated once (the verified snapshot S1) and resumed: returns
    the fingerprint of S1 and the messages so far."""
    run(api, sid, "echo work > work.txt && echo change >> app.py && mkdir -p deep/er")
    run(api, sid, "head -c 50000 /dev/urandom > deep/er/blob.bin && git add work.txt")
    posted = [post_message(api, sid, f"message {i}") for i in range(3)]
    kept = fingerprint(api, sid)
    hibernate(api, sid)
    resume(api, sid)
    assert fingerprint(api, sid) == kept
    return kept, posted


def continues_from(api: HttpApi, sid: str, kept: str, posted: list[str]) -> None:
    """The user resumes (or retries) and finds every file of the last snapshot, every message."""
    session = session_of(api, sid)
    assert session["lifecycleState"] in ("active", "hibernated", "failed"), session
    if session["lifecycleState"] == "hibernated":
        resume(api, sid)
    elif session["lifecycleState"] == "failed":
        assert api.post("/api/sandbox", {"sessionId": sid}).status == 200
        wait_state(api, sid, "active")
    assert fingerprint(api, sid) == kept
    assert message_ids(api, sid)[: len(posted)] == posted


def lost(api: HttpApi, sid: str) -> dict[str, Any] | None:
    """The session once it left its dead sandbox (nudged by a tool call while it is active)."""
    session = session_of(api, sid)
    if session["lifecycleState"] == "active":
        reply = api.get(tool(sid, "git-status"))
        assert reply.status in (200, 409), reply.body
    return session if session["lifecycleState"] in ("hibernated", "failed") else None


def generation_dirs(settings: Settings, sid: str) -> list[int]:
    return sorted(int(p.name) for p in (settings.home / "sandboxes" / sid).iterdir())


# ------------------------------------------------------------------ sandboxd killed


def test_sandboxd_killed_mid_exec(
    live_api: HttpApi, live_settings: Settings, tmp_path: Path
) -> None:
    sid = start_session(live_api, tmp_path)
    kept, posted = checkpoint(live_api, sid, tmp_path)
    posted.append(post_message(live_api, sid, "after the snapshot"))
    generation = max(generation_dirs(live_settings, sid))
    pid = sandboxd_pid(sandbox_handle(live_settings, sid, generation))
    replies: list[Any] = []
    runner = threading.Thread(
        target=lambda: replies.append(
            live_api.post(tool(sid, "exec"), {"command": "echo started > started.txt; sleep 30"})
        )
    )
    runner.start()
    workspace = sandbox_workspace(pid)
    until(lambda: (workspace / "started.txt").exists())

    kill(pid)
    runner.join(timeout=60)

    assert replies, "the exec never answered"
    assert replies[0].status == 409, replies
    assert replies[0].body["code"] == "sandbox_not_running"
    # The failed call probes the sandbox; if its wrapper had not exited yet, the next call
    # (any tool) finds it gone. Either way the session leaves `active` at the user's next step.
    session = until(lambda: lost(live_api, sid), limit=30, step=0.2)
    assert session["lifecycleState"] == "hibernated"  # back to its verified snapshot
    assert "Sandbox lost" in (session["lifecycleError"] or ""), session
    assert "sandbox.lost" in audit_types(live_api, sid)
    continues_from(live_api, sid, kept, posted)


def test_sandboxd_killed_mid_snapshot(
    live_api: HttpApi, live_settings: Settings, tmp_path: Path
) -> None:
    sid = start_session(live_api, tmp_path)
    kept, posted = checkpoint(live_api, sid, tmp_path)
    first = session_of(live_api, sid)
    s1 = live_api.get("/api/sandbox/status", query={"sessionId": sid}).body["snapshot"]
    run(live_api, sid, BIG)
    generation = max(generation_dirs(live_settings, sid))
    pid = sandboxd_pid(sandbox_handle(live_settings, sid, generation))
    folder = live_settings.home / "snapshots" / sid

    assert live_api.post("/api/sandbox/snapshot", {"sessionId": sid}).status == 202
    partial = until(lambda: [p for p in folder.glob("*.partial") if p.stat().st_size > 0])
    kill(pid)

    # the run records the failed snapshot and puts the session back to active; the loop's
    # retries (or, sooner, the user's next tool call) find the sandbox gone
    session = until(lambda: lost(live_api, sid), limit=60, step=0.2)
    assert session["lifecycleState"] == "hibernated", session
    assert session["lifecycleError"], session
    types = audit_types(live_api, sid)
    assert "sandbox.snapshot_failed" in types or "sandbox.lost" in types, types
    status = live_api.get("/api/sandbox/status", query={"sessionId": sid}).body
    assert status["snapshot"]["id"] == s1["id"]  # the last verified snapshot, kept
    snapshots = live_settings.home / "snapshots"
    kept_files = [str(p.relative_to(snapshots)) for p in snapshots.rglob("*") if p.is_file()]
    assert any(snapshot_ref(p) == s1["id"] for p in kept_files)  # opaque ids
    assert not partial[0].exists()
    assert not list(folder.glob("*.partial"))
    assert session["lifecycleVersion"] >= first["lifecycleVersion"]
    continues_from(live_api, sid, kept, posted)


def test_sandboxd_killed_mid_restore(
    live_api: HttpApi, live_settings: Settings, tmp_path: Path
) -> None:
    sid = start_session(live_api, tmp_path)
    run(live_api, sid, BIG)
    posted = [post_message(live_api, sid, "before hibernating")]
    kept = fingerprint(live_api, sid)
    hibernate(live_api, sid)
    generation_dir = live_settings.home / "sandboxes" / sid / "2"

    assert live_api.put("/api/sandbox/snapshot", {"sessionId": sid}).status == 200
    until(lambda: (generation_dir / "sandbox.json").exists())
    handle = sandbox_handle(live_settings, sid, 2)
    until(lambda: any(sandbox_workspace(handle["ref"]).iterdir()))
    kill(sandboxd_pid(handle))

    session = wait_state(live_api, sid, "hibernated", "failed", "active", limit=60)
    assert session["lifecycleState"] == "hibernated", session  # the snapshot is kept
    assert (session["lifecycleError"] or "").startswith("Restore failed"), session
    assert "sandbox.failed" in audit_types(live_api, sid)
    continues_from(live_api, sid, kept, posted)


# ------------------------------------------------------------------ the snapshot store


@pytest.mark.snapshot_retry(30)  # active for a while between attempts: tools answer
def test_an_unwritable_snapshot_store_keeps_the_sandbox_running(
    live_api: HttpApi, live_settings: Settings, tmp_path: Path
) -> None:
    sid = start_session(live_api, tmp_path)
    run(live_api, sid, "echo precious > precious.txt")
    posted = [post_message(live_api, sid, "keep me")]
    kept = fingerprint(live_api, sid)
    store = live_settings.home / "snapshots"
    store.mkdir(parents=True, exist_ok=True)
    (store / sid).write_text("not a folder")  # the session's snapshot folder cannot be made

    assert live_api.post("/api/sandbox/snapshot", {"sessionId": sid}).status == 202
    session = until(
        lambda: (
            (s := session_of(live_api, sid))["lifecycleState"] == "active"
            and s["lifecycleError"]
            and s
        ),
        limit=60,
        step=0.2,
    )

    assert session["lifecycleError"], session
    assert {"sandbox.snapshot_failed", "sandbox.hibernate_failed"} & set(audit_types(live_api, sid))
    assert fingerprint(live_api, sid) == kept  # the sandbox never stopped
    # once the store works again, a pause hibernates (the loop sleeps until its next
    # attempt, so nothing races it: see test_a_pause_racing_a_hibernation_keeps_the_workspace)
    (store / sid).unlink()
    hibernate(live_api, sid)
    assert session_of(live_api, sid)["lifecycleError"] is None
    continues_from(live_api, sid, kept, posted)


def test_a_snapshot_store_failure_is_reported_as_a_snapshot_failure(
    live_api: HttpApi, live_settings: Settings, tmp_path: Path
) -> None:
    sid = start_session(live_api, tmp_path)
    store = live_settings.home / "snapshots"
    store.mkdir(parents=True, exist_ok=True)
    (store / sid).write_text("not a folder")
    assert live_api.post("/api/sandbox/snapshot", {"sessionId": sid}).status == 202
    session = until(
        lambda: (s := session_of(live_api, sid))["lifecycleError"] and s, limit=60, step=0.2
    )
    assert session["lifecycleError"].startswith("Snapshot failed"), session["lifecycleError"]
    assert "sandbox.snapshot_failed" in audit_types(live_api, sid)


# ------------------------------------------------------------------ the workflow crashes


def test_a_stop_that_fails_once_after_the_snapshot(
    live_api: HttpApi,
    live_settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sid = start_session(live_api, tmp_path)
    run(live_api, sid, "echo precious > precious.txt")
    posted = [post_message(live_api, sid, "keep me")]
    kept = fingerprint(live_api, sid)
    stop = LocalDriver.stop
    failures: list[str] = []

    def failing_once(self: LocalDriver, handle: Any) -> None:
        if not failures and threading.current_thread().name != "MainThread":
            failures.append(handle.session_id)
            raise SandboxError("simulated: the stop request failed")
        stop(self, handle)

    monkeypatch.setattr(LocalDriver, "stop", failing_once)

    session = hibernate(live_api, sid)

    assert failures == [sid]
    assert session["lifecycleError"] is None  # the retried hibernation succeeded
    types = audit_types(live_api, sid)
    assert "sandbox.hibernate_failed" in types, types  # and the failure is on record
    assert types[-1] == "sandbox.hibernated"
    continues_from(live_api, sid, kept, posted)


def test_a_pause_racing_a_hibernation_keeps_the_workspace(
    live_api: HttpApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openagents.services.lifecycle import LifecycleService

    sid = start_session(live_api, tmp_path)
    run(live_api, sid, "echo precious > precious.txt")
    posted = [post_message(live_api, sid, "keep me")]
    kept = fingerprint(live_api, sid)
    kick = LifecycleService.kick
    pauses: list[str] = []

    def late_kick(
        self: LifecycleService, session: Any, reason: str, *, force: bool = False
    ) -> bool:
        if reason == "manual-pause":
            pauses.append(reason)
            if len(pauses) == 2:  # the second pause claims the lease once the first run
                until(  # has moved the session to hibernating (a schedule that can happen)
                    lambda: session_of(live_api, sid)["lifecycleState"] == "hibernating",
                    limit=20,
                    step=0.005,
                )
        return kick(self, session, reason, force=force)

    monkeypatch.setattr(LifecycleService, "kick", late_kick)
    first = live_api.post("/api/sandbox/snapshot", {"sessionId": sid})
    second = live_api.post("/api/sandbox/snapshot", {"sessionId": sid})
    assert (first.status, second.status) == (202, 202), (first.body, second.body)

    session = wait_state(live_api, sid, "hibernated", "failed", limit=60)
    assert session["lifecycleState"] == "hibernated", session["lifecycleError"]
    continues_from(live_api, sid, kept, posted)


def _crash_the_run_at_stop(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> list[str]:
    """The lifecycle run dies after its verified snapshot, before the stop: its execution is
    stopped (no Catch, no Recover) and the task fails."""
    import boto3

    stop = LocalDriver.stop
    crashed: list[str] = []

    def crash(self: LocalDriver, handle: Any) -> None:
        if crashed or threading.current_thread().name == "MainThread":
            stop(self, handle)
            return
        crashed.append(handle.session_id)
        sfn = boto3.client(
            "stepfunctions", endpoint_url=settings.stepfunctions_endpoint, region_name="us-east-1"
        )
        machine = settings.state_machines["lifecycle"]
        for run_ in sfn.list_executions(stateMachineArn=machine, statusFilter="RUNNING")[
            "executions"
        ]:
            sfn.stop_execution(executionArn=run_["executionArn"], cause="simulated crash")
        raise RuntimeError("simulated: the lifecycle task died")

    monkeypatch.setattr(LocalDriver, "stop", crash)
    return crashed


def _live(api: HttpApi) -> Settings:
    return api.settings


def test_a_run_that_dies_between_snapshot_and_stop_is_rescued(
    live_api: HttpApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _live(live_api)
    sid = start_session(live_api, tmp_path)
    run(live_api, sid, "echo precious > precious.txt")
    posted = [post_message(live_api, sid, "keep me")]
    kept = fingerprint(live_api, sid)
    crashed = _crash_the_run_at_stop(monkeypatch, settings)
    assert live_api.post("/api/sandbox/snapshot", {"sessionId": sid}).status == 202
    until(lambda: crashed, limit=30)
    time.sleep(1)
    stuck = session_of(live_api, sid)
    assert stuck["lifecycleState"] == "hibernating", stuck
    # the sandbox is still running, so nothing is lost yet; the reconciler finds the run's
    # stale lease (the grace shortened from 2 minutes for the test) and finishes the job
    for module in ("openagents.domain.lifecycle", "openagents.services.lifecycle_base"):
        monkeypatch.setattr(f"{module}.STALE_LEASE_GRACE", timedelta(seconds=1))
    time.sleep(1.5)
    container = build(settings, NoMetrics())
    until(lambda: container.lifecycle.reconcile().kicked, limit=20, step=0.5)
    session = wait_state(live_api, sid, "hibernated", limit=60)
    assert session["lifecycleState"] == "hibernated"
    continues_from(live_api, sid, kept, posted)


def test_a_rescued_run_is_on_record(
    live_api: HttpApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _live(live_api)
    sid = start_session(live_api, tmp_path)
    crashed = _crash_the_run_at_stop(monkeypatch, settings)
    assert live_api.post("/api/sandbox/snapshot", {"sessionId": sid}).status == 202
    until(lambda: crashed, limit=30)
    for module in ("openagents.domain.lifecycle", "openagents.services.lifecycle_base"):
        monkeypatch.setattr(f"{module}.STALE_LEASE_GRACE", timedelta(seconds=1))
    time.sleep(2.5)
    container = build(settings, NoMetrics())
    until(lambda: container.lifecycle.reconcile().kicked, limit=20, step=0.5)
    wait_state(live_api, sid, "hibernated", limit=60)
    types = audit_types(live_api, sid)
    recorded = [t for t in types if t not in ("sandbox.hibernating", "sandbox.hibernated")]
    assert any("rescue" in t or "stale" in t or "lost" in t or "failed" in t for t in recorded), (
        types
    )
