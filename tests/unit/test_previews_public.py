"""A public preview's record is checked on every request, read again at most every
``PUBLIC_CACHE_SECONDS`` on the service's clock: a revocation another process made (the AWS
preview gateway's) is seen within that; one made here, at once. An archived session's, and a
forged or another port's secret, are refused."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from openagents.artifacts.folder import FolderArtifactStore
from openagents.auth.previews import Kind
from openagents.domain.errors import Unauthenticated
from openagents.domain.identity import Identity
from openagents.domain.models import SessionStatus
from openagents.domain.previews import PublicPreview
from openagents.sandbox.port import Sandboxd, SandboxHandle
from openagents.services.previews import PUBLIC_CACHE_SECONDS, PUBLIC_PREFIX, Previews, PreviewSite
from openagents.store.sqlite import SqliteStore

from tests.contract.helpers import create, entry

ALICE = Identity(user_id="alice", username="alice")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def no_sandbox(handle: SandboxHandle) -> Sandboxd:
    raise AssertionError("the sandbox is never contacted to admit a request")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    made = SqliteStore(None, FolderArtifactStore(tmp_path), 4096)
    yield made
    made.db.close()


def previews(store: SqliteStore, clock: Clock) -> Previews:
    site = PreviewSite("http", "localhost:8000")
    return Previews(store, no_sandbox, clock, lambda: b"k" * 32, site)


def test_a_revocation_elsewhere_is_seen_within_the_cache_window(store: SqliteStore) -> None:
    clock = Clock()
    session = create(store)
    store.publish_preview(PublicPreview(session.id, 8000, "alice", "s3cret", clock.now))
    service = previews(store, clock)
    token = PUBLIC_PREFIX + "s3cret"
    grant = service.admit(session.id, 8000, token)
    assert (grant.kind, grant.user_id, grant.port) == (Kind.PUBLIC, "alice", 8000)
    for wrong in (PUBLIC_PREFIX + "guess", PUBLIC_PREFIX, PUBLIC_PREFIX + "s3cre"):
        with pytest.raises(Unauthenticated):
            service.admit(session.id, 8000, wrong)
    with pytest.raises(Unauthenticated):
        service.admit(session.id, 8001, token)  # another port: its own record (none)

    assert store.revoke_preview(session.id, 8000)  # by another process: this one's cache holds
    clock.now += timedelta(seconds=PUBLIC_CACHE_SECONDS / 2)
    service.admit(session.id, 8000, token)
    clock.now += timedelta(seconds=PUBLIC_CACHE_SECONDS)
    with pytest.raises(Unauthenticated):
        service.admit(session.id, 8000, token)


def test_a_revocation_here_and_an_archived_session_end_it_at_once(store: SqliteStore) -> None:
    clock = Clock()
    session = create(store)
    service = previews(store, clock)
    store.publish_preview(PublicPreview(session.id, 8000, "alice", "one", clock.now))
    service.admit(session.id, 8000, PUBLIC_PREFIX + "one")
    service.revoke(ALICE, session.id, 8000)
    with pytest.raises(Unauthenticated):
        service.admit(session.id, 8000, PUBLIC_PREFIX + "one")

    store.publish_preview(PublicPreview(session.id, 8000, "alice", "two", clock.now))
    stored = store.get_session(session.id)
    assert stored is not None
    store.set_status(stored, SessionStatus.ARCHIVED, None, entry(session.id))
    with pytest.raises(Unauthenticated):
        service.admit(session.id, 8000, PUBLIC_PREFIX + "two")
    assert service.revoke_all(session.id) == 1
    assert store.public_previews(session.id) == []
