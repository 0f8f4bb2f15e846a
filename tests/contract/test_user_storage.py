"""A user's storage bound (``store/storage.py``) on every adapter: each write counts its bytes
on the user in its own transaction, a write past the limit is refused writing nothing, deletes
give back what they counted, and a run's event log counts until the run ends."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from openagents.domain.errors import PayloadTooLarge
from openagents.domain.models import Role
from openagents.domain.runs import Run, RunStatus
from openagents.store.port import Store
from openagents.store.runs import RunStore, TurnMessage
from openagents.store.runs_dynamodb import DynamoRunStore
from openagents.store.runs_sqlite import SqliteRunStore
from openagents.store.sqlite import SqliteStore
from openagents.store.storage import StorageFull

from tests.contract.conftest import Backend
from tests.contract.helpers import create, message, new_chat


def size(text: str, message_id: str, role: Role = Role.ASSISTANT) -> int:
    parts = {"id": message_id, "role": role.value, "parts": [{"type": "text", "text": text}]}
    return len(json.dumps(parts, separators=(",", ":"), ensure_ascii=False).encode())


def limited(store: Store, limit: int | None) -> None:
    store.storage_limit = limit  # type: ignore[attr-defined]


def runs_of(store: Store) -> RunStore:
    if isinstance(store, SqliteStore):
        return SqliteRunStore(store)
    return DynamoRunStore(store)  # type: ignore[arg-type]


def test_messages_count_and_a_write_past_the_limit_writes_nothing(backend: Backend) -> None:
    store = backend.store
    session = create(store, "alice")
    chat = store.get_chat(session.id, next(iter(session.chats)))
    assert chat is not None
    store.put_message(session, chat, message(chat, "m1", Role.USER, "hello"), activity=None)
    used = store.storage_used("alice")
    assert used == size("hello", "m1", Role.USER)
    limited(store, used + 100)
    before = backend.snapshot()
    with pytest.raises(StorageFull) as refused:
        store.put_message(session, chat, message(chat, "m2", Role.USER, "x" * 200), activity=None)
    assert isinstance(refused.value, PayloadTooLarge)
    assert refused.value.code == "storage_full"
    assert "Delete sessions, chats or messages" in refused.value.message
    assert backend.snapshot() == before  # nothing half-written
    store.put_message(session, chat, message(chat, "m3", Role.USER, "x" * 10), activity=None)
    assert store.storage_used("alice") == used + size("x" * 10, "m3", Role.USER)
    assert store.storage_used("bob") == 0  # counted per user


def test_an_assistant_update_counts_the_difference(store: Store) -> None:
    session = create(store, "alice")
    chat = store.get_chat(session.id, next(iter(session.chats)))
    assert chat is not None
    store.put_message(session, chat, message(chat, "a1", text="short"), activity=None)
    store.put_message(session, chat, message(chat, "a1", text="a longer text"), activity=None)
    assert store.storage_used("alice") == size("a longer text", "a1")
    store.put_message(session, chat, message(chat, "a1", text="s"), activity=None)
    assert store.storage_used("alice") == size("s", "a1")
    limited(store, size("s", "a1") + 5)
    with pytest.raises(StorageFull):
        store.put_message(session, chat, message(chat, "a1", text="y" * 50), activity=None)
    page = store.list_messages(session.id, chat.id, 10, None)
    assert page.items[0].parts["parts"][0]["text"] == "s"  # the refused update wrote nothing


def test_deletes_give_back_what_they_counted(store: Store) -> None:
    session = create(store, "alice")
    first = store.get_chat(session.id, next(iter(session.chats)))
    assert first is not None
    second = new_chat(session.id)
    store.create_chat(session, second, 10)
    session = store.get_session(session.id) or session
    now = datetime.now(UTC)
    for chat in (first, second):
        asked = message(chat, f"u-{chat.id}", Role.USER, at=now)
        answer = message(chat, f"a-{chat.id}", text="big" * 50, at=now + timedelta(seconds=1))
        store.put_message(session, chat, asked, activity=None)
        store.put_message(session, chat, answer, activity=None)
    total = store.storage_used("alice")
    chat_bytes = size("hi", f"u-{second.id}", Role.USER) + size("big" * 50, f"a-{second.id}")
    store.delete_chat(session, second.id)
    assert store.storage_used("alice") == total - chat_bytes
    store.delete_messages_from(session, first, f"u-{first.id}", datetime.now(UTC))
    assert store.storage_used("alice") == 0
    store.put_message(session, first, message(first, "again", Role.USER), activity=None)
    session = store.get_session(session.id) or session
    store.delete_session(session)
    assert store.storage_used("alice") == 0


def test_a_fork_counts_its_copies(store: Store) -> None:
    session = create(store, "alice")
    chat = store.get_chat(session.id, next(iter(session.chats)))
    assert chat is not None
    store.put_message(session, chat, message(chat, "u1", Role.USER, "q" * 40), activity=None)
    used = store.storage_used("alice")
    fork = new_chat(session.id)
    copy = message(fork, "u1-copy", Role.USER, "q" * 40)
    limited(store, used)
    with pytest.raises(StorageFull):
        store.fork_chat(session, fork, [copy], 10)
    assert store.get_chat(session.id, fork.id) is None
    limited(store, None)
    store.fork_chat(session, fork, [copy], 10)
    assert store.storage_used("alice") == used + size("q" * 40, "u1-copy", Role.USER)


def test_charge_storage_is_bounded_and_never_below_zero(store: Store) -> None:
    limited(store, 1000)
    store.charge_storage("alice", 600)
    with pytest.raises(StorageFull):
        store.charge_storage("alice", 500)
    assert store.storage_used("alice") == 600
    store.charge_storage("alice", -600)
    assert store.storage_used("alice") == 0
    with pytest.raises(StorageFull):
        store.charge_storage("alice", 1001)  # never fits


def test_a_run_s_events_count_until_it_ends_and_its_start_is_bounded(store: Store) -> None:
    runs = runs_of(store)
    session = create(store, "alice")
    chat = store.get_chat(session.id, next(iter(session.chats)))
    assert chat is not None
    now = datetime.now(UTC)

    def run(run_id: str, message_id: str) -> Run:
        return Run(
            id=run_id,
            session_id=session.id,
            chat_id=chat.id,
            user_id="alice",
            message_id=message_id,
            assistant_message_id=f"asst-{run_id}",
            model_id="m",
            started_at=now,
        )

    user = message(chat, "u1", Role.USER, "go")
    runs.start(run("r1", "u1"), TurnMessage(session, chat, user, None))
    after_start = store.storage_used("alice")
    assert after_start == size("go", "u1", Role.USER)
    chunk = {"type": "text-delta", "id": "t", "delta": "z" * 100}
    runs.append("r1", [chunk])
    logged = len(json.dumps(chunk, separators=(",", ":")).encode())
    assert store.storage_used("alice") == after_start + logged
    limited(store, after_start + logged + 10)
    with pytest.raises(StorageFull):
        runs.append("r1", [chunk])
    assert [e.seq for e in runs.events("r1", 0)] == [1]  # the refused append wrote nothing
    runs.append("r1", [{"type": "finish"}], bounded=False)  # a run's end is never refused
    runs.finish("r1", RunStatus.FAILED, at=now, error="full", retention=timedelta(days=1))
    assert store.storage_used("alice") == after_start  # the ended run's log counts no more
    runs.finish("r1", RunStatus.FAILED, at=now, error="full", retention=timedelta(days=1))
    assert store.storage_used("alice") == after_start  # given back once
    limited(store, after_start)
    with pytest.raises(StorageFull):
        runs.start(
            run("r2", "u2"), TurnMessage(session, chat, message(chat, "u2", Role.USER), None)
        )
    assert runs.get("r2") is None
