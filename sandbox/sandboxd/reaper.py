"""One exec's keeper: ``python3 -I -S reaper.py ARGV...`` (standard library only, run as a
script, importing nothing of sandboxd).

sandboxd starts every ``POST /exec`` command under one of these, in a session of its own. It
makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``), so whatever the command starts
stays below it however it leaves its process group — ``setsid``, a double fork, ``nohup`` —
and starts the command in a process group of its own (``$$`` is still the command's group).

- The command exits: the keeper exits with its code (128 + N for a signal N) and leaves what
  the command left running alone: a server started in the background on purpose (a dev server,
  the agent's ``detached`` bash) is released, as it was before.
- SIGTERM, SIGHUP or SIGINT (sandboxd at the exec's timeout; the agent's stop, through the pid
  the command finds in ``SANDBOXD_EXEC_REAPER``): every descendant is killed, in rounds until
  none is left (a process forking meanwhile is caught by the next round: its children come
  back to the keeper when it dies), then the keeper exits with 137.

Each kill goes through a pidfd opened before the process's parent and start time are checked
again, so a pid reused meanwhile is never signalled. Without ``prctl`` (no ctypes, not Linux)
the keeper still runs the command and kills its process group, as sandboxd did before.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from types import FrameType

PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
KILLED_EXIT = 128 + signal.SIGKILL
KILL_SECONDS = 20.0
POLL_SECONDS = 0.005
ENV_NAME = "SANDBOXD_EXEC_REAPER"


class Stop(Exception):
    """A stop signal arrived."""


def on_stop(signum: int, frame: FrameType | None) -> None:
    raise Stop


def become_subreaper() -> bool:
    try:
        import ctypes  # only here: a keeper without ctypes still runs

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (ImportError, OSError, AttributeError):
        return False


def stat_of(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of ``pid`` as the kernel says, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    try:
        return int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def descendants(root: int) -> dict[int, tuple[int, int]]:
    """Every process below ``root`` (pid → its parent and start time), from one pass of /proc."""
    children: dict[int, list[tuple[int, int]]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        found = stat_of(int(name))
        if found is not None:
            children.setdefault(found[0], []).append((int(name), found[1]))
    below: dict[int, tuple[int, int]] = {}
    parents = [root]
    while parents:
        parent = parents.pop()
        for pid, started in children.get(parent, ()):
            if pid not in below:
                below[pid] = (parent, started)
                parents.append(pid)
    return below


def kill_exactly(pid: int, parent: int, started: int) -> None:
    """SIGKILL ``pid`` only while it is still that process (same parent and start time)."""
    try:
        handle = os.pidfd_open(pid)
    except (OSError, AttributeError):
        if stat_of(pid) == (parent, started):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        return
    try:
        if stat_of(pid) == (parent, started):
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(handle, signal.SIGKILL)
    finally:
        os.close(handle)


def reap() -> bool:
    """Collect every child that ended; False once the keeper has no child left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def kill_tree() -> None:
    me = os.getpid()
    deadline = time.monotonic() + KILL_SECONDS
    while time.monotonic() < deadline:
        below = descendants(me)
        for pid, (parent, started) in below.items():
            kill_exactly(pid, parent, started)
        if not reap() and not below:
            return
        time.sleep(POLL_SECONDS)


def exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def wait_for(child: int) -> int:
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            return exit_code(status)


def quiet_output() -> None:
    """The keeper holds no copy of the command's pipes: their end is the command's alone."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


def main(argv: list[str]) -> int:
    if not argv:
        return 2
    subreaper = become_subreaper()
    for number in STOP_SIGNALS:
        signal.signal(number, on_stop)
    child = 0
    try:
        env = dict(os.environ)
        if subreaper:
            env[ENV_NAME] = str(os.getpid())
        try:
            child = os.posix_spawnp(argv[0], argv, env, setpgroup=0)
        except OSError as error:
            code = 127 if isinstance(error, FileNotFoundError) else 126
            os.write(2, f"sandboxd: {argv[0]}: {error.strerror}\n".encode())
            return code
        quiet_output()
        return wait_for(child)
    except Stop:
        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_IGN)
        if subreaper:
            kill_tree()
        elif child:
            with contextlib.suppress(OSError):
                os.killpg(child, signal.SIGKILL)
        return KILLED_EXIT


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
