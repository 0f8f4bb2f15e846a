"""The real lifecycle ASL in moto's Step Functions with short timings and real sandboxes:
idle sandboxes hibernate with a verified snapshot and come back from it, byte for byte."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from openagents.composition import Container, build
from openagents.domain.errors import NotFound, SandboxNotRunning
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState, Session
from openagents.sandbox.port import ExecResult, SandboxHandle, SandboxState
from openagents.services.lifecycle import Activity, Resumed
from openagents.services.sessions import NewSession
from openagents.settings import Settings
from openagents.store.port import StaleState

from tests.support import NoMetrics, make_origin, provisioning_runtime

ALICE = Identity(user_id="alice", username="alice", name="Alice Smith", email="a@example.com")
FINGERPRINT = "find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 sha256sum"


@pytest.fixture
def runtime(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Container]:
    quick = settings.model_copy(
        update={
            "idle_timeout_seconds": 3,
            "lifecycle_min_sleep_seconds": 0.5,
            "snapshot_retry_seconds": 1,
            "turn_heartbeat_seconds": 60,
        }
    )
    with provisioning_runtime(quick, moto_endpoint, monkeypatch) as live:
        yield build(live, NoMetrics())


def wait_for(
    container: Container, session_id: str, *states: LifecycleState, limit: float = 60
) -> Session:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        session = container.sessions.get(ALICE, session_id)
        if session.lifecycle_state in states:
            return session
        time.sleep(0.1)
    raise AssertionError(f"session stayed {session.lifecycle_state}: {session.lifecycle_error}")


def start_session(container: Container, tmp_path: Path) -> Session:
    origin = make_origin(tmp_path)
    session, _ = container.sessions.create(
        ALICE, NewSession(repo_url=str(origin), branch="feature")
    )
    active = wait_for(container, session.id, LifecycleState.ACTIVE, LifecycleState.FAILED)
    assert active.lifecycle_state is LifecycleState.ACTIVE, active.lifecycle_error
    return active


def run(container: Container, session_id: str, command: str) -> ExecResult:
    result = container.sandbox_tools.exec(ALICE, session_id, command=command)
    assert result.exit_code == 0, result
    return result


def events(container: Container, session_id: str) -> list[str]:
    return [e.type for e in container.sessions.events(ALICE, session_id, 100, None).items]


def test_idle_hibernates_and_resume_restores_everything(runtime: Container, tmp_path: Path) -> None:
    container = runtime
    session = start_session(container, tmp_path)
    # Given committed, uncommitted, untracked and binary work in the workspace
    run(
        container, session.id, "echo changed >> app.py && echo new > notes.txt && git add notes.txt"
    )
    run(container, session.id, "git commit -qm local && echo dirty >> README.md && echo u > u.txt")
    run(container, session.id, "head -c 200000 /dev/urandom > blob.bin")
    before = run(container, session.id, FINGERPRINT).stdout
    status_before = container.sandbox_tools.git_status(ALICE, session.id)
    # When it stays idle
    hibernated = wait_for(container, session.id, LifecycleState.HIBERNATED)
    # Then it was snapshotted, verified and stopped
    assert hibernated.snapshot is not None
    assert hibernated.sandbox is None
    assert (container.settings.home / "snapshots" / hibernated.snapshot.id).exists()
    assert hibernated.snapshot.manifest["fileCount"] >= 5
    assert hibernated.lifecycle_run_id is None
    assert "sandbox.hibernated" in events(container, session.id)
    with pytest.raises(SandboxNotRunning):
        container.sandbox_tools.git_status(ALICE, session.id)
    assert session.sandbox is not None
    assert container.driver.probe(session.sandbox).state is SandboxState.STOPPED
    # When the user resumes
    result = container.restore.resume(ALICE, session.id)
    assert result.restoring is True
    resumed = wait_for(container, session.id, LifecycleState.ACTIVE, LifecycleState.HIBERNATED)
    # Then a new generation runs with every byte and the git state restored
    assert resumed.lifecycle_state is LifecycleState.ACTIVE, resumed.lifecycle_error
    assert resumed.sandbox_generation == session.sandbox_generation + 1
    assert run(container, session.id, FINGERPRINT).stdout == before
    assert container.sandbox_tools.git_status(ALICE, session.id) == status_before
    assert "sandbox.resumed" in events(container, session.id)
    # And every transition was published as an event
    log = container.settings.home / "events.jsonl"
    published = [json.loads(line) for line in log.read_text().splitlines()]
    mine = [e["detail-type"] for e in published if e["detail"]["sessionId"] == session.id]
    for expected in (
        "Session Created",
        "Sandbox Provisioned",
        "Sandbox Hibernated",
        "Sandbox Resumed",
    ):
        assert expected in mine


def test_activity_postpones_hibernation_and_an_agent_turn_blocks_it(
    runtime: Container, tmp_path: Path
) -> None:
    container = runtime
    session = start_session(container, tmp_path)
    # Activity every second keeps it awake past the 3 s idle timeout
    for _ in range(5):
        assert container.lifecycle.activity(ALICE, session.id, None) == Activity(success=True)
        time.sleep(1)
    assert container.sessions.get(ALICE, session.id).lifecycle_state is LifecycleState.ACTIVE
    # An agent turn in progress holds it awake with no further activity
    container.lifecycle.activity(ALICE, session.id, "start")
    time.sleep(5)
    assert container.sessions.get(ALICE, session.id).lifecycle_state is LifecycleState.ACTIVE
    # Once the turn ends, it hibernates after the idle timeout
    container.lifecycle.activity(ALICE, session.id, "end")
    wait_for(container, session.id, LifecycleState.HIBERNATED, limit=30)
    assert container.lifecycle.activity(ALICE, session.id, None) == Activity(
        success=False, reason="not-active"
    )


def test_a_pause_is_not_undone_by_the_turn_that_ends_after_it(
    runtime: Container, tmp_path: Path
) -> None:
    """Pause during a turn's last moments: the turn's end (its follow-ups report activity)
    must not move the hibernation the pause asked for an idle timeout later."""
    container = runtime
    session = start_session(container, tmp_path)
    container.lifecycle.activity(ALICE, session.id, "start")  # a turn holds it awake
    paused = container.lifecycle.pause(ALICE, session.id)
    assert paused.hibernate_after is not None
    container.lifecycle.activity(ALICE, session.id, "end")  # that turn ends after the pause
    after = container.sessions.get(ALICE, session.id)
    assert after.hibernate_after is None or after.hibernate_after <= paused.hibernate_after
    wait_for(container, session.id, LifecycleState.HIBERNATED, limit=30)


def test_a_failing_snapshot_never_stops_the_sandbox(runtime: Container, tmp_path: Path) -> None:
    container = runtime
    session = start_session(container, tmp_path)
    # An unreadable file makes tar fail (the sandbox has no CAP_DAC_OVERRIDE)
    run(container, session.id, "echo secret > locked.txt && chmod 000 locked.txt")
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        current = container.sessions.get(ALICE, session.id)
        if (current.lifecycle_error or "").startswith("Snapshot failed"):
            break
        time.sleep(0.2)
    current = container.sessions.get(ALICE, session.id)
    assert (current.lifecycle_error or "").startswith("Snapshot failed"), current.lifecycle_error
    assert current.lifecycle_state in (LifecycleState.ACTIVE, LifecycleState.HIBERNATING)
    assert current.snapshot is None
    assert current.sandbox is not None
    assert container.driver.probe(current.sandbox).state is SandboxState.RUNNING
    # When the cause goes away, the retried hibernation succeeds
    run(container, session.id, "chmod 644 locked.txt")
    hibernated = wait_for(container, session.id, LifecycleState.HIBERNATED, limit=40)
    assert hibernated.snapshot is not None
    assert hibernated.lifecycle_error is None


def test_twenty_concurrent_resumes_start_one_sandbox(runtime: Container, tmp_path: Path) -> None:
    container = runtime
    session = start_session(container, tmp_path)
    container.lifecycle.pause(ALICE, session.id)
    hibernated = wait_for(container, session.id, LifecycleState.HIBERNATED)
    results: list[Resumed] = []
    barrier = threading.Barrier(20)

    def resume() -> None:
        barrier.wait()
        results.append(container.restore.resume(ALICE, session.id))

    threads = [threading.Thread(target=resume) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(1 for r in results if r.restoring) == 1
    assert sum(1 for r in results if r.already_running) == 19
    active = wait_for(container, session.id, LifecycleState.ACTIVE)
    assert active.sandbox_generation == hibernated.sandbox_generation + 1
    generations = container.settings.home / "sandboxes" / session.id
    assert sorted(p.name for p in generations.iterdir()) == ["1", "2"]


def test_a_lost_sandbox_is_detected(runtime: Container, tmp_path: Path) -> None:
    container = runtime
    session = start_session(container, tmp_path)
    # When the sandbox dies on its own (no snapshot yet)
    assert session.sandbox is not None
    container.driver.stop(session.sandbox)
    with pytest.raises(SandboxNotRunning):
        container.sandbox_tools.files(ALICE, session.id, ".", 1)
    lost = container.sessions.get(ALICE, session.id)
    assert lost.lifecycle_state is LifecycleState.FAILED
    assert "no snapshot" in (lost.lifecycle_error or "")
    with pytest.raises(NotFound):
        container.restore.resume(ALICE, session.id)


def test_the_reconciler_rescues_a_session_whose_run_was_lost(
    runtime: Container, tmp_path: Path
) -> None:
    container = runtime
    session = start_session(container, tmp_path)
    wait_for(container, session.id, LifecycleState.HIBERNATED)
    container.restore.resume(ALICE, session.id)
    session = wait_for(container, session.id, LifecycleState.ACTIVE)
    # Given its run is gone: a lease nobody holds, due long ago
    session = take_lease(container, session.id, "lifecycle-lost")
    _stop_runs(container)
    overdue = session.model_copy(
        update={"hibernate_after": session.created_at - timedelta(minutes=5)}
    )
    from openagents.domain.lifecycle import with_due

    container.lifecycle._store.transition(
        session.id,
        expect=frozenset({LifecycleState.ACTIVE}),
        changes=with_due(overdue, {"hibernate_after": overdue.hibernate_after}),
        entry=None,
    )
    # When the reconciler sweeps
    swept = container.lifecycle.reconcile()
    # Then it kicks a new run, which hibernates the session
    assert swept.kicked == 1
    wait_for(container, session.id, LifecycleState.HIBERNATED)


def take_lease(container: Container, session_id: str, lease: str) -> Session:
    """Hold the active session's lifecycle lease as ``lease``. The idle timer is 3 s: when the
    loop hibernates the session first (a loaded machine), resume it and take the lease again."""
    for _ in range(5):
        try:
            container.lifecycle._store.transition(
                session_id,
                expect=frozenset({LifecycleState.ACTIVE}),
                changes={"lifecycle_run_id": lease},
                entry=None,
            )
            return container.sessions.get(ALICE, session_id)
        except StaleState:
            wait_for(container, session_id, LifecycleState.HIBERNATED)
            container.restore.resume(ALICE, session_id)
            wait_for(container, session_id, LifecycleState.ACTIVE)
    raise AssertionError("the lifecycle loop hibernated the session before every lease")


def _stop_runs(container: Container) -> None:
    import boto3

    sfn = boto3.client(
        "stepfunctions",
        endpoint_url=container.settings.stepfunctions_endpoint,
        region_name=container.settings.region,
    )
    arn = container.settings.state_machines["lifecycle"]
    for run_ in sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")["executions"]:
        sfn.stop_execution(executionArn=run_["executionArn"])


def test_status_reads_once_and_extend_moves_the_lifetime(
    runtime: Container, tmp_path: Path
) -> None:
    container = runtime
    session = start_session(container, tmp_path)
    view = container.lifecycle.status(ALICE, session.id)
    assert view.status.value == "active"
    extended = container.lifecycle.extend(ALICE, session.id)
    assert extended.sandbox_expires_at is not None
    assert session.sandbox_expires_at is not None
    step = timedelta(seconds=container.settings.extend_seconds)
    assert extended.sandbox_expires_at == session.sandbox_expires_at + step
    assert extended.lifecycle_version == session.lifecycle_version + 1
    json.dumps(view.session.model_dump(mode="json"))


class Crash(BaseException):
    """The runtime dying at a precise point (nothing after it runs)."""


class CrashOnStop:
    """The driver, except that stopping the sandbox kills the 'process' first."""

    def __init__(self, driver: Any) -> None:
        self._driver = driver

    def __getattr__(self, name: str) -> Any:
        return getattr(self._driver, name)

    def stop(self, handle: SandboxHandle) -> None:
        raise Crash


def test_a_crash_between_snapshot_and_stop_keeps_the_newest_snapshot(
    runtime: Container, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    container = runtime
    session = start_session(container, tmp_path)
    _stop_runs(container)  # this test drives the lifecycle steps itself
    run(container, session.id, "echo newest > latest.txt")
    # Given a hibernation whose verified snapshot was taken, and the runtime dies as it stops
    # the sandbox (before the hibernated transition)
    run_id = "lifecycle-crashing"
    store = container.lifecycle._store
    store.transition(
        session.id,
        expect=frozenset({LifecycleState.ACTIVE}),
        changes={"lifecycle_run_id": run_id},
        entry=None,
    )
    from openagents.domain.lifecycle import with_due

    due = session.model_copy(update={"hibernate_after": session.created_at})
    store.transition(
        session.id,
        expect=frozenset({LifecycleState.ACTIVE}),
        changes=with_due(due, {"hibernate_after": due.hibernate_after}),
        entry=None,
    )
    monkeypatch.setattr(container.lifecycle, "_driver", CrashOnStop(container.driver))
    with pytest.raises(Crash):
        container.lifecycle.hibernate(session.id, run_id)
    monkeypatch.setattr(container.lifecycle, "_driver", container.driver)
    # Then the session already points at that snapshot (written ahead of the stop)
    crashed = container.sessions.get(ALICE, session.id)
    assert crashed.lifecycle_state is LifecycleState.HIBERNATING
    assert crashed.snapshot is not None
    assert crashed.snapshot.generation == session.sandbox_generation
    assert (container.settings.home / "snapshots" / crashed.snapshot.id).exists()
    # When the restarted runtime's reconciler finds the sandbox gone
    assert crashed.sandbox is not None
    container.driver.stop(crashed.sandbox)
    container.lifecycle.reconcile(check_all=True)
    # Then the session is hibernated from that newest snapshot, and resume brings the work back
    recovered = container.sessions.get(ALICE, session.id)
    assert recovered.lifecycle_state is LifecycleState.HIBERNATED
    assert recovered.snapshot == crashed.snapshot
    assert recovered.lifecycle_run_id is None
    container.restore.resume(ALICE, session.id)
    resumed = wait_for(container, session.id, LifecycleState.ACTIVE, LifecycleState.HIBERNATED)
    assert resumed.lifecycle_state is LifecycleState.ACTIVE, resumed.lifecycle_error
    assert run(container, session.id, "cat latest.txt").stdout == "newest\n"
