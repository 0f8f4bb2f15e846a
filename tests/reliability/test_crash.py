"""Crash safety of the one-machine runtime: ``openagents dev`` (a child process, SQLite store,
real sandboxes) under a write load over HTTP, killed with SIGKILL at three moments — right after
an acknowledged message (between messages), while a session create is in flight, and during a
hibernation (after its snapshot was written ahead, before the sandbox stopped) — and restarted
each time. After every restart: every acknowledged write is there (messages answered 2xx,
sessions answered 201), no session is half-created (each has its chat and its audit entry),
no event is lost (events.jsonl holds the event of every committed audit entry). At the end no
start or lifecycle lease is left stuck: every session settles active or hibernated, and a
hibernated one holds no lease."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from openagents.local.dynamodb import free_port
from openagents.settings import Settings

from tests.support import HttpApi

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]  # ~80 s on an idle machine
USERS = ("alice", "bob")
SESSIONS = "/api/sessions"
SETTLED = {"active", "hibernated"}


@dataclass
class Acknowledged:
    sessions: dict[str, str] = field(default_factory=dict)  # session id -> user
    chats: dict[str, tuple[str, str]] = field(default_factory=dict)  # chat -> (user, session)
    messages: dict[str, set[str]] = field(default_factory=dict)  # chat id -> message ids
    lock: threading.Lock = field(default_factory=threading.Lock)


class Runtime:
    """``openagents dev`` as a child process: started, SIGKILLed, restarted on one home."""

    def __init__(self, tmp: Path) -> None:
        self.home = tmp / "home"
        self.port = free_port()
        self.log = tmp / "dev.log"
        self.settings = Settings(home=self.home, port=self.port)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAGENTS_")} | {
            "OPENAGENTS_HOME": str(self.home),
            "OPENAGENTS_PORT": str(self.port),
            "OPENAGENTS_LOCAL_REPO_ROOTS": str(tmp),
            "OPENAGENTS_IDLE_TIMEOUT_SECONDS": "2",
            "OPENAGENTS_LIFECYCLE_MIN_SLEEP_SECONDS": "0.5",
            "OPENAGENTS_SWEEP_SECONDS": "2",
            "OPENAGENTS_RATE_LIMIT_PER_MINUTE": "100000",
        }
        self.api = HttpApi(self.settings, f"http://127.0.0.1:{self.port}")  # mints the secret
        self.api.client.timeout = httpx.Timeout(10)
        self.process: subprocess.Popen[bytes] | None = None
        self.starts: list[float] = []

    def start(self) -> None:
        began = time.monotonic()
        command = [str(Path(sys.executable).parent / "openagents"), "dev", "--port", str(self.port)]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = began + 40
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            try:
                if self.api.get(SESSIONS).status == 200:
                    self.starts.append(time.monotonic() - began)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"openagents dev did not start: {self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)  # its process group
            self.process.wait(timeout=10)
        # sandboxes outlive the server (their own sessions): hibernated, none left running
        down = [str(Path(sys.executable).parent / "openagents"), "down"]
        subprocess.run(down, env=self.env, capture_output=True, timeout=120, check=False)

    def row(self, session_id: str) -> dict[str, Any]:
        """The stored session, read straight from the database (read-only, WAL)."""
        db = sqlite3.connect(f"file:{self.home / 'openagents.db'}?mode=ro", uri=True, timeout=5)
        try:
            found = db.execute("SELECT data FROM sessions WHERE id = ?", (session_id,)).fetchone()
        finally:
            db.close()
        assert found is not None, session_id
        data: dict[str, Any] = json.loads(found[0])
        return data


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    live = Runtime(tmp_path)
    try:
        yield live
    finally:
        live.stop()
        live.api.client.close()


def until(check: Callable[[], Any], limit: float, step: float = 0.1) -> Any:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if result := check():
                return result
        except httpx.HTTPError:
            pass
        time.sleep(step)
    raise AssertionError("condition not met in time")


def create(api: HttpApi, user: str, seen: Acknowledged) -> dict[str, Any] | None:
    try:
        reply = api.post(SESSIONS, {}, user=user)
    except httpx.HTTPError:
        return None  # the runtime died under the request: not acknowledged
    if reply.status != 201:
        return None
    body: dict[str, Any] = reply.body
    with seen.lock:
        seen.sessions[body["session"]["id"]] = user
        seen.chats[body["chat"]["id"]] = (user, body["session"]["id"])
    return body


def post(api: HttpApi, chat: str, message_id: str, seen: Acknowledged) -> bool:
    user, session = seen.chats[chat]
    message = {"id": message_id, "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    path = f"{SESSIONS}/{session}/chats/{chat}/messages"
    try:
        reply = api.post(path, {"message": message}, user=user)
    except httpx.HTTPError:
        return False
    if 200 <= reply.status < 300:
        with seen.lock:
            seen.messages.setdefault(chat, set()).add(message_id)
        return True
    return False


class Writer(threading.Thread):
    """Posts messages round the given chats until stopped (or the runtime dies under it)."""

    def __init__(self, api: HttpApi, chats: list[str], seen: Acknowledged, tag: str) -> None:
        super().__init__(daemon=True)
        self.api, self.chats, self.seen, self.tag = api, chats, seen, tag
        self.halt = threading.Event()
        self.sent = 0

    def run(self) -> None:
        while not self.halt.is_set():
            chat = self.chats[self.sent % len(self.chats)]
            post(self.api, chat, f"{self.tag}-{self.sent}", self.seen)
            self.sent += 1
            self.halt.wait(0.02)  # a steady load, not a CPU hog on a shared machine


def check_nothing_lost(live: Runtime, seen: Acknowledged) -> dict[str, int]:
    """Every acknowledged write is there; every session whole; every committed event out."""
    api = live.api
    listed = {
        s["id"]: user
        for user in USERS
        for s in api.get(SESSIONS, user=user, query={"status": "all", "limit": "100"}).body[
            "sessions"
        ]
    }
    assert set(seen.sessions) <= set(listed), set(seen.sessions) - set(listed)
    entry_ids: set[str] = set()
    for session_id, user in listed.items():
        chats = api.get(f"{SESSIONS}/{session_id}/chats", user=user).body["chats"]
        assert chats, f"session {session_id} has no chat (half-created)"
        events = api.get(f"{SESSIONS}/{session_id}/events", user=user, query={"limit": "100"})
        kinds = [e["type"] for e in events.body["events"]]
        assert "session.created" in kinds, (session_id, kinds)
        entry_ids |= {e["id"] for e in events.body["events"]}
    for chat, ids in seen.messages.items():
        user, session = seen.chats[chat]
        path = f"{SESSIONS}/{session}/chats/{chat}/messages"
        stored = all_messages(api, path, user)
        assert ids <= stored, f"lost acknowledged messages: {sorted(ids - stored)}"

    def published() -> set[str]:
        lines = (live.home / "events.jsonl").read_text().splitlines()
        out = {json.loads(line)["detail"]["entryId"] for line in lines if line.strip()}
        return entry_ids - out or set()

    until(lambda: not published(), limit=10, step=0.2)  # the drainer publishes within a second
    return {
        "sessions": len(listed),
        "messages": sum(len(ids) for ids in seen.messages.values()),
        "events": len(entry_ids),
    }


def state(live: Runtime, session_id: str, user: str) -> str:
    session = live.api.get(f"{SESSIONS}/{session_id}", user=user).body["session"]
    return str(session["lifecycleState"])


def settled(live: Runtime, session_id: str, user: str) -> bool:
    """Active or hibernated — or failed because its sandbox was lost while it had no snapshot
    yet (on record)."""
    session = live.api.get(f"{SESSIONS}/{session_id}", user=user).body["session"]
    if session["lifecycleState"] in SETTLED:
        return True
    lost = "no snapshot exists" in (session["lifecycleError"] or "")
    return bool(session["lifecycleState"] == "failed" and lost)


def all_messages(api: HttpApi, path: str, user: str) -> set[str]:
    ids: set[str] = set()
    cursor: str | None = None
    while True:
        query = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
        page = api.get(path, user=user, query=query).body
        ids |= {m["id"] for m in page["messages"]}
        cursor = page.get("nextCursor")
        if not cursor:
            return ids


def kill_between_messages(live: Runtime, seen: Acknowledged, chats: list[str]) -> None:
    """Killed right after a message was acknowledged, a writer running beside."""
    writer = Writer(live.api, chats, seen, "load1")
    writer.start()
    for n in range(20):
        assert post(live.api, chats[n % 2], f"between-{n}", seen)
    live.kill()
    writer.halt.set()
    writer.join(timeout=15)


def kill_inside_a_create(live: Runtime, seen: Acknowledged, chats: list[str]) -> None:
    """Killed while create requests are in flight (and messages too)."""
    in_flight = threading.Event()
    halt = threading.Event()

    def creating() -> None:
        n = 0
        while not halt.is_set():
            in_flight.set()
            create(live.api, USERS[n % 2], seen)
            n += 1

    creator = threading.Thread(target=creating, daemon=True)
    writer = Writer(live.api, chats, seen, "load2")
    creator.start()
    writer.start()
    until(lambda: len(seen.sessions) >= 3, limit=20, step=0.01)
    in_flight.clear()
    in_flight.wait(timeout=10)
    time.sleep(0.01)  # inside the next create
    live.kill()
    halt.set()
    writer.halt.set()
    creator.join(timeout=15)
    writer.join(timeout=15)


def kill_during_hibernation(
    live: Runtime, seen: Acknowledged, chats: list[str], sid: str
) -> dict[str, Any]:
    """A session that goes idle is killed once its snapshot is written ahead, before its
    sandbox is stopped (missed: resumed and tried again); the stored row at that moment."""
    writer = Writer(live.api, chats, seen, "load3")
    writer.start()
    caught: dict[str, Any] = {}
    before = None
    for _attempt in range(3):

        def written_ahead(before: str | None = before) -> bool:
            row = live.row(sid)
            snapshot = (row.get("snapshot") or {}).get("id")
            if row["lifecycleState"] == "hibernating" and snapshot not in (None, before):
                caught.update(row)
                return True
            return bool(row["lifecycleState"] == "hibernated")  # missed it: try again

        until(written_ahead, limit=40, step=0.002)
        if caught:
            break
        before = live.row(sid)["snapshot"]["id"]
        live.api.put("/api/sandbox/snapshot", {"sessionId": sid}, user="alice")
        until(lambda: state(live, sid, "alice") == "active", limit=30)
    assert caught, "never saw a hibernation between its write-ahead and its stop"
    live.kill()
    writer.halt.set()
    writer.join(timeout=15)
    return caught


def test_sigkill_at_three_moments_loses_nothing_and_leaves_nothing_stuck(
    runtime: Runtime,
) -> None:
    live, seen = runtime, Acknowledged()
    began = time.monotonic()
    live.start()
    first = [create(live.api, user, seen) for user in USERS]
    chats = [body["chat"]["id"] for body in first if body]
    assert len(chats) == len(USERS)

    kill_between_messages(live, seen, chats)
    live.start()
    after_messages = check_nothing_lost(live, seen)

    kill_inside_a_create(live, seen, chats)
    live.start()
    after_creates = check_nothing_lost(live, seen)

    body = create(live.api, "alice", seen)
    assert body is not None
    sid = body["session"]["id"]
    caught = kill_during_hibernation(live, seen, chats, sid)
    live.start()
    after_hibernation = check_nothing_lost(live, seen)
    # the hibernation is finished from the snapshot written ahead, not the previous one
    until(lambda: state(live, sid, "alice") in SETTLED, limit=20)
    assert live.row(sid)["snapshot"]["id"] == caught["snapshot"]["id"]

    # Nothing is left stuck: every start re-kicked, every lease released or live
    def everyone_settled() -> bool:
        return all(settled(live, s, user) for s, user in seen.sessions.items())

    until(everyone_settled, limit=40, step=0.5)
    for session_id in seen.sessions:
        row = live.row(session_id)
        if row["lifecycleState"] == "hibernated":
            assert row.get("lifecycleRunId") is None, (session_id, row["lifecycleRunId"])
    rescued = sum(
        e["type"] == "sandbox.run_rescued"
        for s, user in seen.sessions.items()
        for e in live.api.get(f"{SESSIONS}/{s}/events", user=user).body["events"]
    )
    figures = {
        "between_messages": after_messages,
        "inside_a_create": after_creates,
        "during_hibernation": after_hibernation,
        "restarts_s": [round(s, 1) for s in live.starts],
        "starts_rescued": rescued,
        "total_s": round(time.monotonic() - began, 1),
    }
    print(json.dumps(figures))
