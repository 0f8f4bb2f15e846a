"""A resume that races an archive answers 409 ``session_archived`` — never ``200
alreadyRunning`` on a session the archive took — and a resume of an archived session is 409
too (one machine's store; the race is staged between the resume's read and its write)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from openagents.composition import Container, build
from openagents.domain.errors import SessionArchived
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState, SessionStatus, SnapshotRef
from openagents.services.lifecycle import Resumed
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from tests.support import NoMetrics

ALICE = Identity(user_id="alice", username="alice", name="Alice", email="a@example.com")


@pytest.fixture
def app(settings: Settings) -> Container:
    return build(settings, NoMetrics())


def snapshot(session_id: str) -> SnapshotRef:
    return SnapshotRef(
        driver="local",
        id="snap-1",
        session_id=session_id,
        generation=1,
        size_bytes=1,
        created_at=datetime.now(UTC),
    )


def hibernated(app: Container) -> str:
    session, _ = app.sessions.create(ALICE, NewSession(title="race"))
    app.lifecycle._store.transition(
        session.id,
        expect=frozenset({LifecycleState.PROVISIONING}),
        changes={"lifecycle_state": LifecycleState.HIBERNATED, "snapshot": snapshot(session.id)},
        entry=None,
    )
    return session.id


def test_a_resume_that_loses_to_an_archive_is_409(
    app: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = hibernated(app)
    store = app.lifecycle._store
    transition = store.transition
    restores: list[Any] = []
    monkeypatch.setattr(app.provisioning, "kick", lambda *args: restores.append(args))

    def archive_first(*args: Any, **kwargs: Any) -> Any:
        # the archive commits between the resume's read and its conditional write
        monkeypatch.setattr(store, "transition", transition)
        app.sessions.update(ALICE, session_id, title=None, status=SessionStatus.ARCHIVED)
        return transition(*args, **kwargs)

    monkeypatch.setattr(store, "transition", archive_first)
    with pytest.raises(SessionArchived) as refused:
        app.restore.resume(ALICE, session_id)

    assert refused.value.field == "sessionId"
    assert restores == []
    current = app.sessions.get(ALICE, session_id)
    assert current.status is SessionStatus.ARCHIVED
    assert current.lifecycle_state is LifecycleState.ARCHIVED
    with pytest.raises(SessionArchived):  # and once archived, plainly
        app.restore.resume(ALICE, session_id)


def test_a_resume_that_loses_to_another_resume_is_already_running(
    app: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = hibernated(app)
    store = app.lifecycle._store
    transition = store.transition
    monkeypatch.setattr(app.provisioning, "kick", lambda *args: None)

    def resume_first(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(store, "transition", transition)
        assert app.restore.resume(ALICE, session_id).restoring is True
        return transition(*args, **kwargs)

    monkeypatch.setattr(store, "transition", resume_first)
    answer = app.restore.resume(ALICE, session_id)
    assert answer == Resumed(already_running=True, state=LifecycleState.RESTORING)
