"""Creates are all or nothing; the title registry; deletes remove every item (both adapters)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from openagents.composition import Container
from openagents.domain import naming
from openagents.domain.errors import Conflict, NotFound, RateLimited
from openagents.domain.identity import Identity
from openagents.domain.models import ListFilter, Role
from openagents.services.sessions import NewSession
from openagents.store.port import RateLimitExceeded, Store, TitleTaken

from tests.contract.conftest import Backend
from tests.contract.helpers import create, new_objects

ALICE = Identity(user_id="alice", username="alice", name="Alice Liddell")
BOB = Identity(user_id="bob", username="bob")


def candidates(monkeypatch: pytest.MonkeyPatch, names: list[str]) -> None:
    """Make the service try exactly these generated titles, in order."""
    monkeypatch.setattr(naming, "city_candidates", lambda used: iter(names))


def test_create_session_writes_session_chat_and_entry(app: Container, store: Store) -> None:
    session, chat = app.sessions.create(ALICE, NewSession())
    assert session.title in naming.CITIES
    assert store.get_session(session.id) is not None
    assert [c.id for c in store.list_chats(session.id)] == [chat.id]
    assert [e.type for e in store.list_events(session.id, 10, None).items] == ["session.created"]
    assert store.used_titles("alice") == {session.title}


def test_create_with_a_given_title_registers_it(app: Container, store: Store) -> None:
    session, _ = app.sessions.create(ALICE, NewSession(title="  My work  "))
    assert session.title == "My work"
    assert "My work" in store.used_titles("alice")


def test_given_titles_may_repeat(app: Container) -> None:
    first, _ = app.sessions.create(ALICE, NewSession(title="Same"))
    second, _ = app.sessions.create(ALICE, NewSession(title="Same"))
    assert first.id != second.id
    assert second.title == "Same"


def test_rate_limited_create_leaves_nothing_behind(backend: Backend) -> None:
    limited = backend.settings.model_copy(update={"rate_limit_per_minute": 2})
    app = backend.build(limited)
    app.sessions.create(ALICE, NewSession(title="one"))
    app.sessions.create(ALICE, NewSession(title="two"))
    before = backend.snapshot()

    with pytest.raises(RateLimited) as info:
        app.sessions.create(ALICE, NewSession(title="three"))

    assert 1 <= info.value.retry_after_seconds <= limited.rate_limit_window_seconds
    assert backend.snapshot() == before
    app.sessions.create(BOB, NewSession(title="bob's"))  # the limit is per user
    assert len(backend.snapshot()) > len(before)


def test_a_refusal_never_promises_more_than_one_window(backend: Backend) -> None:
    """Concurrent creates stamp their hits after this one read its clock: the oldest counted
    hit can leave the window later than now + window. Retry-After still says one window."""
    limited = backend.settings.model_copy(update={"rate_limit_per_minute": 2})
    app = backend.build(limited)
    later = datetime.now(UTC) + timedelta(seconds=5)
    for _ in range(2):
        create(backend.store, "alice", action="create-session", limit=2, at=later)

    with pytest.raises(RateLimited) as info:
        app.sessions.create(ALICE, NewSession(title="three"))

    assert info.value.retry_after_seconds == limited.rate_limit_window_seconds


def test_the_rate_window_slides(store: Store) -> None:
    """At most ``limit`` creates in any window-long span (the helpers' window is an hour),
    whatever clock boundary falls inside it; a refusal says when the oldest hit leaves."""
    start = datetime.now(UTC).replace(minute=59, second=58, microsecond=0)
    minute = timedelta(minutes=1)
    create(store, action="slide", limit=2, at=start)
    create(store, action="slide", limit=2, at=start + 30 * minute)  # across the hour
    with pytest.raises(RateLimitExceeded) as refused:
        create(store, action="slide", limit=2, at=start + 59 * minute)
    assert refused.value.retry_at == start + 60 * minute
    later = create(store, action="slide", limit=2, at=start + 60 * minute + timedelta(seconds=1))
    assert store.get_session(later.id) is not None  # the first hit left the window
    with pytest.raises(RateLimitExceeded) as again:
        create(store, action="slide", limit=2, at=start + 61 * minute)
    assert again.value.retry_at == start + 90 * minute
    create(store, action="other", limit=2, at=start + 61 * minute)  # per action


def test_claimed_title_is_taken_and_the_transaction_writes_nothing(
    app: Container, store: Store, backend: Backend
) -> None:
    existing, _ = app.sessions.create(ALICE, NewSession())
    before = backend.snapshot()

    session, chat, entry, rate = new_objects("alice", existing.title, "x")
    with pytest.raises(TitleTaken):
        store.create_session(session, chat, entry, claim_title=True, rate=rate)
    assert backend.snapshot() == before
    assert store.get_session(session.id) is None

    # another user's registry is separate, and an unclaimed title goes through
    bobs = new_objects("bob", existing.title, "b")
    store.create_session(*bobs[:3], claim_title=True, rate=bobs[3])
    free = new_objects("alice", "Unused title", "y")
    store.create_session(*free[:3], claim_title=True, rate=free[3])
    assert store.get_session("sess-y") is not None
    assert store.get_session("sess-b") is not None
    # without the claim, a taken title may be used again
    again = new_objects("alice", existing.title, "z")
    store.create_session(*again[:3], claim_title=False, rate=again[3])
    assert store.get_session("sess-z") is not None


def test_generated_title_race_retries_with_the_next_candidate(
    app: Container, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    candidates(monkeypatch, ["Paris"])
    app.sessions.create(ALICE, NewSession())
    candidates(monkeypatch, ["Paris", "Paris", "Rome"])  # a stale read: Paris is taken

    session, _ = app.sessions.create(ALICE, NewSession())

    assert session.title == "Rome"
    assert store.used_titles("alice") == {"Paris", "Rome"}
    listed = app.sessions.list(ALICE, ListFilter.ALL, None, None).page.items
    assert sorted(s.title for s in listed) == ["Paris", "Rome"]


def test_generated_title_gives_up_after_eight_attempts(
    app: Container, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    candidates(monkeypatch, ["Paris"])
    app.sessions.create(ALICE, NewSession())
    before = backend.snapshot()
    candidates(monkeypatch, ["Paris"] * 20)
    with pytest.raises(Conflict):
        app.sessions.create(ALICE, NewSession())
    assert backend.snapshot() == before


def test_title_is_free_again_after_delete(
    app: Container, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, _ = app.sessions.create(ALICE, NewSession())
    assert session.title in store.used_titles("alice")

    app.sessions.delete(ALICE, session.id)

    assert session.title not in store.used_titles("alice")
    candidates(monkeypatch, [session.title])
    again, _ = app.sessions.create(ALICE, NewSession())
    assert again.title == session.title
    assert again.id != session.id


def test_title_is_free_again_after_rename(
    app: Container, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, _ = app.sessions.create(ALICE, NewSession())
    old = session.title

    renamed = app.sessions.update(ALICE, session.id, title="  Renamed  ", status=None)

    assert renamed.title == "Renamed"
    assert app.sessions.get(ALICE, session.id).title == "Renamed"
    assert store.used_titles("alice") == {"Renamed"}
    candidates(monkeypatch, [old])
    again, _ = app.sessions.create(ALICE, NewSession())
    assert again.title == old
    candidates(monkeypatch, ["Renamed"] * 8)  # the renamed title is claimed
    with pytest.raises(Conflict):
        app.sessions.create(ALICE, NewSession())


def test_a_title_shared_by_two_sessions_stays_used_until_both_go(store: Store) -> None:
    first = new_objects("alice", "Shared", "s1")
    store.create_session(*first[:3], claim_title=False, rate=first[3])
    second = new_objects("alice", "Shared", "s2")
    store.create_session(*second[:3], claim_title=False, rate=second[3])
    store.delete_session(first[0])
    assert store.used_titles("alice") == {"Shared"}
    store.delete_session(second[0])
    assert store.used_titles("alice") == set()


def test_used_titles_are_per_user(app: Container, store: Store) -> None:
    a, _ = app.sessions.create(ALICE, NewSession(title="Alpha"))
    app.sessions.create(BOB, NewSession(title="Beta"))
    assert store.used_titles("alice") == {"Alpha"}
    assert store.used_titles("bob") == {"Beta"}
    assert a.user_id == "alice"


def test_delete_session_removes_every_item(app: Container, backend: Backend) -> None:
    keep, _ = app.sessions.create(BOB, NewSession(title="Keep"))
    before = [row for row in backend.snapshot() if "alice" not in row]
    session, chat = app.sessions.create(ALICE, NewSession(title="Gone"))
    extra = app.chats.create(ALICE, session.id, "extra-chat")
    for i, target in enumerate((chat.id, extra.id)):
        app.chats.post_message(
            ALICE,
            session.id,
            target,
            message_id=f"m-{i}",
            role=Role.USER,
            ui_message={"id": f"m-{i}", "role": "user", "parts": []},
        )

    app.sessions.delete(ALICE, session.id)

    remaining = [row for row in backend.snapshot() if "alice" not in row]
    assert remaining == before
    with pytest.raises(NotFound):
        app.sessions.get(ALICE, session.id)
    assert app.sessions.get(BOB, keep.id).title == "Keep"
    assert backend.store.list_messages(chat.session_id, chat.id, 10, None).items == []
    # the ids are free again
    assert app.chats.create(BOB, keep.id, "extra-chat").id == "extra-chat"
