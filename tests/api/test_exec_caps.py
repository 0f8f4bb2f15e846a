"""`exec` caps concurrent commands per session and per user (429 with `Retry-After`), runs
them off the API's request threads, and `/api/health` stays fast while they run."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import httpx
import pytest
from openagents.services.sandbox_tools import ExecPool, TooManyCommands
from openagents.settings import Settings

from tests.api.exec_support import BLOCK, FAIL, ExecServer, exec_server
from tests.support import Api

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def capped(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[ExecServer]:
    caps = {"exec_max_per_session": 2, "exec_max_per_user": 3, "exec_max_total": 64}
    with exec_server(settings.model_copy(update=caps), monkeypatch) as server:
        yield server


def assert_busy(reply: httpx.Response, cap: str) -> None:
    assert reply.status_code == 429, reply.text
    assert int(reply.headers["retry-after"]) >= 1
    body = reply.json()
    assert body["code"] == "too_many_commands"
    assert set(body) == {"error", "code", "field"}
    assert cap in body["error"]


def test_caps_per_session_and_per_user_with_concurrent_requests(capped: ExecServer) -> None:
    first, second = capped.active_session("alice"), capped.active_session("alice")
    bobs = capped.active_session("bob")
    with ThreadPoolExecutor(max_workers=8) as pool:
        held = [pool.submit(capped.exec, "alice", first, BLOCK) for _ in range(2)]
        capped.sandbox.wait_inside(2)
        assert_busy(capped.exec("alice", first, "echo 1"), "in a session")  # session cap: 2
        assert capped.exec("bob", first, "echo 1").status_code == 404  # checked before the cap
        held.append(pool.submit(capped.exec, "alice", second, BLOCK))
        capped.sandbox.wait_inside(3)
        assert_busy(capped.exec("alice", second, "echo 2"), "per user")  # user cap: 3
        # another user is not held up by alice's commands
        held.append(pool.submit(capped.exec, "bob", bobs, BLOCK))
        capped.sandbox.wait_inside(4)
        capped.sandbox.release()
        replies = [future.result(timeout=30) for future in held]
    assert [reply.status_code for reply in replies] == [200] * 4
    assert replies[0].json()["stdout"] == "block\n"
    # every slot was given back: the caps admit again
    assert capped.exec("alice", first, "echo 3").status_code == 200
    assert capped.container.sandbox_tools._exec_pool.running() == 0


def test_a_burst_over_the_cap_gets_429_and_the_rest_run(capped: ExecServer) -> None:
    session = capped.active_session("alice")
    with ThreadPoolExecutor(max_workers=10) as pool:
        burst = [pool.submit(capped.exec, "alice", session, BLOCK) for _ in range(10)]
        deadline = time.monotonic() + 20
        while sum(f.done() for f in burst) < 8:  # the 8 over the cap answer at once
            assert time.monotonic() < deadline, "over-cap requests were not refused"
            time.sleep(0.02)
        capped.sandbox.wait_inside(2)
        capped.sandbox.release()
        statuses = Counter(future.result(timeout=30).status_code for future in burst)
    assert statuses == {200: 2, 429: 8}


def test_failed_commands_give_their_slot_back(capped: ExecServer) -> None:
    session = capped.active_session("alice")
    for _ in range(5):  # more than the cap: each failure released its slot
        reply = capped.exec("alice", session, FAIL)
        assert reply.status_code == 400, reply.text
    assert capped.container.sandbox_tools._exec_pool.running() == 0
    assert capped.exec("alice", session, "echo ok").status_code == 200


def test_health_answers_while_the_caps_worth_of_commands_block(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's reproduction: 45 long commands from one user (more than the 40 request
    threads Starlette shares) used to stall `/api/health` until they ended."""
    count = 45
    caps = {"exec_max_per_session": count, "exec_max_per_user": count, "exec_max_total": count}
    with (
        exec_server(settings.model_copy(update=caps), monkeypatch) as server,
        ThreadPoolExecutor(max_workers=count) as pool,
    ):
        session = server.active_session("alice")
        held = [pool.submit(server.exec, "alice", session, BLOCK) for _ in range(count)]
        server.sandbox.wait_inside(count)
        started = time.monotonic()
        health = server.client.get("/api/health", timeout=5)
        elapsed = time.monotonic() - started
        assert health.status_code == 200
        assert elapsed < 2, f"/api/health took {elapsed:.1f} s"
        # other routes on request threads answer too (a session read)
        token = server.token("alice")
        read = server.client.get(
            f"/api/sessions/{session}", headers={"authorization": f"Bearer {token}"}, timeout=5
        )
        assert read.status_code == 200
        assert_busy(server.exec("alice", session, "echo over"), "in a session")
        server.sandbox.release()
        assert {future.result(timeout=30).status_code for future in held} == {200}


def test_exec_answers_through_the_lambda_handler_and_over_http(api: Api) -> None:
    """The route is async on both transports; a session without a sandbox still answers 409."""
    session_id = api.post("/api/sessions", {"title": "idle"}).body["session"]["id"]
    reply = api.post(f"/api/sessions/{session_id}/sandbox/exec", {"command": "ls"})
    assert reply.status == 409, reply.body
    assert reply.error["code"] == "sandbox_not_running"
    other = api.post(f"/api/sessions/{session_id}/sandbox/exec", {"command": "ls"}, user="bob")
    assert other.status == 404


def test_the_pool_never_admits_over_its_caps_across_threads() -> None:
    pool = ExecPool(per_session=3, per_user=5, total=64)
    peak: Counter[str] = Counter()
    inside: Counter[str] = Counter()
    lock = threading.Lock()
    gate = threading.Barrier(40)
    refused: list[int] = []

    def attempt(index: int) -> None:
        session = f"s{index % 2}"
        gate.wait()
        try:
            slot = pool.admit("alice", session)
        except TooManyCommands:
            refused.append(index)
            return
        with slot:
            with lock:
                inside[session] += 1
                inside["user"] += 1
                for key in (session, "user"):
                    peak[key] = max(peak[key], inside[key])
            time.sleep(0.05)
            with lock:
                inside[session] -= 1
                inside["user"] -= 1

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert max(peak["s0"], peak["s1"]) <= 3
    assert peak["user"] <= 5
    assert refused
    assert pool.running() == 0
    pool.shutdown()


def test_finished_and_cancelled_commands_give_their_slot_back() -> None:
    pool = ExecPool(per_session=1, per_user=1, total=1)
    release = threading.Event()
    first = pool.submit(pool.admit("alice", "s"), lambda: {"ok": release.wait(10)})
    with pytest.raises(TooManyCommands):
        pool.admit("bob", "t")  # the total: 1
    release.set()
    assert first.result(timeout=10) == {"ok": True}
    assert pool.running() == 0
    # a command still queued when cancelled (its thread busy elsewhere) frees its slot too
    busy = threading.Event()
    blocker = pool._executor.submit(busy.wait, 10)
    queued: Future[dict[str, object]] = pool.submit(pool.admit("alice", "s"), lambda: {})
    assert pool.running() == 1
    assert queued.cancel()
    assert pool.running() == 0
    busy.set()
    blocker.result(timeout=10)
    pool.shutdown()
