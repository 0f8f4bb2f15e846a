"""The lifecycle across downtime and sandbox deaths (issue 21): a session whose idle time or max
lifetime passed while the runtime was down hibernates soon after the start, one whose timer has
not passed waits for it; a sandbox that dies under its loop starts again on its own volume. The
runtime's start sweep (``reconcile(check_all=True)``) runs on a controlled clock and the loop's
steps are driven by hand, so nothing waits for real time."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from openagents.composition import Container, build
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState, Session
from openagents.services.lifecycle import Action
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from tests.support import NoMetrics, provisioning_runtime, wait_active

ALICE = Identity(user_id="alice", username="alice", name="Alice Smith", email="a@example.com")
MIN_SLEEP = 5.0


@pytest.fixture
def container(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Container]:
    hours = settings.model_copy(
        update={
            "idle_timeout_seconds": 3600,
            "max_lifetime_seconds": 7200,
            "lifecycle_min_sleep_seconds": MIN_SLEEP,
        }
    )
    with provisioning_runtime(hours, moto_endpoint, monkeypatch) as live:
        built = build(live, NoMetrics())
        yield built
        built.driver.close()  # what this container started (a reboot): the runtime stops its own


def looping(container: Container, session_id: str) -> Session:
    """Active with its first lifecycle run on record: the sandbox-ready flow kicks the loop just
    after the session turns active, and a sweep racing that kick would lose its own (a real
    restart has no such race: the kick died with the previous runtime)."""
    session = wait_active(container, ALICE, session_id)
    deadline = time.monotonic() + 60
    while session.lifecycle_run_id is None:
        assert time.monotonic() < deadline, "the loop never started"
        time.sleep(0.05)
        session = container.sessions.get(ALICE, session_id)
    return session


def restarted_at(container: Container, session: Session) -> str:
    """The runtime's start sweep (its sandbox alive, the clock already set): the run it started."""
    assert container.lifecycle.reconcile(check_all=True).kicked == 1
    after = container.sessions.get(ALICE, session.id)
    assert after.lifecycle_state is LifecycleState.ACTIVE
    assert after.sandbox_generation == session.sandbox_generation  # re-adopted, kept
    assert after.lifecycle_run_id not in (None, session.lifecycle_run_id)  # a new run
    return str(after.lifecycle_run_id)


@pytest.mark.parametrize("passed", ["idle", "max-lifetime", "neither"])
def test_a_timer_that_passed_while_down_hibernates_soon_after_the_start(
    container: Container, monkeypatch: pytest.MonkeyPatch, passed: str
) -> None:
    created, _ = container.sessions.create(ALICE, NewSession())
    session = looping(container, created.id)
    assert session.hibernate_after is not None
    assert session.sandbox_expires_at is not None
    moment = {
        "idle": session.hibernate_after + timedelta(minutes=1),
        "max-lifetime": session.sandbox_expires_at,
        "neither": session.hibernate_after - timedelta(minutes=10),
    }[passed]
    if passed == "max-lifetime":  # active all along: only the hard lifetime ran out
        container.lifecycle._store.transition(
            session.id,
            expect=frozenset({LifecycleState.ACTIVE}),
            changes={"hibernate_after": moment + timedelta(hours=1)},
            entry=None,
        )
    monkeypatch.setattr(container.lifecycle, "_clock", lambda: moment)
    run_id = restarted_at(container, session)
    first = container.lifecycle.claim(session.id, run_id)
    assert first.action is Action.WAIT
    assert first.wake_at is not None
    if passed == "neither":  # the timer keeps its meaning: the loop sleeps until it is due
        assert first.wake_at == session.hibernate_after
        assert container.lifecycle.evaluate(session.id, run_id).action is Action.WAIT
        return
    assert first.wake_at <= moment + timedelta(seconds=MIN_SLEEP)  # soon after the start
    woke = moment + timedelta(seconds=MIN_SLEEP)
    monkeypatch.setattr(container.lifecycle, "_clock", lambda: woke)
    assert container.lifecycle.evaluate(session.id, run_id).action is Action.HIBERNATE
    assert container.lifecycle.hibernate(session.id, run_id).reason == "hibernated"
    hibernated = container.sessions.get(ALICE, session.id)
    assert hibernated.lifecycle_state is LifecycleState.HIBERNATED
    assert hibernated.snapshot is not None


def test_a_sandbox_that_dies_under_its_loop_starts_again_on_its_volume(
    container: Container,
) -> None:
    created, _ = container.sessions.create(ALICE, NewSession())
    session = looping(container, created.id)
    assert session.sandbox is not None
    assert session.lifecycle_run_id is not None
    container.sandbox_tools.exec(ALICE, session.id, command="echo kept > kept.txt")
    container.driver.stop(session.sandbox)  # it died (OOM, killed): its volume is still there
    decision = container.lifecycle.evaluate(session.id, session.lifecycle_run_id)
    assert decision.action is Action.WAIT  # the same run keeps looking after it
    rebooted = container.sessions.get(ALICE, session.id)
    assert rebooted.lifecycle_state is LifecycleState.ACTIVE
    assert rebooted.sandbox_generation == session.sandbox_generation + 1
    assert rebooted.lifecycle_run_id == session.lifecycle_run_id
    kept = container.sandbox_tools.exec(ALICE, session.id, command="cat kept.txt")
    assert kept.stdout == "kept\n"
