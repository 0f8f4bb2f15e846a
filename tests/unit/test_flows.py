"""The flows that span services (``services/flows/``): each calls the services' own steps in
order, on fakes that write every call to one log, and a step that did nothing stops the flow."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState, Session, SessionStatus
from openagents.sandbox.port import SandboxHandle
from openagents.services.flows import Restore, SandboxReady, Unarchive
from openagents.services.lifecycle import Resumed
from openagents.services.provisioning import FromBundle, Kick, Prepared, Settled

ALICE = Identity(user_id="alice")
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def session(state: LifecycleState | None, generation: int = 2, **fields: Any) -> Session:
    return Session(
        id="s1",
        user_id="alice",
        title="flows",
        created_at=T0,
        updated_at=T0,
        lifecycle_state=state,
        sandbox_generation=generation,
        **fields,
    )


HANDLE = SandboxHandle(driver="local", ref="r", session_id="s1", generation=3)
ACTIVE = session(LifecycleState.ACTIVE, 3, sandbox=HANDLE)


class Log:
    """Every service step the flow called, in order: (service, step, arguments)."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, str, tuple[Any, ...]]] = []

    def __call__(self, service: str, step: str, *args: Any) -> None:
        self.steps.append((service, step, args))


class Lifecycle:
    def __init__(self, log: Log, resumed: Resumed | None = None) -> None:
        self.log, self.resumed = log, resumed

    def begin_restore(self, identity: Identity, session_id: str) -> Resumed:
        self.log("lifecycle", "begin_restore", session_id)
        assert self.resumed is not None
        return self.resumed

    def kick(self, session: Session, reason: str, *, force: bool = False) -> bool:
        self.log("lifecycle", "kick", session.id, reason, force)
        return True


class Provisioning:
    def __init__(self, log: Log, prepared: Prepared | FromBundle | None = None) -> None:
        self.log, self.prepared = log, prepared
        self.kick_fails = False

    def kick(self, session: Session, generation: int | None = None) -> Kick:
        self.log("provisioning", "kick", session.id, generation)
        if self.kick_fails:
            raise RuntimeError("Step Functions is down")
        return Kick(started=True, generation=generation or 1)

    def prepare(self, session_id: str, generation: int) -> Prepared | FromBundle:
        self.log("provisioning", "prepare", session_id, generation)
        assert self.prepared is not None
        return self.prepared

    def activate(self, session_id: str, generation: int) -> Settled:
        self.log("provisioning", "activate", session_id, generation)
        return Settled(state="active", session=ACTIVE)


class Archive:
    def __init__(self, log: Log, unarchived: Session | None = None) -> None:
        self.log, self.unarchived = log, unarchived

    def unarchive(self, session: Session) -> Session | None:
        self.log("archive", "unarchive", session.id)
        return self.unarchived

    def restore_workspace(self, session: Session, handle: SandboxHandle) -> str:
        self.log("archive", "restore_workspace", session.id, handle.generation)
        return "feature"


class Servers:
    def __init__(self, log: Log, name: str) -> None:
        self.log, self.name = log, name
        self.done = threading.Event()

    def restart(self, session: Session) -> None:
        self.log(self.name, "restart", session.id)
        self.done.set()


# ------------------------------------------------------------------ restore


def test_a_resume_moves_to_restoring_then_kicks_the_next_generation() -> None:
    log = Log()
    restoring = session(LifecycleState.RESTORING, 2)
    resumed = Resumed(restoring=True, restored_from="snap", session=restoring)
    flow = Restore(cast(Any, Lifecycle(log, resumed)), cast(Any, Provisioning(log)))
    assert flow.resume(ALICE, "s1") is resumed
    assert log.steps == [
        ("lifecycle", "begin_restore", ("s1",)),
        ("provisioning", "kick", ("s1", 3)),
    ]


def test_a_resume_of_a_running_session_kicks_nothing() -> None:
    log = Log()
    running = Resumed(already_running=True, state=LifecycleState.ACTIVE)
    flow = Restore(cast(Any, Lifecycle(log, running)), cast(Any, Provisioning(log)))
    assert flow.resume(ALICE, "s1") is running
    assert log.steps == [("lifecycle", "begin_restore", ("s1",))]


# ------------------------------------------------------------ sandbox ready


def ready(log: Log, prepared: Prepared | FromBundle | None = None, **kw: Any) -> SandboxReady:
    return SandboxReady(
        cast(Any, Provisioning(log, prepared)),
        cast(Any, Archive(log)),
        cast(Any, Lifecycle(log)),
        cast(Any, kw.get("dev_servers") or Servers(log, "dev_servers")),
        cast(Any, kw.get("code_editor") or Servers(log, "code_editor")),
        servers_in_background=kw.get("background", False),
    )


def test_an_unarchived_workspace_comes_from_its_bundle() -> None:
    log = Log()
    bundled = FromBundle(session(LifecycleState.PROVISIONING, 3), HANDLE)
    assert ready(log, bundled).prepare("s1", 3) == Prepared(branch="feature", from_bundle=True)
    assert log.steps == [
        ("provisioning", "prepare", ("s1", 3)),
        ("archive", "restore_workspace", ("s1", 3)),
    ]


def test_any_other_workspace_is_provisioning_own() -> None:
    log = Log()
    assert ready(log, Prepared(branch="main")).prepare("s1", 3) == Prepared(branch="main")
    assert log.steps == [("provisioning", "prepare", ("s1", 3))]


def test_an_active_sandbox_starts_the_idle_loop_then_its_servers() -> None:
    log = Log()
    assert ready(log).activate("s1", 3).state == "active"
    assert log.steps == [
        ("provisioning", "activate", ("s1", 3)),
        ("lifecycle", "kick", ("s1", "sandbox-active", False)),
        ("dev_servers", "restart", ("s1",)),
        ("code_editor", "restart", ("s1",)),
    ]


def test_on_one_machine_the_servers_start_off_the_task_path() -> None:
    log = Log()
    editor = Servers(log, "code_editor")
    ready(log, code_editor=editor, background=True).activate("s1", 3)
    assert editor.done.wait(5)
    assert log.steps[:2] == [
        ("provisioning", "activate", ("s1", 3)),
        ("lifecycle", "kick", ("s1", "sandbox-active", False)),
    ]
    assert log.steps[2:] == [
        ("dev_servers", "restart", ("s1",)),
        ("code_editor", "restart", ("s1",)),
    ]


# ---------------------------------------------------------------- unarchive


def unarchive(
    log: Log, unarchived: Session | None, provisioning: Provisioning | None = None
) -> Unarchive:
    return Unarchive(
        cast(Any, Archive(log, unarchived)),
        cast(Any, provisioning or Provisioning(log)),
        cast(Any, Lifecycle(log)),
    )


def test_an_unarchive_kicks_the_next_sandboxs_start() -> None:
    log = Log()
    starting = session(LifecycleState.PROVISIONING, 4)
    archived = session(LifecycleState.ARCHIVED, 4, status=SessionStatus.ARCHIVED)
    assert unarchive(log, starting).unarchive(archived) is starting
    assert log.steps == [("archive", "unarchive", ("s1",)), ("provisioning", "kick", ("s1", 5))]


def test_an_unarchived_sandbox_that_still_runs_gets_its_idle_loop() -> None:
    log = Log()
    archived = session(LifecycleState.ARCHIVED, 3, status=SessionStatus.ARCHIVED)
    assert unarchive(log, ACTIVE).unarchive(archived) is ACTIVE
    assert log.steps == [
        ("archive", "unarchive", ("s1",)),
        ("lifecycle", "kick", ("s1", "unarchived", True)),
    ]


def test_a_session_not_archived_is_left_alone() -> None:
    log = Log()
    assert unarchive(log, None).unarchive(ACTIVE) is ACTIVE
    assert log.steps == [("archive", "unarchive", ("s1",))]


def test_a_failed_start_kick_still_unarchives(caplog: pytest.LogCaptureFixture) -> None:
    log = Log()
    provisioning = Provisioning(log)
    provisioning.kick_fails = True
    starting = session(LifecycleState.RESTORING, 4)
    archived = session(LifecycleState.ARCHIVED, 4, status=SessionStatus.ARCHIVED)
    assert unarchive(log, starting, provisioning).unarchive(archived) is starting
    assert "provisioning kick after unarchive of s1 failed" in caplog.text
