"""The lifecycle loop wakes when a session is due, not before: checked on the decision the loop
hands to Step Functions' Wait state (no timing in the test). ``make bench`` measures the
resulting lateness on the real runtime (``bench/lifecycle.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from openagents.composition import build
from openagents.domain.identity import Identity
from openagents.domain.lifecycle import with_due
from openagents.domain.models import LifecycleState
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from functions.lifecycle.handler import payload
from tests.support import NoMetrics

pytestmark = pytest.mark.timeout(60)
ALICE = Identity(user_id="alice", username="alice")


def wake_of(settings: Settings, fraction: float, ahead: float = 10) -> tuple[datetime, datetime]:
    """(hibernateAfter, the Wait's wake-up) for an active session due in ``ahead`` s +
    ``fraction`` (from the last whole second)."""
    container = build(settings, NoMetrics())
    session, _ = container.sessions.create(ALICE, NewSession(title="due"))
    now = datetime.now(UTC).replace(microsecond=0)
    due = now + timedelta(seconds=ahead + fraction)
    changes = with_due(
        session.model_copy(update={"lifecycle_state": LifecycleState.ACTIVE}),
        {
            "lifecycle_state": LifecycleState.ACTIVE,
            "hibernate_after": due,
            "sandbox_expires_at": now + timedelta(hours=5),
            "lifecycle_run_id": "run-precision",
        },
    )
    container.lifecycle._store.transition(
        session.id,
        expect=frozenset({LifecycleState.PROVISIONING}),
        changes=changes,
        entry=None,
    )
    decision = payload(container.lifecycle.claim(session.id, "run-precision"))
    assert decision["action"] == "wait", decision
    wake = datetime.strptime(decision["wakeAt"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return due, wake


def test_a_due_time_on_a_whole_second_is_the_wake_up(settings: Settings) -> None:
    due, wake = wake_of(settings, 0.0)
    assert wake == due


def test_the_wake_up_is_never_before_the_due_time(settings: Settings) -> None:
    due, wake = wake_of(settings, 0.6)
    assert wake >= due, (wake, due)


def test_a_session_due_sooner_than_the_minimum_wait_is_woken_when_due(
    settings: Settings,
) -> None:
    due, wake = wake_of(settings, 0.0, ahead=2)
    assert wake - due < timedelta(seconds=1), (wake, due)
