"""Deletes on both adapters: gone for readers at once, children removed (in the delete's own
transaction on SQLite, after its tombstone on DynamoDB), and the reconciler's purge finishes
whatever is left and is idempotent."""

from __future__ import annotations

from openagents.domain.models import Message, Role
from openagents.store.port import Store

from tests.contract.conftest import Backend
from tests.contract.helpers import create, new_chat


def _message(chat_id: str, message_id: str, at: object) -> Message:
    return Message(id=message_id, chat_id=chat_id, role=Role.USER, parts={}, created_at=at)


def _users(row: str) -> bool:
    """A row of the user's own (profile, titles, rate window), which outlives sessions."""
    return '"U#alice"' in row or row.startswith(('["profiles"', '["titles"', '["counters"'))


def test_purging_after_deletes_leaves_nothing_and_is_idempotent(
    backend: Backend, store: Store
) -> None:
    before = [row for row in backend.snapshot() if not _users(row)]
    session = create(store)
    extra = new_chat(session.id, "purge-extra")
    store.create_chat(session, extra, 10)
    session = store.get_session(session.id) or session
    for chat in store.list_chats(session.id):
        store.put_message(
            session, chat, _message(chat.id, f"m-{chat.id}", session.created_at), activity=None
        )
    store.delete_chat(session, extra.id)
    assert store.get_chat(session.id, extra.id) is None
    store.delete_session(store.get_session(session.id) or session)
    assert store.get_session(session.id) is None

    store.purge_deleted()
    assert store.purge_deleted() == 0  # nothing left to finish
    assert [row for row in backend.snapshot() if not _users(row)] == before
