"""Races through the HTTP API (the local server runs endpoints on a thread pool, so requests
really overlap): a burst of creates against the rate limit, a burst of resumes, and an archive
racing resumes. moto answers DynamoDB one request at a time (``serialised_dynamodb``), as
DynamoDB serialises transactions; the app's own requests still race."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
from openagents.settings import Settings

from tests.reliability.conftest import (
    SESSIONS,
    audit_types,
    fingerprint,
    hibernate,
    message_ids,
    post_message,
    run,
    start_session,
    wait_state,
)
from tests.support import HttpApi, Reply, local_server

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("serialised_dynamodb")]
T = TypeVar("T")


def together(count: int, call: Callable[[int], T]) -> list[T]:
    """``count`` calls released at the same moment from their own threads."""
    barrier = threading.Barrier(count)

    def released(index: int) -> T:
        barrier.wait(timeout=30)
        return call(index)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(released, range(count)))


def live_sandboxes(session_id: str) -> list[int]:
    """The sandboxes serving this session's workspaces (any generation): the outermost live
    process whose command line names one (prlimit/bubblewrap, or sandboxd without them)."""
    marker = f"/sandboxes/{session_id}/".encode()
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if marker in command and fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    return sorted(pid for pid, parent in parents.items() if parent not in parents)


def test_fifty_parallel_creates_admit_exactly_the_limit(settings: Settings) -> None:
    # the default limit (10 per window), a sliding window: no clock boundary to avoid
    limited = settings.model_copy(
        update={"rate_limit_per_minute": 10, "rate_limit_window_seconds": 3600}
    )
    with local_server(limited) as base_url:
        api = HttpApi(limited, base_url)

        replies: list[Reply] = together(50, lambda i: api.post(SESSIONS, {"title": f"b{i}"}))

        statuses = Counter(r.status for r in replies)
        assert statuses == {201: 10, 429: 40}, [
            (r.status, r.body) for r in replies if r.status not in (201, 429)
        ]
        for reply in replies:
            if reply.status == 429:
                assert reply.body["code"] == "rate_limited"
                assert 1 <= int(reply.headers["retry-after"]) <= 3600
        admitted = sorted(r.body["session"]["id"] for r in replies if r.status == 201)
        listed = api.get(SESSIONS, query={"limit": "100"}).body["sessions"]
        assert sorted(s["id"] for s in listed) == admitted
        titles = [s["title"] for s in listed]
        assert len(set(titles)) == 10
        api.client.close()


@pytest.mark.slow
def test_twenty_parallel_resumes_start_one_sandbox(
    live_api: HttpApi, live_settings: Settings, tmp_path: Path
) -> None:
    sid = start_session(live_api, tmp_path)
    run(live_api, sid, "echo kept > kept.txt")
    before = fingerprint(live_api, sid)
    hibernate(live_api, sid)
    assert live_sandboxes(sid) == []

    replies = together(20, lambda _: live_api.put("/api/sandbox/snapshot", {"sessionId": sid}))

    assert [r.status for r in replies] == [200] * 20, [r.body for r in replies]
    restoring = [r for r in replies if r.body["restoring"]]
    assert len(restoring) == 1, [r.body for r in replies]
    assert all(r.body["alreadyRunning"] for r in replies if not r.body["restoring"])
    session = wait_state(live_api, sid, "active", "hibernated", "failed")
    assert session["lifecycleState"] == "active", session["lifecycleError"]
    generations = sorted(p.name for p in (live_settings.home / "sandboxes" / sid).iterdir())
    assert generations == ["1", "2"]
    assert len(live_sandboxes(sid)) == 1
    assert fingerprint(live_api, sid) == before
    assert audit_types(live_api, sid).count("sandbox.restoring") == 1


@pytest.mark.slow
def test_archive_racing_resumes_ends_consistent(
    live_api: HttpApi, live_settings: Settings, tmp_path: Path
) -> None:
    sid = start_session(live_api, tmp_path)
    run(live_api, sid, "echo work > work.txt && echo more >> app.py")
    posted = [post_message(live_api, sid, f"before {i}") for i in range(3)]
    before = fingerprint(live_api, sid)
    hibernate(live_api, sid)

    def act(index: int) -> Reply:
        if index == 0:
            return live_api.patch(f"{SESSIONS}/{sid}", {"status": "archived"})
        return live_api.put("/api/sandbox/snapshot", {"sessionId": sid})

    replies = together(6, act)

    assert replies[0].status == 200, replies[0].body
    for reply in replies[1:]:  # a resume that lost the race to the archive is a clear 409
        assert reply.status in (200, 409), reply.body
    finalized = wait_for_event(live_api, sid, "session.archive_finalized", limit=90)
    assert finalized, audit_types(live_api, sid)
    archived = live_api.get(f"{SESSIONS}/{sid}").body["session"]
    assert (archived["status"], archived["lifecycleState"]) == ("archived", "archived")
    assert archived["lifecycleError"] is None
    assert wait_until(lambda: live_sandboxes(sid) == [], 30)
    status = live_api.get("/api/sandbox/status", query={"sessionId": sid}).body
    assert status["status"] == "no_sandbox"
    # the user continues: unarchive brings every file back from the bundle
    unarchived = live_api.patch(f"{SESSIONS}/{sid}", {"status": "running"})
    assert unarchived.status == 200, unarchived.body
    session = wait_state(live_api, sid, "active", "failed", "hibernated", limit=90)
    if session["lifecycleState"] == "failed":
        # A restore run started by a resume that lost the race can outlive the archive and
        # fail the unarchived session when the archiver's temporary sandbox took its
        # generation number (see the report). The user's retry path must still work:
        retried = live_api.post("/api/sandbox", {"sessionId": sid})
        assert retried.status == 200, retried.body
        session = wait_state(live_api, sid, "active", "failed", limit=90)
    assert session["lifecycleState"] == "active", (session["lifecycleError"], events(live_api, sid))
    assert fingerprint(live_api, sid) == before
    assert message_ids(live_api, sid) == posted
    assert len(live_sandboxes(sid)) == 1


def events(api: HttpApi, session_id: str) -> list[tuple[str, Any]]:
    found = api.get(f"{SESSIONS}/{session_id}/events", query={"limit": "100"}).body["events"]
    return [(e["type"], e["detail"]) for e in found]


def wait_for_event(api: HttpApi, session_id: str, kind: str, limit: float) -> bool:
    return wait_until(lambda: kind in audit_types(api, session_id), limit)


def wait_until(check: Callable[[], Any], limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return bool(check())


@pytest.mark.slow
def test_a_stale_restore_run_cannot_fail_an_unarchived_session(
    live_api: HttpApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One schedule of the race above, forced with gates on the provisioning steps."""
    from openagents.services.provisioning import ProvisioningService

    sid = start_session(live_api, tmp_path)
    run(live_api, sid, "echo work > work.txt")
    before = fingerprint(live_api, sid)
    hibernate(live_api, sid)
    archived, unarchived, stale_failed = (threading.Event() for _ in range(3))
    start, probe, fail = (
        ProvisioningService.start,
        ProvisioningService.probe,
        ProvisioningService.fail,
    )

    def gated_start(self: ProvisioningService, session_id: str, generation: int) -> Any:
        if session_id == sid and generation == 2:
            archived.wait(60)  # the resume's run starts only after the archive finalised
        if session_id == sid and generation > 2:
            stale_failed.wait(20)  # the unarchive's run starts after the stale run failed
        return start(self, session_id, generation)

    def gated_probe(self: ProvisioningService, session_id: str, generation: int, n: int) -> Any:
        if session_id == sid and generation == 2:
            unarchived.wait(60)
        return probe(self, session_id, generation, n)

    def signalled_fail(
        self: ProvisioningService, session_id: str, generation: int, error: Any
    ) -> Any:
        try:
            return fail(self, session_id, generation, error)
        finally:
            if session_id == sid and generation == 2:
                stale_failed.set()

    monkeypatch.setattr(ProvisioningService, "start", gated_start)
    monkeypatch.setattr(ProvisioningService, "probe", gated_probe)
    monkeypatch.setattr(ProvisioningService, "fail", signalled_fail)

    assert live_api.put("/api/sandbox/snapshot", {"sessionId": sid}).body["restoring"]
    assert live_api.patch(f"{SESSIONS}/{sid}", {"status": "archived"}).status == 200
    assert wait_for_event(live_api, sid, "session.archive_finalized", limit=90)
    archived.set()
    time.sleep(1.5)  # the stale run passes its start and waits to probe
    assert live_api.patch(f"{SESSIONS}/{sid}", {"status": "running"}).status == 200
    unarchived.set()

    session = wait_state(live_api, sid, "active", "failed", limit=90)
    assert session["lifecycleState"] == "active", session["lifecycleError"]
    assert fingerprint(live_api, sid) == before
