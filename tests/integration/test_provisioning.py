"""The real provisioning ASL, run by moto's Step Functions interpreter, with the provisioner
Lambda in process and real sandboxes (sandboxd processes) from the local driver."""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.awslambda_simple.models import LambdaSimpleBackend
from openagents.composition import Container, build
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState, Session
from openagents.sandbox.port import SandboxHandle, SandboxState
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from tests.support import make_origin, provisioning_runtime

ALICE = Identity(user_id="alice", username="alice", name="Alice Smith", email="a@example.com")


class Counter:
    def __init__(self) -> None:
        self.names: list[str] = []

    def count(self, name: str, value: int = 1) -> None:
        self.names.append(name)


@pytest.fixture
def runtime(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Container]:
    with provisioning_runtime(settings, moto_endpoint, monkeypatch) as live:
        yield build(live, Counter())


def wait_for(container: Container, session_id: str, states: set[LifecycleState]) -> Session:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        session = container.sessions.get(ALICE, session_id)
        if session.lifecycle_state in states:
            return session
        time.sleep(0.2)
    raise AssertionError(f"session stayed {session.lifecycle_state}: {session.lifecycle_error}")


def test_moto_internals_we_patch_are_where_we_expect() -> None:
    # Given the pinned moto, the patched method keeps its signature
    params = list(inspect.signature(LambdaSimpleBackend.invoke).parameters)
    assert params == ["self", "function_name", "qualifier", "body", "headers", "response_headers"]


def test_existing_branch_is_cloned_and_session_becomes_active(
    runtime: Container, tmp_path: Path
) -> None:
    container = runtime
    origin = make_origin(tmp_path)
    # When a session on a local repository's existing branch is created
    session, _ = container.sessions.create(
        ALICE, NewSession(repo_url=f"file://{origin}", branch="feature")
    )
    active = wait_for(container, session.id, {LifecycleState.ACTIVE, LifecycleState.FAILED})
    # Then it is active, with timings set, and the workspace is on the branch
    assert active.lifecycle_state is LifecycleState.ACTIVE, active.lifecycle_error
    assert active.hibernate_after is not None
    assert active.last_activity_at is not None
    assert active.sandbox_expires_at is not None
    assert active.lifecycle_version == 1
    status = container.sandbox_tools.git_status(ALICE, session.id)
    assert status.branch == "feature"
    files = container.sandbox_tools.files(ALICE, session.id, ".", 1)
    assert {"README.md", "app.py", "feature.txt"} <= {e.path for e in files.entries}
    ran = container.sandbox_tools.exec(ALICE, session.id, argv=["git", "log", "--format=%s"])
    assert ran.stdout.split() == ["feature", "app", "initial"]
    events = container.sessions.events(ALICE, session.id, None, None).items
    assert [e.type for e in events][-2:] == ["sandbox.starting", "sandbox.active"]


def test_new_branch_is_created_from_the_default_branch(runtime: Container, tmp_path: Path) -> None:
    container = runtime
    origin = make_origin(tmp_path)
    session, _ = container.sessions.create(
        ALICE, NewSession(repo_url=str(origin), is_new_branch=True)
    )
    active = wait_for(container, session.id, {LifecycleState.ACTIVE, LifecycleState.FAILED})
    assert active.lifecycle_state is LifecycleState.ACTIVE, active.lifecycle_error
    status = container.sandbox_tools.git_status(ALICE, session.id)
    assert status.branch == session.branch
    assert (session.branch or "").startswith("as/")
    head = container.sandbox_tools.exec(ALICE, session.id, argv=["git", "log", "-1", "--format=%s"])
    assert head.stdout.strip() == "app"  # main's tip, not feature's
    # And the diff is cached with its line counts on the session
    container.sandbox_tools.exec(ALICE, session.id, command="printf 'a\\nb\\n' > new.txt")
    diff = container.sandbox_tools.diff(ALICE, session.id)
    assert diff.total_additions == 2
    cached, _ = container.sandbox_tools.cached_diff(ALICE, session.id)
    assert cached == diff
    assert container.sessions.get(ALICE, session.id).lines_added == 2


def test_a_failed_clone_marks_the_session_failed_and_stops_the_sandbox(
    runtime: Container, tmp_path: Path
) -> None:
    container = runtime
    origin = make_origin(tmp_path)  # the branch is missing (a missing repository is a 400)
    session, _ = container.sessions.create(
        ALICE, NewSession(repo_url=f"file://{origin}", branch="no-such-branch")
    )
    failed = wait_for(container, session.id, {LifecycleState.FAILED, LifecycleState.ACTIVE})
    assert failed.lifecycle_state is LifecycleState.FAILED
    assert (failed.lifecycle_error or "").startswith("Provisioning failed")
    assert failed.sandbox is None  # the handle of the stopped sandbox is dropped
    recorded = container.settings.home / "sandboxes" / session.id / "1" / "sandbox.json"
    handle = SandboxHandle.model_validate_json(recorded.read_text())
    probe = container.driver.probe(handle)
    assert probe.state in {SandboxState.STOPPED, SandboxState.GONE}
    events = container.sessions.events(ALICE, session.id, None, None).items
    assert events[-1].type == "sandbox.failed"
    # And a retry provisions a new generation
    _, kick = container.provisioning.ensure(ALICE, session.id)
    assert kick is not None
    assert kick.generation == 2
    again = wait_for(container, session.id, {LifecycleState.FAILED, LifecycleState.ACTIVE})
    assert again.sandbox_generation == 2


def test_repeated_kick_is_a_no_op(runtime: Container, tmp_path: Path, moto_endpoint: str) -> None:
    container = runtime
    origin = make_origin(tmp_path)
    session, _ = container.sessions.create(ALICE, NewSession(repo_url=str(origin)))
    # When provisioning is kicked again while the first run is going on, and after it ended
    assert container.provisioning.kick(session).generation == 1
    active = wait_for(container, session.id, {LifecycleState.ACTIVE, LifecycleState.FAILED})
    # the session is active a moment before its execution ends (a kick of a running execution
    # with the same input is Step Functions' idempotent success): wait for the end
    sfn = boto3.client("stepfunctions", endpoint_url=moto_endpoint, region_name="us-east-1")
    machine = container.settings.state_machines["provisioning"]
    deadline = time.monotonic() + 30
    while any(
        r["status"] == "RUNNING" for r in sfn.list_executions(stateMachineArn=machine)["executions"]
    ):
        assert time.monotonic() < deadline, "the provisioning execution never ended"
        time.sleep(0.05)
    assert container.provisioning.kick(session).started is False
    # Then one execution ran and one sandbox generation was used
    runs = sfn.list_executions(stateMachineArn=machine)["executions"]
    assert [r["name"] for r in runs].count(f"provision-{session.id}-g1") == 1
    assert active.sandbox_generation == 1


def test_the_reconciler_restarts_a_start_that_was_lost(runtime: Container) -> None:
    from openagents.domain.lifecycle import with_due

    container = runtime
    # Given a session whose provisioning never started (the runtime died inside the create)
    unkicked = build(
        container.settings.model_copy(update={"provision_on_create": False}), Counter()
    )
    session, _ = unkicked.sessions.create(ALICE, NewSession())
    assert container.sessions.get(ALICE, session.id).lifecycle_state is LifecycleState.PROVISIONING
    # When the reconciler sweeps, it kicks the start, and the session becomes active
    assert container.lifecycle.reconcile().restarted == 1
    active = wait_for(container, session.id, {LifecycleState.ACTIVE, LifecycleState.FAILED})
    assert active.lifecycle_state is LifecycleState.ACTIVE, active.lifecycle_error
    assert active.sandbox_generation == 1
    # Given a start that was under way when the runtime died (its sandbox died with it)
    assert active.sandbox is not None
    container.driver.stop(active.sandbox)
    store = container.lifecycle._store
    store.transition(
        session.id,
        expect=frozenset({LifecycleState.ACTIVE}),
        changes=with_due(active, {"lifecycle_state": LifecycleState.PROVISIONING}),
        entry=None,
    )
    # When the restarted runtime's first sweep runs, the start restarts with a new generation
    assert container.lifecycle.reconcile(check_all=True).restarted == 1
    again = wait_for(container, session.id, {LifecycleState.ACTIVE, LifecycleState.FAILED})
    assert again.lifecycle_state is LifecycleState.ACTIVE, again.lifecycle_error
    assert again.sandbox_generation == 2
    events = container.sessions.events(ALICE, session.id, 100, None).items
    assert "sandbox.run_rescued" in [e.type for e in events]
