"""Races over real HTTP: the rate limit, unique titles, idempotent chat ids, archiving.

The local server runs endpoints on a thread pool, so concurrent requests really overlap.

moto's DynamoDB serves requests from many threads without isolating them: a failed
TransactWriteItems rolls back by restoring a copy of the whole table taken when it began,
which wipes out whatever other requests wrote meanwhile. DynamoDB itself serialises
transactions, so every test here runs moto one request at a time (``serialised_dynamodb``);
the app's own requests still race each other exactly as they would in production.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest
from moto.dynamodb.responses import DynamoHandler
from openagents.domain.naming import CITIES
from openagents.settings import Settings

from tests.support import HttpApi, Reply, local_server

SESSIONS = "/api/sessions"
T = TypeVar("T")


@pytest.fixture(autouse=True)
def serialised_dynamodb(monkeypatch: pytest.MonkeyPatch) -> None:
    lock = threading.RLock()
    handle = DynamoHandler.call_action

    def one_at_a_time(self: DynamoHandler) -> Any:
        with lock:
            return handle(self)

    monkeypatch.setattr(DynamoHandler, "call_action", one_at_a_time)


@contextmanager
def serve(settings: Settings) -> Iterator[HttpApi]:
    with local_server(settings) as base_url:
        client = HttpApi(settings, base_url)
        try:
            yield client
        finally:
            client.client.close()


def at_once(count: int, call: Callable[[int], T], workers: int = 12) -> list[T]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(call, range(count)))


def sessions_of(api: HttpApi, user: str) -> list[dict[str, Any]]:
    reply = api.get(SESSIONS, user=user, query={"limit": "100"})
    assert reply.status == 200, reply.body
    found: list[dict[str, Any]] = reply.body["sessions"]
    return found


def test_rate_limit_admits_exactly_the_limit_under_a_burst(settings: Settings) -> None:
    limited = settings.model_copy(update={"rate_limit_per_minute": 10})
    window = limited.rate_limit_window_seconds
    with serve(limited) as api:
        replies = at_once(30, lambda i: api.post(SESSIONS, {"title": f"burst {i}"}), workers=15)

        assert Counter(r.status for r in replies) == {201: 10, 429: 20}, [
            (r.status, r.body) for r in replies if r.status not in (201, 429)
        ]
        for reply in (r for r in replies if r.status == 429):
            assert reply.error["code"] == "rate_limited"
            retry_after = reply.headers.get("retry-after", "")
            assert retry_after.isdigit(), reply.headers
            assert 1 <= int(retry_after) <= window
        admitted = {r.body["session"]["id"] for r in replies if r.status == 201}
        assert {s["id"] for s in sessions_of(api, "alice")} == admitted
        # the window stays closed for alice, and never opened for bob
        assert api.post(SESSIONS, {"title": "one more"}).status == 429
        assert api.post(SESSIONS, {"title": "bob's"}, user="bob").status == 201
        assert len(sessions_of(api, "alice")) == 10
        assert len(sessions_of(api, "bob")) == 1


@pytest.mark.slow
def test_concurrent_untitled_creates_get_distinct_city_titles(http_api: HttpApi) -> None:
    # the suite's rate limit (1000 an hour) never throttles this burst
    replies = at_once(40, lambda _: http_api.post(SESSIONS, {}))

    assert [r.status for r in replies] == [201] * 40, [r.body for r in replies]
    titles = [r.body["session"]["title"] for r in replies]
    assert len(set(titles)) == 40, Counter(titles).most_common(3)
    assert set(titles) <= set(CITIES)
    assert sorted(s["title"] for s in sessions_of(http_api, "alice")) == sorted(titles)


def test_concurrent_chat_creates_with_one_client_id_make_one_chat(http_api: HttpApi) -> None:
    created = http_api.post(SESSIONS, {"title": "chatty"})
    assert created.status == 201, created.body
    sid, first_chat = created.body["session"]["id"], created.body["chat"]["id"]
    path = f"{SESSIONS}/{sid}/chats"

    replies = at_once(12, lambda _: http_api.post(path, {"id": "client-chat-1"}))

    assert [r.status for r in replies] == [200] * 12, [r.body for r in replies]
    chats = [r.body["chat"] for r in replies]
    assert all(chat == chats[0] for chat in chats), chats
    assert chats[0]["id"] == "client-chat-1"
    assert chats[0]["sessionId"] == sid
    listed = http_api.get(path).body["chats"]
    assert sorted(c["id"] for c in listed) == sorted([first_chat, "client-chat-1"])
    # the id now belongs to this session: elsewhere it is a conflict, not a takeover
    other = http_api.post(SESSIONS, {"title": "other"}).body["session"]["id"]
    clash = http_api.post(f"{SESSIONS}/{other}/chats", {"id": "client-chat-1"})
    assert clash.status == 409, clash.body
    assert (clash.error["code"], clash.error["field"]) == ("conflict", "id")
    assert len(http_api.get(f"{SESSIONS}/{other}/chats").body["chats"]) == 1


def reads_before_writes(monkeypatch: pytest.MonkeyPatch, reads: int) -> None:
    """Schedule the race deterministically: hold every TransactWriteItems until ``reads``
    GetItem requests have been answered (a schedule DynamoDB may well produce)."""
    handle = DynamoHandler.call_action
    seen = Counter[str]()
    guard = threading.Lock()
    all_read = threading.Event()

    def gated(self: DynamoHandler) -> Any:
        action = self._get_action()
        if action == "TransactWriteItems":
            all_read.wait(timeout=10)
        result = handle(self)
        if action == "GetItem":
            with guard:
                seen[action] += 1
                if seen[action] >= reads:
                    all_read.set()
        return result

    monkeypatch.setattr(DynamoHandler, "call_action", gated)


def test_concurrent_archives_of_one_session_all_succeed_once(
    http_api: HttpApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = http_api.post(SESSIONS, {"title": "archive me"}).body["session"]["id"]
    requests = 8
    # every PATCH reads the session (one GetItem) before it writes
    reads_before_writes(monkeypatch, reads=requests)

    replies: list[Reply] = at_once(
        requests, lambda _: http_api.patch(f"{SESSIONS}/{sid}", {"status": "archived"})
    )

    # archiving an archived session is a no-op success, whoever got there first
    assert [r.status for r in replies] == [200] * requests, [
        r.body for r in replies if r.status != 200
    ]
    assert all(r.body["session"]["status"] == "archived" for r in replies)
    assert http_api.get(SESSIONS).body["archivedCount"] == 1
    log = http_api.get(f"{SESSIONS}/{sid}/events").body["events"]
    assert [e["type"] for e in log].count("session.archived") == 1
