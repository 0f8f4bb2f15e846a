"""The sparse indexes (overdue, idle, PR), counters, and every conditional claim under
concurrent threads."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import cast

from openagents.domain.lifecycle import LifecycleFields
from openagents.domain.models import LifecycleState, SessionStatus
from openagents.store.port import RateLimitExceeded, Store, TitleTaken, TooManyChats

from tests.contract.helpers import create, entry, message, new_chat, new_objects

ANY_STATE = frozenset(LifecycleState)
THREADS = 6


def change(store: Store, session_id: str, **changes: object) -> None:
    store.transition(
        session_id, expect=ANY_STATE, changes=cast(LifecycleFields, changes), entry=None
    )


def test_overdue_is_a_sparse_index(store: Store) -> None:
    now = datetime.now(UTC)
    due, later, none = create(store), create(store), create(store)
    for session in (due, later, none):  # off the index (created sessions start on it)
        change(
            store, session.id, lifecycle_state=LifecycleState.ACTIVE, due_at=None, due_shard=None
        )
    change(store, due.id, due_at=now - timedelta(seconds=5), due_shard="due#1")
    change(store, later.id, due_at=now + timedelta(minutes=5), due_shard="due#2")
    assert store.overdue(now) == [due.id]
    assert set(store.overdue(now + timedelta(minutes=6))) == {due.id, later.id}
    change(store, due.id, due_at=None, due_shard=None)  # off the index
    assert store.overdue(now) == []
    assert none.id not in store.overdue(now + timedelta(days=1))


def test_a_created_session_is_on_the_overdue_index_while_it_starts(store: Store) -> None:
    # A session created provisioning is due at its creation (the reconciler re-kicks starts)
    created = create(store)
    assert created.lifecycle_state is LifecycleState.PROVISIONING
    assert created.id in store.overdue(datetime.now(UTC))
    assert created.id in store.overdue(created.created_at)
    # and leaves the index when its start is over (no due time)
    change(store, created.id, lifecycle_state=LifecycleState.FAILED, due_at=None, due_shard=None)
    assert created.id not in store.overdue(datetime.now(UTC) + timedelta(days=1))


def test_idle_is_a_sparse_index(store: Store) -> None:
    now = datetime.now(UTC)
    old, recent = create(store), create(store)
    change(store, old.id, hibernated_at=now - timedelta(days=8), idle_shard="idle#0")
    change(store, recent.id, hibernated_at=now - timedelta(hours=1), idle_shard="idle#5")
    assert store.hibernated_before(now - timedelta(days=7)) == [old.id]
    assert set(store.hibernated_before(now)) == {old.id, recent.id}
    change(store, old.id, hibernated_at=None, idle_shard=None)
    assert store.hibernated_before(now) == [recent.id]


def test_sessions_of_a_pull_request(store: Store) -> None:
    one, two, other = create(store), create(store, "bob"), create(store)
    for session in (one, two):
        change(
            store,
            session.id,
            branch="feature",
            pr_number=7,
            pr_key="acme/app#7",
        )
    change(store, other.id, pr_number=8, pr_key="acme/app#8")
    found = store.sessions_for_pr("ACME", "App", 7)  # case-insensitive
    assert {s.id for s in found} == {one.id, two.id}
    assert all(s.pr_number == 7 and s.branch == "feature" for s in found)
    assert store.sessions_for_pr("acme", "app", 9) == []
    change(store, one.id, pr_key=None)
    assert [s.id for s in store.sessions_for_pr("acme", "app", 7)] == [two.id]


def test_archived_count_follows_archive_unarchive_and_delete(store: Store) -> None:
    first, second = create(store), create(store)
    for session in (first, second):
        store.set_status(session, SessionStatus.ARCHIVED, None, entry(session.id))
    assert store.get_user("alice").archived_count == 2
    archived = store.get_session(first.id)
    assert archived is not None
    store.delete_session(archived)
    assert store.get_user("alice").archived_count == 1


def run_at_once(count: int, work: Callable[[int], object]) -> Counter[str]:
    """``work(i)`` in ``count`` threads released together; outcomes by result or error."""
    barrier = threading.Barrier(count)
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def one(i: int) -> None:
        barrier.wait(timeout=30)
        try:
            outcome = repr(work(i))
        except Exception as exc:  # counted, compared below
            outcome = type(exc).__name__
        with lock:
            outcomes[outcome] += 1

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def test_rate_limit_holds_under_concurrent_creates(store: Store) -> None:
    def attempt(i: int) -> None:
        session, chat, audit, rate = new_objects("alice", f"t{i}", action="burst", limit=3)
        store.create_session(session, chat, audit, claim_title=True, rate=rate)

    outcomes = run_at_once(THREADS, attempt)
    assert outcomes == {"None": 3, RateLimitExceeded.__name__: THREADS - 3}


def test_one_title_claim_wins_a_race(store: Store) -> None:
    def attempt(i: int) -> None:
        session, chat, audit, rate = new_objects("alice", "Lisbon")
        store.create_session(session, chat, audit, claim_title=True, rate=rate)

    outcomes = run_at_once(THREADS, attempt)
    assert outcomes == {"None": 1, TitleTaken.__name__: THREADS - 1}
    assert store.used_titles("alice") == {"Lisbon"}


def test_one_generation_claim_and_one_lease_win_a_race(store: Store) -> None:
    session = create(store)
    claims = run_at_once(THREADS, lambda i: store.claim_generation(session.id, 1))
    assert claims == {"True": 1, "False": THREADS - 1}
    change(store, session.id, lifecycle_state=LifecycleState.ACTIVE, due_at=None, due_shard=None)
    now = datetime.now(UTC)
    leases = run_at_once(THREADS, lambda i: store.claim_lease(session.id, f"run-{i}", now))
    assert leases == {"True": 1, "False": THREADS - 1}


def test_chat_limit_holds_under_concurrent_creates(store: Store) -> None:
    session = create(store)
    outcomes = run_at_once(THREADS, lambda i: store.create_chat(session, new_chat(session.id), 4))
    assert outcomes == {"None": 3, TooManyChats.__name__: THREADS - 3}
    stored = store.get_session(session.id)
    assert stored is not None
    assert len(stored.chats) == len(store.list_chats(session.id)) == 4


def test_counters_add_up_under_concurrent_archives(store: Store) -> None:
    sessions = [create(store) for _ in range(THREADS)]

    def archive(i: int) -> None:
        store.set_status(sessions[i], SessionStatus.ARCHIVED, None, entry(sessions[i].id))

    assert run_at_once(THREADS, archive) == {"None": THREADS}
    assert store.get_user("alice").archived_count == THREADS


def test_concurrent_messages_are_all_kept(store: Store) -> None:
    session = create(store)
    (chat,) = store.list_chats(session.id)

    def post(i: int) -> str:
        return store.put_message(session, chat, message(chat, f"m{i}"), activity=None)

    assert run_at_once(THREADS, post) == {"'inserted'": THREADS}
    assert len(store.list_messages(chat.session_id, chat.id, 100, None).items) == THREADS
    got = store.get_chat(session.id, chat.id)
    assert got is not None
    assert got.message_count == THREADS
