"""A command that leaves its process group (setsid, a double fork, nohup) no longer outlives its
exec's timeout (issue 22), tried from inside a real local sandbox (bubblewrap, its own pid
namespace, the generation's cgroups): the exec's keeper is a subreaper, so every descendant is
still below it when the timeout comes. What a command starts on purpose and leaves running when
it ends in time (a dev server, the agent's detached bash) stays."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from openagents.sandbox.confine import Cgroup, Machine
from openagents.sandbox.local import LocalDriver

from tests.integration.test_sandbox_isolation import driver, machine, run

__all__ = ["driver", "machine"]  # the fixtures, shared with the isolation suite

MARK = "4242"  # each escape sleeps this long: the host finds them by it, in the sandbox's cgroup
ESCAPES = (
    f"setsid sh -c 'exec sleep {MARK}' > /dev/null 2>&1 & "
    f"( setsid sh -c 'exec sleep {MARK}' > /dev/null 2>&1 & ) ; "
    f"nohup sh -c 'exec sleep {MARK}' > /dev/null 2>&1 & "
    f"( ( sleep {MARK} > /dev/null 2>&1 & ) & ) ; "
)


def escapes(machine: Machine, name: str) -> list[int]:
    """Host pids of the sandbox's processes that run ``sleep MARK``."""
    found = []
    for pid in Cgroup.named(machine, name).procs():
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] == [
                b"sleep",
                MARK.encode(),
            ]:
                found.append(pid)
    return found


def wait_for(check: object, what: str, seconds: float = 30) -> None:
    assert callable(check)
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_timed_out_command_leaves_no_escaped_descendant(
    driver: LocalDriver, machine: Machine
) -> None:
    handle = driver.start("escape", 1)
    name = f"{handle.session_id}-{handle.generation}"
    # the command waits until its four escapes run, then outlives its timeout
    script = ESCAPES + f'until [ "$(pgrep -cx sleep)" -ge 4 ]; do sleep 0.01; done; sleep {MARK}'
    result = run(driver, handle, script, timeout=2)
    assert result.timed_out is True, result
    wait_for(lambda: escapes(machine, name) == [], "an escaped descendant outlived the timeout")
    assert run(driver, handle, "echo alive").stdout == "alive\n"


def test_a_command_that_ends_in_time_keeps_what_it_started_in_the_background(
    driver: LocalDriver, machine: Machine
) -> None:
    handle = driver.start("detached", 1)
    name = f"{handle.session_id}-{handle.generation}"
    script = ESCAPES + 'until [ "$(pgrep -cx sleep)" -ge 4 ]; do sleep 0.01; done; echo launched'
    result = run(driver, handle, script, timeout=30)
    assert (result.exit_code, result.stdout) == (0, "launched\n"), result
    kept = escapes(machine, name)
    try:
        assert len(kept) == 4, kept
        assert run(driver, handle, "pgrep -cx sleep").stdout == "4\n"  # still running
    finally:
        for pid in kept:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
