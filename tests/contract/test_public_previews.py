"""Public previews (``PreviewStore``) on every adapter: one per port, listed by port, revoked,
and gone with their session."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from openagents.domain.previews import PublicPreview
from openagents.store.port import Store

from tests.contract.helpers import create

AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def preview(session_id: str, port: int, secret: str) -> PublicPreview:
    return PublicPreview(session_id, port, "alice", secret, AT)


def test_a_public_preview_is_recorded_once_per_port_and_listed_by_port(store: Store) -> None:
    session = create(store)
    assert store.public_preview(session.id, 8000) is None
    assert store.public_previews(session.id) == []
    first = store.publish_preview(preview(session.id, 8000, "s-one"))
    assert first == preview(session.id, 8000, "s-one")
    assert store.publish_preview(preview(session.id, 8000, "s-two")) == first  # once
    store.publish_preview(preview(session.id, 3000, "s-three"))
    assert store.public_preview(session.id, 8000) == first
    listed = store.public_previews(session.id)
    assert [(p.port, p.secret) for p in listed] == [(3000, "s-three"), (8000, "s-one")]
    assert store.public_previews(create(store).id) == []  # another session's are its own


def test_concurrent_publishes_of_one_port_agree_on_one(store: Store) -> None:
    session = create(store)
    with ThreadPoolExecutor(4) as pool:
        made = list(
            pool.map(lambda i: store.publish_preview(preview(session.id, 5173, f"s-{i}")), range(4))
        )
    assert len({p.secret for p in made}) == 1
    assert store.public_preview(session.id, 5173) == made[0]


def test_revoking_ends_a_preview_and_a_new_one_can_follow(store: Store) -> None:
    session = create(store)
    store.publish_preview(preview(session.id, 8000, "old"))
    assert store.revoke_preview(session.id, 8000) is True
    assert store.revoke_preview(session.id, 8000) is False  # had none
    assert store.public_preview(session.id, 8000) is None
    assert store.publish_preview(preview(session.id, 8000, "new")).secret == "new"


def test_deleting_the_session_revokes_its_previews(store: Store) -> None:
    session = create(store)
    store.publish_preview(preview(session.id, 8000, "gone"))
    store.delete_session(store.get_session(session.id) or session)
    assert store.public_preview(session.id, 8000) is None
    assert store.public_previews(session.id) == []
