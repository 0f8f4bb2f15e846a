"""Stream long-polls wait without holding a server thread, and are capped per chat, per user and
per process (429 ``too_many_streams`` with ``Retry-After``). Issue 22: one user holding 41
``wait=25`` long-polls made ``/api/health`` and another user's session list wait 21 s, each
long-poll holding one of the threadpool's 40 threads."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from openagents.services.caps import Counted
from openagents.settings import Settings
from openagents.store.runs import Run, RunStatus, RunStore

from tests.api.chat_support import run_store
from tests.api.test_chats import assert_error, new_session
from tests.support import USER_AGENT, Api, HttpApi, Reply, parse_body, serve_app

HELD = 45  # more than the 40 threads of the server's threadpool
CONDITION_TIMEOUT = 60.0  # only a failing test waits this long


@contextmanager
def server(settings: Settings, **caps: int) -> Iterator[tuple[HttpApi, Counted]]:
    capped = settings.model_copy(update=caps)
    with serve_app(capped) as (base_url, app):
        api = HttpApi(capped, base_url)
        try:
            yield api, app.state.long_polls
        finally:
            api.client.close()


def start_run(runs: RunStore, sid: str, chat_id: str, user: str = "alice") -> Run:
    run = Run(
        id=f"run-{chat_id}",
        session_id=sid,
        chat_id=chat_id,
        user_id=user,
        message_id=f"m-{chat_id}",
        assistant_message_id=f"a-{chat_id}",
        model_id="scripted/default",
        started_at=datetime.now(UTC),
    )
    runs.start(run)
    return run


def end_run(runs: RunStore, run: Run) -> None:
    runs.finish(run.id, RunStatus.ABORTED, at=datetime.now(UTC), retention=timedelta(days=1))


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + CONDITION_TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.01)


def client_of(api: HttpApi) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=api.base_url,
        timeout=CONDITION_TIMEOUT,
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
        headers={"user-agent": USER_AGENT},
    )


def reply(response: httpx.Response) -> Reply:
    return Reply(response.status_code, dict(response.headers), parse_body(response.text))


def stream_of(chat_id: str) -> str:
    return f"/api/chat/{chat_id}/stream"


def test_held_long_polls_leave_health_and_other_users_served(settings: Settings) -> None:
    """45 long-polls of one user held at once (the cap): the 46th is 429, and meanwhile
    /api/health and another user's session list answer; all 45 answer once the run ends."""
    with server(settings, long_poll_max_per_user=HELD, long_poll_max_per_chat=HELD) as (
        api,
        polls,
    ):
        sid, chat = new_session(api)
        bobs, _ = new_session(api, user="bob")
        runs = run_store(api)
        run = start_run(runs, sid, chat)
        alice = {"authorization": f"Bearer {api.token('alice')}"}
        bob = {"authorization": f"Bearer {api.token('bob')}"}
        poll = {"after": "0", "wait": "25"}

        async def scenario() -> list[httpx.Response]:
            async with client_of(api) as client:
                get: Callable[..., Coroutine[Any, Any, httpx.Response]] = client.get
                held: list[asyncio.Task[httpx.Response]] = [
                    asyncio.create_task(get(stream_of(chat), params=poll, headers=alice))
                    for _ in range(HELD)
                ]
                await until(lambda: polls.held == HELD, f"{HELD} long-polls held")
                over = reply(await get(stream_of(chat), params=poll, headers=alice))
                assert_error(over, 429, "too_many_streams")
                assert over.headers["retry-after"] == "2"
                health = await get("/api/health")
                assert health.status_code == 200
                listed = reply(await get("/api/sessions", headers=bob))
                assert listed.status == 200, listed.body
                assert [s["id"] for s in listed.body["sessions"]] == [bobs]
                # they answered while all 45 were held: none has answered yet
                assert polls.held == HELD
                assert not any(task.done() for task in held)
                await asyncio.to_thread(end_run, runs, run)
                return await asyncio.gather(*held)

        answered = asyncio.run(scenario())
        # the run ended with nothing after 0: each is answered 204, as an ended run is
        assert [response.status_code for response in answered] == [204] * HELD
        assert polls.held == 0


def test_a_long_poll_answers_as_soon_as_an_event_comes(settings: Settings) -> None:
    with server(settings) as (api, polls):
        sid, chat = new_session(api)
        runs = run_store(api)
        run = start_run(runs, sid, chat)
        alice = {"authorization": f"Bearer {api.token('alice')}"}

        async def scenario() -> httpx.Response:
            async with client_of(api) as client:
                waiting = asyncio.create_task(
                    client.get(stream_of(chat), params={"after": "0", "wait": "25"}, headers=alice)
                )
                await until(lambda: polls.held == 1, "the long-poll held")
                chunk = {"type": "text-delta", "id": "t", "delta": "hi"}
                await asyncio.to_thread(runs.append, run.id, [chunk])
                return await waiting

        page = asyncio.run(scenario()).json()
        chunk = {"type": "text-delta", "id": "t", "delta": "hi"}
        assert page["events"] == [{"seq": 1, "chunk": chunk}]
        assert page["next"] == 1
        assert polls.held == 0
        end_run(runs, run)


def test_long_polls_are_capped_per_chat_and_per_user(settings: Settings) -> None:
    with server(settings, long_poll_max_per_chat=2, long_poll_max_per_user=3) as (api, polls):
        sid, first = new_session(api)
        second = api.post(f"/api/sessions/{sid}/chats").body["chat"]["id"]
        third = api.post(f"/api/sessions/{sid}/chats").body["chat"]["id"]
        bobs, bobs_chat = new_session(api, user="bob")
        runs = run_store(api)
        started = [start_run(runs, sid, chat) for chat in (first, second, third)]
        started.append(start_run(runs, bobs, bobs_chat, user="bob"))
        alice = {"authorization": f"Bearer {api.token('alice')}"}
        bob = {"authorization": f"Bearer {api.token('bob')}"}
        poll = {"after": "0", "wait": "25"}

        async def scenario() -> None:
            async with client_of(api) as client:

                def hold(chat: str, headers: dict[str, str]) -> asyncio.Task[Any]:
                    return asyncio.create_task(
                        client.get(stream_of(chat), params=poll, headers=headers)
                    )

                held = [hold(first, alice), hold(first, alice)]
                await until(lambda: polls.held == 2, "two long-polls on the chat")
                per_chat = reply(await client.get(stream_of(first), params=poll, headers=alice))
                assert_error(per_chat, 429, "too_many_streams")
                assert "chat" in per_chat.error["error"]
                held.append(hold(second, alice))  # another chat of the same user: admitted
                await until(lambda: polls.held == 3, "a third long-poll")
                per_user = reply(await client.get(stream_of(third), params=poll, headers=alice))
                assert_error(per_user, 429, "too_many_streams")
                assert "per user" in per_user.error["error"]
                assert per_user.headers["retry-after"] == "2"
                # a poll that does not wait is no long-poll: answered at once, over the caps
                now = await client.get(
                    stream_of(first), params={"after": "0", "wait": "0"}, headers=alice
                )
                assert now.status_code == 200, now.text
                assert now.json()["events"] == []
                held.append(hold(bobs_chat, bob))  # another user's own caps
                await until(lambda: polls.held == 4, "bob's long-poll")
                for run in started:
                    await asyncio.to_thread(end_run, runs, run)
                for response in await asyncio.gather(*held):
                    assert response.status_code == 204, response.text

        asyncio.run(scenario())
        assert polls.held == 0


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"after": str(2**63)}, "after"),
        ({"after": str(2**53)}, "after"),
        ({"after": "-1"}, "after"),
        ({"after": "1e400"}, "after"),
        ({"wait": "26"}, "wait"),
        ({"wait": "nan"}, "wait"),
        ({"wait": "inf"}, "wait"),
        ({"wait": "-1"}, "wait"),
    ],
)
def test_out_of_range_stream_parameters_are_422_naming_the_field(
    api: Api, query: dict[str, str], field: str
) -> None:
    _sid, chat = new_session(api)
    assert_error(api.get(stream_of(chat), query=query), 422, "validation_error", field)


def test_another_users_chat_stream_is_404_before_any_wait(api: Api) -> None:
    _sid, chat = new_session(api)
    reply = api.get(stream_of(chat), query={"wait": "25"}, user="bob")
    assert_error(reply, 404, "not_found")


def test_a_long_runs_stream_is_read_in_pages_of_at_most_a_mebibyte(api: Api) -> None:
    """Issue 22 (low): a 607-event turn answered 7.5 MB in one ``after=0`` page. Pages stop
    past ``STREAM_PAGE_BYTES`` of chunks, and ``after=next`` reads on with no gap or repeat."""
    from openagents.services.agent_turns import STREAM_PAGE_BYTES

    sid, chat = new_session(api)
    runs = run_store(api)
    run = start_run(runs, sid, chat)
    big = "x" * (300 * 1024)  # five of these are 1.5 MiB: more than a page
    runs.append(run.id, [{"type": "text-delta", "id": "t", "delta": big} for _ in range(5)])
    end_run(runs, run)
    after, pages = 0, []
    while True:
        page = api.get(stream_of(chat), query={"after": str(after), "wait": "0"})
        if page.status == 204:
            break
        assert page.status == 200, page.body
        seqs = [event["seq"] for event in page.body["events"]]
        assert len(json.dumps(page.body)) <= STREAM_PAGE_BYTES + 1024
        pages.append(seqs)
        after = page.body["next"]
    assert pages == [[1, 2, 3], [4, 5]]
