"""Sandboxes outlive the control plane (issue 21): ``openagents dev`` in a child process with
real confined sandboxes, stopped by Ctrl-C (SIGINT), SIGTERM and kill -9 and started again on
the same home. A session's uncommitted file, unpushed commit and checkpoint ref are there after
every restart: in the same generation while its sandbox survived, in the next one on the same
volume when its processes were killed by hand meanwhile, from its last verified snapshot when
its volume is gone too (a clear ``failed`` without one). ``openagents down`` — with the server
running and without — hibernates every session with a verified snapshot and leaves no process
of that home behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openagents.local.dynamodb import free_port
from openagents.sandbox.client import SandboxClient
from openagents.sandbox.local import LocalDriver
from openagents.sandbox.port import sandbox_token
from openagents.settings import Settings

from tests.support import HttpApi

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]
SESSIONS = "/api/sessions"
OPENAGENTS = str(Path(sys.executable).parent / "openagents")
WORK = (
    "git config user.email t@e && git config user.name T && echo kept > committed.txt && "
    "git add committed.txt && git commit -qm unpushed && git update-ref refs/checkpoints/t1 HEAD "
    "&& echo dirty > uncommitted.txt"
)
PROOF = "cat uncommitted.txt; git log -1 --format=%s; git rev-parse --verify -q refs/checkpoints/t1"


def until(check: Callable[[], Any], limit: float = 60, what: str = "condition") -> Any:
    """Wait on a condition (a generous deadline, never a fixed sleep)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if result := check():
                return result
        except (httpx.HTTPError, OSError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"{what}: not met within {limit} s")


class Server:
    """``openagents dev`` on one home, started and stopped as a user's terminal would."""

    def __init__(self, tmp: Path) -> None:
        self.home = tmp / "home"
        self.port = free_port()
        self.log = tmp / "dev.log"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAGENTS_")} | {
            "OPENAGENTS_HOME": str(self.home),
            "OPENAGENTS_PORT": str(self.port),
            "OPENAGENTS_IDLE_TIMEOUT_SECONDS": "3600",
            "OPENAGENTS_RATE_LIMIT_PER_MINUTE": "100000",
        }
        self.api = HttpApi(Settings(home=self.home, port=self.port), self.url)
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts: list[float] = []  # start to API answering, seconds

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        began = time.monotonic()
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(  # a terminal's foreground group of its own
                [OPENAGENTS, "dev"], env=self.env, stdout=log, stderr=log, process_group=0
            )
        process = self.process

        def answering() -> bool:
            assert process.poll() is None, self.log.read_text()[-3000:]
            return self.api.get(SESSIONS).status == 200

        until(answering, 60, "the server answers")
        self.restarts.append(time.monotonic() - began)

    def stop(self, how: signal.Signals) -> float:
        """Signal the server's process group, as a terminal's Ctrl-C does; how long it took."""
        assert self.process is not None
        began = time.monotonic()
        os.killpg(self.process.pid, how)
        self.process.wait(timeout=15)
        return time.monotonic() - began

    def down(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [OPENAGENTS, "down"], env=self.env, capture_output=True, text=True, timeout=120
        )

    def row(self, session_id: str) -> dict[str, Any]:
        db = sqlite3.connect(f"file:{self.home / 'openagents.db'}?mode=ro", uri=True, timeout=5)
        try:
            found = db.execute("SELECT data FROM sessions WHERE id = ?", (session_id,)).fetchone()
        finally:
            db.close()
        data: dict[str, Any] = json.loads(found[0])
        return data

    def session(self, session_id: str) -> dict[str, Any]:
        body: dict[str, Any] = self.api.get(f"{SESSIONS}/{session_id}").body["session"]
        return body

    def settled(self, session_id: str, *states: str) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            session = self.session(session_id)
            return session if session["lifecycleState"] in states else None

        found: dict[str, Any] = until(reached, 90, f"{session_id} reaches {states}")
        return found

    def create(self) -> str:
        created = self.api.post(SESSIONS, {})
        assert created.status == 201, created.body
        session_id: str = created.body["session"]["id"]
        self.settled(session_id, "active")
        return session_id

    def sandbox(self, session_id: str) -> tuple[int, SandboxClient]:
        """The session's sandbox as the driver would reach it: its generation and client."""
        generation = int(self.row(session_id)["sandbox"]["generation"])
        root = self.home / "sandboxes" / session_id / str(generation)
        key = (self.home / "sandbox-key").read_text().encode()
        token = sandbox_token(key, session_id, generation)
        return generation, SandboxClient(LocalDriver.endpoint_for(root), token, timeout=30)

    def run(self, session_id: str, command: str) -> str:
        answer = self.sandbox(session_id)[1].exec(command)
        assert answer.exit_code == 0, answer
        return str(answer.stdout)


def processes_of(home: Path) -> list[int]:
    """Live processes (not zombies) with a file, or their folder, in this home's sandboxes:
    bubblewrap, sandboxd and slirp4netns all write a log there."""
    sandboxes = str(home / "sandboxes")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text()
            if stat[stat.rindex(")") + 2] in "ZX":
                continue
            links = [os.readlink(entry / "cwd")]
            links += [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue
        if any(link.startswith(sandboxes) for link in links):
            found.append(int(entry.name))
    return sorted(found)


def kill_sandboxes(home: Path) -> None:
    for pid in processes_of(home):
        with contextlib.suppress(ProcessLookupError):  # it may exit with its parent first
            os.kill(pid, signal.SIGKILL)
    until(lambda: not processes_of(home), 30, "the sandbox processes are gone")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    live = Server(tmp_path)
    try:
        yield live
    finally:
        if live.process is not None and live.process.poll() is None:
            live.stop(signal.SIGKILL)
        live.down()  # no sandbox outlives the test
        kill_sandboxes(live.home)  # what down could not stop fails the test below, not CI
        live.api.client.close()


def test_a_session_survives_every_kind_of_server_stop_and_its_sandbox_dying(
    server: Server,
) -> None:
    server.start()
    sid = server.create()
    generation, _ = server.sandbox(sid)
    server.run(sid, WORK)
    proof = server.run(sid, PROOF)
    assert proof.startswith("dirty\nunpushed\n")
    stops: dict[str, float] = {}

    # Ctrl-C, SIGTERM, kill -9: the sandbox keeps running, is re-adopted: the same generation
    for how in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        stops[how.name] = round(server.stop(how), 2)
        assert processes_of(server.home), f"the sandbox died with the server ({how.name})"
        server.start()
        assert server.session(sid)["lifecycleState"] == "active"
        assert server.sandbox(sid)[0] == generation
        assert server.run(sid, PROOF) == proof
    assert stops["SIGINT"] < 5, stops
    assert "openagents down" in server.log.read_text()  # the line Ctrl-C prints

    # Its processes killed by hand while the server is down: the next generation, same volume
    server.stop(signal.SIGKILL)
    kill_sandboxes(server.home)
    server.start()
    server.settled(sid, "active")
    assert server.sandbox(sid)[0] == generation + 1
    assert server.run(sid, PROOF) == proof
    events = [e["type"] for e in server.api.get(f"{SESSIONS}/{sid}/events").body["events"]]
    assert "sandbox.lost" not in events

    # The volume gone too: the last verified snapshot comes back; without one, a clear failure
    server.api.post("/api/sandbox/snapshot", {"sessionId": sid})
    server.settled(sid, "hibernated")
    server.api.put("/api/sandbox/snapshot", {"sessionId": sid})
    server.settled(sid, "active")
    bare = server.create()
    server.stop(signal.SIGKILL)
    kill_sandboxes(server.home)
    for session_id in (sid, bare):
        generation = int(server.row(session_id)["sandbox"]["generation"])
        (server.home / "sandboxes" / session_id / str(generation) / "workspace.img").unlink()
    server.start()
    restored = server.settled(sid, "active")
    assert restored["lifecycleError"] is None
    assert server.run(sid, PROOF) == proof
    failed = server.settled(bare, "failed")
    assert "no snapshot exists" in failed["lifecycleError"]
    print(json.dumps({"stop_s": stops, "restart_s": [round(s, 2) for s in server.restarts]}))


@pytest.mark.parametrize("running", [True, False], ids=["server-running", "server-stopped"])
def test_down_hibernates_every_session_and_leaves_no_process(server: Server, running: bool) -> None:
    server.start()
    sessions = [server.create(), server.create()]
    for sid in sessions:
        server.run(sid, WORK)
    if not running:
        server.stop(signal.SIGINT)
    began = time.monotonic()
    done = server.down()
    took = time.monotonic() - began
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Hibernated 2 session(s)" in done.stdout
    assert server.process is not None
    assert server.process.poll() is not None  # the server stopped too
    assert processes_of(server.home) == []
    for sid in sessions:
        row = server.row(sid)
        assert row["lifecycleState"] == "hibernated"
        snapshot = server.home / "snapshots" / row["snapshot"]["id"]
        assert snapshot.exists()
    server.start()  # and the work comes back on resume
    server.api.put("/api/sandbox/snapshot", {"sessionId": sessions[0]})
    server.settled(sessions[0], "active")
    assert server.run(sessions[0], PROOF).startswith("dirty\nunpushed\n")
    print(json.dumps({"down_s": round(took, 2)}))
