"""The auto-archive rule archives exactly the sessions hibernated longer than the setting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from openagents.composition import build
from openagents.domain.identity import Identity
from openagents.domain.lifecycle import LifecycleFields, with_due
from openagents.domain.models import LifecycleState, ListFilter, SessionStatus
from openagents.services.archive import AutoArchived
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from tests.support import NoMetrics

ALICE = Identity(user_id="alice", username="alice")


def test_only_sessions_hibernated_longer_than_the_setting_are_archived(settings: Settings) -> None:
    container = build(settings.model_copy(update={"auto_archive_days": 7}), NoMetrics())
    store = container.sessions._store
    now = datetime.now(UTC)
    ages = {"ten-days": 10, "eight-days": 8, "one-day": 1}
    ids: dict[str, str] = {}
    for title, days in ages.items():
        session, _ = container.sessions.create(ALICE, NewSession(title=title))
        changes: LifecycleFields = {
            "lifecycle_state": LifecycleState.HIBERNATED,
            "hibernated_at": now - timedelta(days=days),
        }
        store.transition(
            session.id,
            expect=frozenset({LifecycleState.PROVISIONING}),
            changes=with_due(session, changes),
            entry=None,
        )
        ids[title] = session.id
    busy, _ = container.sessions.create(ALICE, NewSession(title="still provisioning"))
    # When the schedule runs
    result = container.archive.auto_archive()
    # Then exactly the two stale sessions are archived
    assert result == AutoArchived(stale=2, archived=2)
    status = {t: container.sessions.get(ALICE, i).status for t, i in ids.items()}
    assert status == {
        "ten-days": SessionStatus.ARCHIVED,
        "eight-days": SessionStatus.ARCHIVED,
        "one-day": SessionStatus.RUNNING,
    }
    assert container.sessions.get(ALICE, busy.id).status is SessionStatus.RUNNING
    # And archived sessions left the idle index: a second run finds nothing
    assert container.archive.auto_archive() == AutoArchived(stale=0, archived=0)
    assert container.sessions.list(ALICE, ListFilter.ARCHIVED, None, None).archived_count == 2


def test_zero_days_disables_auto_archive(settings: Settings) -> None:
    container = build(settings.model_copy(update={"auto_archive_days": 0}), NoMetrics())
    assert container.archive.auto_archive() == AutoArchived(stale=0, archived=0)
