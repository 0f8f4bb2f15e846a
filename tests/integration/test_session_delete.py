"""Deleting a session takes its sandbox with it, before the answer: no process of any of its
generations left, its snapshot and its volumes gone (real sandboxes, the lifecycle ASL on moto)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from openagents.composition import Container, build
from openagents.domain.errors import NotFound
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState, Session
from openagents.sandbox.port import ExecResult
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from tests.support import NoMetrics, make_origin, provisioning_runtime

ALICE = Identity(user_id="alice", username="alice", name="Alice Smith", email="a@example.com")
MARKER = "sleep 31337"


@pytest.fixture
def runtime(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Container]:
    quick = settings.model_copy(
        update={"idle_timeout_seconds": 2, "lifecycle_min_sleep_seconds": 0.5}
    )
    with provisioning_runtime(quick, moto_endpoint, monkeypatch) as live:
        yield build(live, NoMetrics())


def wait_for(container: Container, session_id: str, state: LifecycleState) -> Session:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        session = container.sessions.get(ALICE, session_id)
        if session.lifecycle_state in (state, LifecycleState.FAILED):
            assert session.lifecycle_state is state, session.lifecycle_error
            return session
        time.sleep(0.1)
    raise AssertionError(f"session never became {state}")


def run(container: Container, session_id: str, command: str) -> ExecResult:
    result = container.sandbox_tools.exec(ALICE, session_id, command=command)
    assert result.exit_code == 0, result
    return result


def processes_of(session_id: str, cgroups: set[str]) -> list[int]:
    """Every process whose command line names the session (bwrap, the launcher), runs the
    marker, or sits in one of the sandbox's cgroups."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            groups = set((entry / "cgroup").read_text().splitlines())
        except OSError:
            continue
        if session_id in command or MARKER in command or groups & cgroups:
            found.append(int(entry.name))
    return found


def test_delete_stops_the_sandbox_and_removes_its_snapshot_and_volumes(
    runtime: Container, tmp_path: Path
) -> None:
    container = runtime
    home = container.settings.home
    origin = str(make_origin(tmp_path))
    session, _ = container.sessions.create(ALICE, NewSession(repo_url=origin, branch="feature"))
    session = wait_for(container, session.id, LifecycleState.ACTIVE)
    run(container, session.id, "echo work > work.txt")
    hibernated = wait_for(container, session.id, LifecycleState.HIBERNATED)  # gen 1 kept its volume
    assert hibernated.snapshot is not None
    container.restore.resume(ALICE, session.id)
    resumed = wait_for(container, session.id, LifecycleState.ACTIVE)  # gen 2 from the snapshot
    assert resumed.sandbox is not None
    run(container, session.id, f"(setsid nohup {MARKER} >/dev/null 2>&1 &)")
    cgroups = {
        line
        for line in Path(f"/proc/{resumed.sandbox.ref}/cgroup").read_text().splitlines()
        if not line.endswith(":/")
    }
    assert processes_of(session.id, cgroups)  # the probe sees the running sandbox
    assert (home / "sandboxes" / session.id).is_dir()
    assert list((home / "snapshots" / session.id).iterdir())

    container.sessions.delete(ALICE, session.id)

    assert processes_of(session.id, cgroups) == []  # already at the answer, no wait
    assert not (home / "sandboxes" / session.id).exists()  # every generation's volume
    assert not (home / "snapshots" / session.id).exists()
    with pytest.raises(NotFound):
        container.sessions.get(ALICE, session.id)
