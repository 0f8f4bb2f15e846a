"""The one-machine runtime under concurrent users: ``openagents dev``'s store (SQLite, its
default) behind the local server, thirty users posting messages at once. Every request succeeds
and every acknowledged message can be read back."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest
from openagents.settings import Settings

from tests.support import HttpApi, local_server

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]
USERS = 30
POSTS = 2


def test_thirty_users_posting_at_once_all_succeed(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path / "home",
        store="sqlite",
        provision_on_create=False,
        rate_limit_per_minute=10_000,
    )
    with local_server(settings) as base_url:
        api = HttpApi(settings, base_url)
        users = []
        for i in range(USERS):
            body = api.post("/api/sessions", {"title": f"u{i}"}, user=f"u{i}").body
            users.append((f"u{i}", body["session"]["id"], body["chat"]["id"]))
        statuses: Counter[int] = Counter()
        acknowledged: Counter[str] = Counter()
        barrier = threading.Barrier(USERS)

        def post(user: str, session: str, chat: str) -> None:
            barrier.wait(timeout=30)
            for n in range(POSTS):
                message = {"id": f"{user}-{n}", "role": "user", "parts": ["hi"]}
                reply = api.post(
                    f"/api/sessions/{session}/chats/{chat}/messages",
                    {"message": message},
                    user=user,
                )
                statuses[reply.status] += 1
                if reply.status == 200:
                    acknowledged[chat] += 1

        threads = [threading.Thread(target=post, args=user) for user in users]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=90)
        stored = {
            chat: len(
                api.get(f"/api/sessions/{session}/chats/{chat}/messages", user=user).body[
                    "messages"
                ]
            )
            for user, session, chat in users
        }
        api.client.close()
    assert statuses == {200: USERS * POSTS}, statuses
    assert all(stored[chat] >= n for chat, n in acknowledged.items()), stored
