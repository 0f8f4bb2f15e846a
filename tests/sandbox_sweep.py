"""At the end of a test run, the sandboxes its tests left running are stopped.

A sandbox is not a child of the process that launched it (it outlives a restart of the server,
decision 34), so a test that never stops its sandbox would leave it running after pytest exits.
Only this run's are touched: a keeper launched for a home in this run's temporary folder (other
runs on the same machine keep theirs), and the socket folders mounted below that folder."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

KEEPER = b'/bin/sh\x00-c\x00"$@"; exit $?\x00keeper\x00'


def keepers_under(folder: Path) -> list[int]:
    """The pids of sandbox keepers launched for a home below ``folder``: the command line names
    it, or the keeper's stderr is its generation's ``sandboxd.log`` there (the binds come from
    neutral staging paths, so the command line alone may not)."""
    marker = os.fsencode(str(folder))
    prefix = str(folder) + "/"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes()
            if not cmdline.startswith(KEEPER):
                continue
            if marker in cmdline or os.readlink(entry / "fd" / "2").startswith(prefix):
                found.append(int(entry.name))
    return found


def mounts_under(folder: Path) -> list[str]:
    prefix = str(folder) + "/"
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        points = [line.split()[1] for line in mounts]
    return sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True)


def sweep(folder: Path) -> None:
    pids = keepers_under(folder)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # the keeper leads its session: bubblewrap with it
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while keepers_under(folder) and time.monotonic() < deadline:
        time.sleep(0.05)  # a killed process is gone within moments; waits on that condition
    if os.geteuid() == 0:
        for point in mounts_under(folder):
            subprocess.run(["umount", "--lazy", point], check=False, capture_output=True)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    sweep(Path(factory.getbasetemp()))
