"""A sandbox wedged when the server restarts (its sandboxd stopped with SIGSTOP: the socket
accepts, nothing answers ``/health``) is no longer left running beside a session that falls
back to its snapshot (issue 22): its identity is proven without the health check — the pid on
record in ``process.json`` with its start time, on this boot, inside the cgroups the driver
made for that generation — so it is killed and the generation rebooted on its own volume, every
file, commit and ref kept. A record that names a process the driver did not launch (planted) is
a stranger: never signalled, and its session is not rebooted on a volume that may be mounted."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from openagents.sandbox.client import SandboxClient
from openagents.sandbox.local import boot_id, process_start_time
from openagents.sandbox.port import SandboxError

from tests.integration.test_restart_sandboxes import (
    PROOF,
    SESSIONS,
    WORK,
    Server,
    processes_of,
    server,
    until,
)

__all__ = ["server"]  # the fixture, shared with the restart suite
pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def sandboxd_of(home: Path, session_id: str, generation: int) -> int:
    """The host pid of that generation's sandboxd (python3 running ``-m sandboxd``; the
    keeper and bubblewrap carry the same words, but not as their program)."""
    label = f"/{session_id}/{generation}".encode()
    for pid in processes_of(home):
        with contextlib.suppress(OSError, ValueError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            labelled = argv[argv.index(b"--label") + 1].endswith(label)
            if argv[0].endswith(b"python3") and b"sandboxd" in argv and labelled:
                return pid
    raise AssertionError(f"no sandboxd for {session_id}/{generation}")


def wedged(client: SandboxClient) -> bool:
    try:
        client.health()
    except SandboxError:
        return True
    return False


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_sandbox_wedged_at_restart_is_killed_and_rebooted_on_its_volume(
    server: Server,
) -> None:
    server.start()
    sid, stranger = server.create(), server.create()
    generation, _ = server.sandbox(sid)
    server.run(sid, WORK)
    proof = server.run(sid, PROOF)
    server.stop(signal.SIGKILL)

    # both sandboxes wedged: sandboxd stopped, the socket accepts, nothing answers
    stopped = {}
    for session_id in (sid, stranger):
        gen, client = server.sandbox(session_id)
        stopped[session_id] = sandboxd_of(server.home, session_id, gen)
        os.kill(stopped[session_id], signal.SIGSTOP)
        client.timeout = 2
        assert wedged(client)
    # the stranger's record names a process the driver never launched (pid, start time, boot
    # all true of it), in that generation's cgroups: planted
    decoy = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        strange_gen = int(server.row(stranger)["sandbox"]["generation"])
        record_path = server.home / "sandboxes" / stranger / str(strange_gen) / "process.json"
        record = json.loads(record_path.read_text())
        record |= {
            "pid": decoy.pid,
            "start_time": process_start_time(decoy.pid),
            "boot_id": boot_id(),
        }
        record_path.write_text(json.dumps(record))

        server.start()
        rebooted = server.settled(sid, "active")
        assert rebooted["lifecycleError"] is None
        assert server.sandbox(sid)[0] == generation + 1  # the next generation …
        assert server.run(sid, PROOF) == proof  # … on the same volume: nothing lost
        until(lambda: not alive(stopped[sid]), 30, "the wedged sandboxd is killed")
        events = server.api.get(f"{SESSIONS}/{sid}/events").body["events"]
        types = [e["type"] for e in events]
        assert "sandbox.lost" not in types
        resumed = [e for e in events if e["type"] == "sandbox.resumed"]
        assert resumed[-1]["detail"]["rebootedFrom"] == generation

        # the stranger: nothing signalled, and no second mount of its volume
        failed = server.settled(stranger, "failed")  # no snapshot to fall back to
        assert "no snapshot exists" in failed["lifecycleError"]
        assert decoy.poll() is None
        assert alive(stopped[stranger])  # still stopped, never killed
        folders = server.home / "sandboxes" / stranger
        assert (folders / str(strange_gen) / "workspace.img").exists()  # its volume not moved
        assert not (folders / str(strange_gen + 1)).exists()  # nor mounted again
    finally:
        decoy.kill()
        decoy.wait()
        os.kill(stopped[stranger], signal.SIGCONT)
