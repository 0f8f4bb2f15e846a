"""A session started without a repository gains one (``SessionStore.set_repository``), on both
adapters: the repository, the branch the session pushes and its audit entry (and outbox event)
in one write, only while the session has none — a second write is refused and writes nothing."""

from __future__ import annotations

import pytest
from openagents.domain.models import AuditEntry, Repo
from openagents.store.port import Gone, RepositoryAlreadySet

from tests.contract.conftest import Backend
from tests.contract.helpers import create, new_objects

REPO = Repo(owner="acme", name="app", clone_url="https://github.com/acme/app.git")


def attached(session_id: str, at_suffix: str = "1") -> AuditEntry:
    from datetime import UTC, datetime

    return AuditEntry(
        id=f"attach-{session_id}-{at_suffix}",
        session_id=session_id,
        at=datetime.now(UTC),
        type="session.repository_attached",
        detail={"repoUrl": REPO.clone_url, "branch": "as/0123abcd", "commit": "a" * 40},
    )


def test_the_repository_and_its_branch_are_written_with_the_entry(backend: Backend) -> None:
    store = backend.store
    session = create(store, title="No repo yet")
    updated = store.set_repository(session, REPO, "as/0123abcd", True, attached(session.id))
    assert (updated.repo_owner, updated.repo_name, updated.clone_url) == (
        "acme",
        "app",
        REPO.clone_url,
    )
    assert (updated.own_branch, updated.branch, updated.is_new_branch) == (
        "as/0123abcd",
        "as/0123abcd",
        True,
    )
    stored = store.get_session(session.id)
    assert stored is not None
    assert stored.repo == REPO
    assert (stored.own_branch, stored.is_new_branch) == ("as/0123abcd", True)
    assert stored.lifecycle_state == session.lifecycle_state  # no lifecycle field moved
    kinds = [e.type for e in store.list_events(session.id, 50, None).items]
    assert kinds.count("session.repository_attached") == 1
    assert [e.detail["type"] for e in backend.outbox(session.id)][-1] == (
        "session.repository_attached"
    )


def test_a_local_repository_without_an_owner_is_kept_as_it_is(backend: Backend) -> None:
    store = backend.store
    session = create(store, title="Local")
    local = Repo(owner=None, name="app", clone_url="file:///srv/repos/app.git")
    store.set_repository(session, local, "main-work", False, attached(session.id))
    stored = store.get_session(session.id)
    assert stored is not None
    assert stored.repo == local
    assert (stored.own_branch, stored.is_new_branch) == ("main-work", False)


def test_a_session_that_has_a_repository_is_refused_and_nothing_is_written(
    backend: Backend,
) -> None:
    store = backend.store
    session = create(store, title="Once")
    store.set_repository(session, REPO, "as/0123abcd", True, attached(session.id))
    before = backend.snapshot()
    other = Repo(owner="acme", name="other", clone_url="https://github.com/acme/other.git")
    with pytest.raises(RepositoryAlreadySet):
        store.set_repository(session, other, "as/ffff0000", True, attached(session.id, "2"))
    assert backend.snapshot() == before
    stored = store.get_session(session.id)
    assert stored is not None
    assert (stored.repo_name, stored.own_branch) == ("app", "as/0123abcd")


def test_a_session_created_with_a_repository_is_refused(backend: Backend) -> None:
    store = backend.store
    session, chat, created, rate = new_objects("alice", "Has one")
    session = session.model_copy(
        update={"repo_owner": "acme", "repo_name": "app", "clone_url": REPO.clone_url}
    )
    store.create_session(session, chat, created, claim_title=True, rate=rate)
    with pytest.raises(RepositoryAlreadySet):
        store.set_repository(session, REPO, "x/1", True, attached(session.id))


def test_an_unknown_session_is_gone(backend: Backend) -> None:
    session, _, _, _ = new_objects("alice", "Never created")
    with pytest.raises(Gone):
        backend.store.set_repository(session, REPO, "x/1", True, attached(session.id))
