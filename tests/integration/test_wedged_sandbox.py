"""A fork bomb that left its command's process group no longer wedges a session (issue 22): the
lifecycle loop's hibernation and the archive kill the sandbox's commands (the driver's
``kill_commands``: its cgroup frozen, everything but sandboxd and its launchers killed) before
the snapshot or the bundle, on the moto workflows with real sandboxes."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from openagents.composition import Container, build
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState, Session, SessionStatus
from openagents.sandbox.confine import Cgroup, Machine
from openagents.sandbox.local import LocalDriver
from openagents.sandbox.port import SandboxError, SandboxHandle, SnapshotRef
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from tests.integration.test_sandbox_isolation import BOMB, bombs_on_host
from tests.support import NoMetrics, make_origin, provisioning_runtime, wait_active

ALICE = Identity(user_id="alice", username="alice", name="Alice Smith", email="a@example.com")
PIDS = 48


def runtime_with(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, idle: int
) -> Iterator[Container]:
    quick = settings.model_copy(
        update={
            "idle_timeout_seconds": idle,
            "lifecycle_min_sleep_seconds": 0.5,
            "snapshot_retry_seconds": 1,
            "turn_heartbeat_seconds": 60,
            "archive_retry_attempts": 2,
            "archive_retry_base_seconds": 1.0,
            "sandbox_pids": PIDS,
        }
    )
    with provisioning_runtime(quick, moto_endpoint, monkeypatch) as live:
        yield build(live, NoMetrics())


@pytest.fixture
def idle_runtime(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Container]:
    yield from runtime_with(settings, moto_endpoint, monkeypatch, idle=4)


@pytest.fixture
def busy_runtime(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Container]:
    yield from runtime_with(settings, moto_endpoint, monkeypatch, idle=600)


def wait_until(
    container: Container, session_id: str, check: Callable[[Session], bool], limit: float = 90
) -> Session:
    deadline = time.monotonic() + limit
    session = container.sessions.get(ALICE, session_id)
    while time.monotonic() < deadline:
        session = container.sessions.get(ALICE, session_id)
        if check(session):
            return session
        time.sleep(0.1)
    raise AssertionError(f"condition not met: {session.lifecycle_state} {session.lifecycle_error}")


def events(container: Container, session_id: str) -> list[str]:
    return [e.type for e in container.sessions.events(ALICE, session_id, 200, None).items]


def bombed(container: Container, tmp_path: Path) -> Session:
    """An active session whose sandbox a detached fork bomb holds at its pids limit."""
    session, _ = container.sessions.create(
        ALICE, NewSession(repo_url=str(make_origin(tmp_path)), branch="feature")
    )
    active = wait_active(container, ALICE, session.id)
    done = container.sandbox_tools.exec(ALICE, session.id, command="echo work > work.txt")
    assert done.exit_code == 0, done
    with contextlib.suppress(Exception):  # its answer may itself be starved of a thread
        container.sandbox_tools.exec(ALICE, session.id, command=BOMB)
    handle = active.sandbox
    assert handle is not None
    folder = pids_folder(handle)
    deadline = time.monotonic() + 60
    while int((folder / "pids.current").read_text()) < PIDS:
        assert time.monotonic() < deadline, "the bomb never reached the pids limit"
        time.sleep(0.05)
    return active


def pids_folder(handle: SandboxHandle) -> Path:
    name = f"{handle.session_id}-{handle.generation}"
    folders = [
        f for f in Cgroup.named(Machine.detect(), name).folders if (f / "pids.current").exists()
    ]
    assert folders, "the sandbox has no pids cgroup"
    return folders[0]


def wedged(container: Container, session_id: str) -> bool:
    try:
        answer = container.sandbox_tools.exec(
            ALICE, session_id, command="echo alive", timeout_seconds=5
        )
    except Exception:
        return True
    return answer.stdout != "alive\n"


def test_a_fork_bombed_session_still_hibernates_and_resumes(
    idle_runtime: Container, tmp_path: Path
) -> None:
    container = idle_runtime
    session = bombed(container, tmp_path)
    hibernated = wait_until(
        container, session.id, lambda s: s.lifecycle_state is LifecycleState.HIBERNATED
    )
    assert hibernated.snapshot is not None
    assert hibernated.snapshot.sha256
    assert hibernated.lifecycle_error is None
    assert "sandbox.snapshot_failed" not in events(container, session.id)
    assert bombs_on_host() == []
    container.restore.resume(ALICE, session.id)
    wait_active(container, ALICE, session.id)
    back = container.sandbox_tools.exec(ALICE, session.id, command="cat work.txt")
    assert back.stdout == "work\n", back


def test_a_fork_bombed_session_still_archives(busy_runtime: Container, tmp_path: Path) -> None:
    container = busy_runtime
    session = bombed(container, tmp_path)
    assert wedged(container, session.id)
    container.sessions.update(ALICE, session.id, title=None, status=SessionStatus.ARCHIVED)
    done = wait_until(
        container, session.id, lambda s: not s.archive_pending and s.lifecycle_error is None
    )
    assert done.bundle is not None
    assert (container.settings.artifacts_dir / done.bundle.key).exists()
    assert "session.archive_finalized" in events(container, session.id)
    assert bombs_on_host() == []
    handle = session.sandbox
    assert handle is not None
    name = f"{handle.session_id}-{handle.generation}"
    assert Cgroup.named(Machine.detect(), name).folders == []  # stopped to the last process


def test_a_failed_snapshot_is_killed_and_tried_once_more(
    idle_runtime: Container, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hibernation kills the commands before its snapshot; a snapshot that fails anyway
    (a command born meanwhile) is killed again and tried once more, in the same run."""
    calls: list[str] = []
    real_snapshot, real_kill = LocalDriver.snapshot, LocalDriver.kill_commands

    def snapshot(self: LocalDriver, handle: SandboxHandle) -> SnapshotRef:
        calls.append("snapshot")
        if calls.count("snapshot") == 1:
            raise SandboxError("sandbox request failed: connection error (POST /snapshot)")
        return real_snapshot(self, handle)

    def kill_commands(self: LocalDriver, handle: SandboxHandle) -> int:
        calls.append("kill")
        return real_kill(self, handle)

    monkeypatch.setattr(LocalDriver, "snapshot", snapshot)
    monkeypatch.setattr(LocalDriver, "kill_commands", kill_commands)
    container = idle_runtime
    session, _ = container.sessions.create(
        ALICE, NewSession(repo_url=str(make_origin(tmp_path)), branch="feature")
    )
    wait_active(container, ALICE, session.id)
    hibernated = wait_until(
        container, session.id, lambda s: s.lifecycle_state is LifecycleState.HIBERNATED
    )
    assert hibernated.snapshot is not None
    assert calls == ["kill", "snapshot", "kill", "snapshot"]
    assert "sandbox.snapshot_failed" not in events(container, session.id)
