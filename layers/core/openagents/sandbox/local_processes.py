"""The one-machine driver's sandbox processes: the process-wide table of the sandboxes this
process started or re-adopted (the only processes the driver signals), the record that proves a
process is the one a driver launched (pid, start time, boot, cgroups: ``process.json`` in the
generation's folder), claiming such a process by pidfd after a restart, and stopping one."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from openagents.sandbox.confine import Cgroup
from openagents.sandbox.port import SandboxHandle

PROCESS_RECORD = "process.json"  # who the driver launched: pid, start time, boot, cgroups


class Process(Protocol):
    """A process the driver may signal: one it started (a ``Popen``), or one it re-adopted."""

    @property
    def pid(self) -> int: ...
    def poll(self) -> int | None: ...
    def terminate(self) -> None: ...
    def kill(self) -> None: ...
    def wait(self, timeout: float | None = None) -> int: ...


class Adopted:
    """A process a previous server launched, held by a pidfd opened *before* its start time was
    checked: every signal goes to that very process, never to a pid reused meanwhile."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid = pid
        self._fd = fd

    @classmethod
    def claim(cls, pid: int, start_time: int) -> Adopted | None:
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return None
        if process_start_time(pid) != start_time:
            os.close(fd)
            return None
        return cls(pid, fd)

    def poll(self) -> int | None:
        return 0 if self._exited(0) else None

    def _exited(self, timeout: float | None) -> bool:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        return bool(poller.poll(-1 if timeout is None else int(timeout * 1000)))

    def _signal(self, number: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, OSError):
            signal.pidfd_send_signal(self._fd, number)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited(timeout):
            raise subprocess.TimeoutExpired("sandbox", timeout or 0)
        return 0

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


@dataclass(frozen=True)
class ProcessRecord:
    """``process.json`` in a generation's folder (the driver's, never the sandbox's): what
    proves, after a restart, that a process is the one this driver launched."""

    pid: int
    start_time: int  # /proc/<pid>/stat's starttime: a reused pid has another
    boot_id: str  # after a reboot every pid is a stranger
    cgroups: tuple[str, ...]  # the folders it was put in before it ran anything
    network_pid: int | None = None
    network_start_time: int | None = None

    def write(self, root: Path) -> None:
        partial = root / f"{PROCESS_RECORD}.partial"
        partial.write_text(json.dumps(self.__dict__ | {"cgroups": list(self.cgroups)}))
        partial.rename(root / PROCESS_RECORD)

    @classmethod
    def read(cls, root: Path) -> ProcessRecord | None:
        try:
            data = json.loads((root / PROCESS_RECORD).read_text())
            return cls(
                pid=int(data["pid"]),
                start_time=int(data["start_time"]),
                boot_id=str(data["boot_id"]),
                cgroups=tuple(str(folder) for folder in data["cgroups"]),
                network_pid=None if data.get("network_pid") is None else int(data["network_pid"]),
                network_start_time=None
                if data.get("network_start_time") is None
                else int(data["network_start_time"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None


def process_start_time(pid: int, *, living: bool = False) -> int | None:
    """A process's start time (clock ticks since boot, /proc/<pid>/stat field 22); with
    ``living``, None for a process that exited and was not reaped yet (a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        if living and fields[0] in ("Z", "X"):
            return None
        return int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def process_cgroups(pid: int) -> set[str]:
    """The cgroup folders a process belongs to (v1 hierarchies and v2), as absolute paths."""
    mount = Path("/sys/fs/cgroup")
    folders: set[str] = set()
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                base = mount / controller if controller else mount
                folders.add(str(base / path.lstrip("/")))
    return folders


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


@dataclass
class Child:
    """A sandbox this process started or re-adopted: the only processes the driver signals."""

    process: Process
    root: Path
    network: Process | None
    cgroup: Cgroup | None

    def exited(self) -> bool:
        return self.process.poll() is not None


class Children:
    """This process's sandbox children. Process-wide on purpose: every driver instance in the
    process (the API's, each Lambda task's) must be able to stop and reap any of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.adopting = threading.Lock()  # one adoption at a time decides who holds a pid
        self.launching: set[Path] = set()  # generations launching here: nobody else's to stop
        self._by_pid: dict[int, Child] = {}

    def add(self, child: Child) -> None:
        with self._lock:
            self._by_pid[child.process.pid] = child

    def get(self, pid: int) -> Child | None:
        with self._lock:
            return self._by_pid.get(pid)

    def pop(self, pid: int) -> Child | None:
        with self._lock:
            return self._by_pid.pop(pid, None)


children = Children()


def claim(record: ProcessRecord, root: Path) -> Child | None:
    """The processes on record, held by pidfds, when they are the ones launched: the pid runs
    with the recorded start time, on this boot, inside the recorded cgroups. Else None."""
    if record.boot_id != boot_id():
        return None
    process = Adopted.claim(record.pid, record.start_time)
    if process is None:
        return None
    if not set(record.cgroups) <= process_cgroups(record.pid):
        process.close()
        return None
    network = None
    if record.network_pid is not None and record.network_start_time is not None:
        network = Adopted.claim(record.network_pid, record.network_start_time)
    cgroup = Cgroup.existing(record.cgroups) if record.cgroups else None
    return Child(process, root, network, cgroup)


def release(child: Child) -> None:
    for held in (child.process, child.network):
        if isinstance(held, Adopted):
            held.close()


def launched_by(root: Path, handle: SandboxHandle) -> bool:
    """The generation's handle names the process on record: its launch finished."""
    record = ProcessRecord.read(root)
    return record is not None and str(record.pid) == handle.ref


def launched_alive(root: Path) -> bool:
    """The process a driver launched in this folder still runs (whether or not it answers)."""
    record = ProcessRecord.read(root)
    return (
        record is not None
        and record.boot_id == boot_id()
        and process_start_time(record.pid, living=True) == record.start_time
    )


def record_of(child: Child) -> ProcessRecord:
    pid = child.process.pid
    network = child.network.pid if child.network is not None else None
    return ProcessRecord(
        pid=pid,
        start_time=process_start_time(pid) or 0,
        boot_id=boot_id(),
        cgroups=tuple(str(folder) for folder in child.cgroup.folders) if child.cgroup else (),
        network_pid=network,
        network_start_time=process_start_time(network) if network is not None else None,
    )


def kill(
    process: Process,
    network: Process | None,
    cgroup: Cgroup | None,
    grace: float = 0,
) -> None:
    """Stop the sandbox (its pid namespace dies with bubblewrap), its network, its cgroups."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace or 0.5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if network is not None and network.poll() is None:
        network.kill()
        network.wait()
    if cgroup is not None:
        cgroup.remove()
    for held in (process, network):
        if isinstance(held, Adopted):
            held.close()


def _status_field(pid: int, name: str) -> list[int]:
    """A numeric field of /proc/<pid>/status (the kernel's, never the sandbox's word)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{name}:"):
                return [int(value) for value in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return []


def machinery(found: dict[int, int], keeper: int, isolated: bool) -> set[int]:
    """Which of a sandbox's processes are its own machinery, never killed by ``kill_commands``:
    those in the host's pid namespace (only the driver's launch chain — the keeper, bubblewrap —
    runs there: nothing of the sandbox can leave its namespace), the namespace's init (its pid
    1) and sandboxd (its pid 2, the init's child: bubblewrap's init forks it first). Without
    isolation, sandboxd is the launched process itself."""
    if not isolated:
        return {keeper}
    depth = len(_status_field(os.getpid(), "NSpid"))
    namespaced = {pid: _status_field(pid, "NSpid") for pid in found}
    spared = {pid for pid, ns in namespaced.items() if len(ns) == depth}
    inits = {pid for pid, ns in namespaced.items() if len(ns) == depth + 1 and ns[-1] == 1}
    daemons = {
        pid
        for pid, ns in namespaced.items()
        if len(ns) == depth + 1 and ns[-1] == 2 and set(_status_field(pid, "PPid")) <= inits
    }
    return spared | inits | daemons


def descendants(pid: int) -> dict[int, int]:
    """The processes below ``pid`` (pid -> start time), from one reading of /proc: a sandbox
    without cgroups (no root). Inside a pid namespace an orphan goes to the namespace's init,
    still below the keeper."""
    parents: dict[int, list[tuple[int, int]]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
        except (OSError, ValueError):
            continue
        if fields[0] in ("Z", "X"):
            continue
        parents.setdefault(int(fields[1]), []).append((int(entry.name), int(fields[19])))
    found: dict[int, int] = {}
    todo = [pid]
    while todo:
        for child, started in parents.get(todo.pop(), []):
            if child not in found:
                found[child] = started
                todo.append(child)
    return found


def handle_pid(handle: SandboxHandle) -> int:
    try:
        return int(handle.ref)
    except ValueError:
        return -1
