"""The one-machine sandbox driver: sandboxd as a process of its own in a workspace folder, confined
by bubblewrap (its own network, pid, ipc, uts, mount and user namespaces, an unprivileged host
uid, a minimal ``/etc``), cgroup limits, a size-capped workspace volume and a user-mode network
stack that cannot reach the host. The control plane reaches sandboxd only over a Unix socket.
A launch that never gets ready (bubblewrap's set-up failing on a loaded host) is killed and tried
again, ``LAUNCH_ATTEMPTS`` launches in all, before the start fails.
Snapshots are verified ``.tar.zst`` files with opaque ids.

A sandbox is not the server's child in anything but name: it has its own session (a terminal's
Ctrl-C never reaches it), no parent-death signal, and it keeps running when the server stops or
is killed. The next server re-adopts it after proving it is the process this driver launched
(pid, start time and boot, cgroup — recorded in the generation's own folder) and that its socket
accepts the generation's token; anything else is a stranger, never signalled. See
docs/sandboxes.md."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from openagents.sandbox import confine
from openagents.sandbox.client import unix_endpoint
from openagents.sandbox.confine import Cgroup, Limits, Machine
from openagents.sandbox.local_launch import (
    BWRAP_ENV,
    KEEPER,
    READY_TIMEOUT_SECONDS,
    SANDBOXD_MODULE,
    SANDBOXD_MOUNT,
    Staging,
    SyncPipes,
    child_setup,
    compile_sandboxd,
)
from openagents.sandbox.local_processes import (
    PROCESS_RECORD,
    Child,
    ProcessRecord,
    boot_id,
    children,
    claim,
    descendants,
    handle_pid,
    kill,
    launched_alive,
    launched_by,
    machinery,
    process_start_time,
    record_of,
    release,
)
from openagents.sandbox.local_snapshots import SnapshotStore
from openagents.sandbox.port import (
    ClientFactory,
    Probe,
    SandboxError,
    SandboxHandle,
    SandboxState,
    SnapshotRef,
    sandbox_token,
)

# what tests and tools import from here: the launch's fixed parts and a process's identity
__all__ = [
    "BWRAP_ENV",
    "LAUNCH_ATTEMPTS",
    "PROCESS_RECORD",
    "SANDBOXD_MODULE",
    "LocalDriver",
    "NeverReady",
    "boot_id",
    "process_start_time",
]

log = logging.getLogger(__name__)
# bubblewrap's own set-up (its loopback in the new network namespace, the namespaces) fails now
# and then on a loaded host ("loopback: Failed RTM_NEWADDR"), before any sandbox code runs:
# the launch is tried again before the start is reported failed
LAUNCH_ATTEMPTS = 3


class NeverReady(SandboxError):
    """sandboxd never said it was ready: nothing of the sandbox ran yet."""


STOP_GRACE_SECONDS = 5
# a previous server's sandbox answers /health within this to be re-adopted; one that does not
# is wedged (its sandboxd stopped or hung), remembered as such by this driver (never asked again)
ADOPT_HEALTH_SECONDS = 5.0
SOCKET_NAME = "sandboxd.sock"
# what a generation hands to the next on reboot; the volume last: a crash half-way is seen
VOLUMES = ("uid", "workspace", "workspace.img")
NETWORKS = ("outbound", "none")


class LocalDriver:
    name = "local"

    def __init__(
        self,
        home: Path,
        sandboxd: Path,
        token_key: bytes,
        client_factory: ClientFactory,
        *,
        isolation: str = "auto",
        network: str = "outbound",
        limits: Limits | None = None,
        python: str = "/usr/bin/python3",
    ) -> None:
        self._home = home
        self._sandboxes = home / "sandboxes"
        self._store = SnapshotStore(home / "snapshots", self.name)
        self._sandboxd = sandboxd.resolve()
        self._key = token_key
        self._client = client_factory
        self._limits = limits or Limits()
        self._python = python if Path(python).exists() else shutil.which("python3") or python
        self._machine = Machine.detect()
        self._bwrap = self._pick_isolation(isolation)
        self._network = self._pick_network(network)
        self._etc: Path | None = None
        self._started: set[int] = set()
        self._silent: dict[Path, int] = {}  # generation folder -> its pid that did not answer
        # Spawn from one long-lived thread (one launch at a time: the host uid counter, the
        # staging mounts), whichever request thread asks.
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-spawner")

    def _pick_isolation(self, isolation: str) -> str | None:
        bwrap = self._machine.bwrap
        if isolation == "none":
            log.warning("sandbox isolation is off: sandboxes run as plain child processes")
            return None
        if bwrap is None:
            if isolation == "bwrap":
                raise SandboxError("bubblewrap (bwrap) is required but not installed")
            log.warning(
                "bubblewrap (bwrap) not found: sandboxes run as plain child processes WITHOUT "
                "isolation. Install it (apt-get install bubblewrap) for isolated sandboxes."
            )
        return bwrap

    def _pick_network(self, network: str) -> str:
        if network not in NETWORKS:
            raise SandboxError(f"sandbox network must be one of {NETWORKS}, got {network!r}")
        if self._bwrap is None:
            return "host"
        if network == "outbound" and not self._machine.outbound_network:
            log.warning(
                "sandboxes get NO network: outbound access needs root, slirp4netns, nftables "
                "and nsenter (apt-get install slirp4netns nftables util-linux); "
                "set OPENAGENTS_SANDBOX_NETWORK=none to silence this warning"
            )
            return "none"
        return network

    @property
    def isolated(self) -> bool:
        return self._bwrap is not None

    @property
    def confinement(self) -> dict[str, str]:
        """What confines a sandbox on this machine, in words (logged at start, in the docs)."""
        machine, limits = self._machine, self._limits
        if self._bwrap is None:
            return {"isolation": "none", "network": "host", "limits": "rlimits per process"}
        dedicated_uid = machine.root and machine.setpriv is not None
        return {
            "isolation": "bubblewrap",
            "network": {
                "outbound": "slirp4netns; the host and private ranges refused",
                "none": "none (loopback only)",
            }[self._network],
            "user": "a dedicated host uid per sandbox" if dedicated_uid else "the server's uid",
            "memory": f"{_size(limits.memory_bytes)} ({machine.cgroups})"
            if machine.cgroups
            else f"{_size(limits.memory_bytes)} per process (rlimit; no cgroup delegated)",
            "pids": f"{limits.pids} ({machine.cgroups})"
            if machine.cgroups
            else (f"{limits.pids} (rlimit nproc of its uid)" if dedicated_uid else "no cap"),
            "disk": f"{_size(limits.disk_bytes)} (ext4 volume)" if machine.mkfs else "no cap",
            "tmp": f"{_size(limits.tmp_bytes)} (tmpfs)",
        }

    def token(self, handle: SandboxHandle) -> str:
        return self.token_for(handle.session_id, handle.generation)

    def endpoint(self, handle: SandboxHandle) -> str:
        """Where sandboxd answers: derived from the driver's own folders, never from the
        (stored) handle."""
        return self.endpoint_for(self._dir(handle.session_id, handle.generation))

    def _dir(self, session_id: str, generation: int) -> Path:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,80}", session_id):
            raise SandboxError("invalid session id for a sandbox")
        return self._sandboxes / session_id / str(int(generation))

    # -------------------------------------------------------------- lifecycle

    def start(
        self,
        session_id: str,
        generation: int,
        from_snapshot: SnapshotRef | None = None,
        shared_paths: tuple[str, ...] = (),
    ) -> SandboxHandle:
        """Idempotent: a running sandbox of this generation is returned as it is."""
        root = self._dir(session_id, generation)
        existing = self._recorded(root, session_id, generation)
        if existing is not None and self.probe(existing).state is SandboxState.RUNNING:
            return existing
        if from_snapshot is not None:
            snapshot = self._store.path(from_snapshot.id)  # refuse a bad id before starting
            confine.reset_workspace(root)  # a half-restored earlier attempt
        root.mkdir(parents=True, exist_ok=True)
        handle = self._spawner.submit(
            self._spawn, root, session_id, generation, shared_paths
        ).result()
        if from_snapshot is not None:
            client = self._client(self.endpoint(handle), self.token(handle))
            self._store.restore(client, snapshot, from_snapshot)
            self._drop_earlier_volumes(root)
        return handle

    def _drop_earlier_volumes(self, root: Path) -> None:
        """Once a generation is restored (verified) from the snapshot, the workspace volumes of
        the session's earlier, stopped generations hold nothing the snapshot does not."""
        for earlier in root.parent.iterdir():
            if not earlier.name.isdigit() or int(earlier.name) >= int(root.name):
                continue
            if launched_alive(earlier):  # never the volume of a process that still runs
                continue
            confine.reset_workspace(earlier)

    def _spawn(
        self, root: Path, session_id: str, generation: int, shared_paths: tuple[str, ...]
    ) -> SandboxHandle:
        for attempt in range(1, LAUNCH_ATTEMPTS + 1):
            try:
                child = self._launch(root, session_id, generation, shared_paths)
                break
            except (OSError, confine.SubprocessFailed) as exc:
                raise SandboxError(f"the sandbox did not start: {exc}") from exc
            except NeverReady as exc:
                if attempt == LAUNCH_ATTEMPTS:
                    raise
                log.warning(
                    "sandbox %s/%s: launch %d did not start (%s); trying again",
                    session_id, generation, attempt, exc,
                )  # fmt: skip
                time.sleep(0.2 * attempt)
        children.add(child)
        children.launching.discard(root)
        self._started.add(child.process.pid)
        handle = SandboxHandle(
            driver=self.name,
            session_id=session_id,
            generation=generation,
            ref=str(child.process.pid),
            endpoint=self.endpoint_for(root),
        )
        (root / "sandbox.json").write_text(handle.model_dump_json(by_alias=True))
        log.info(
            "sandbox %s/%s started (pid %s, %s)",
            session_id,
            generation,
            child.process.pid,
            self.confinement,
        )
        return handle

    @staticmethod
    def endpoint_for(root: Path) -> str:
        return unix_endpoint(str(root / "run" / SOCKET_NAME))

    def _launch(
        self, root: Path, session_id: str, generation: int, shared_paths: tuple[str, ...]
    ) -> Child:
        machine = self._machine
        dedicated = self._bwrap is not None and machine.root and machine.setpriv is not None
        uid = confine.host_uid(root) if dedicated else os.getuid()
        image = (
            confine.workspace_image(machine, root, uid, self._limits.disk_bytes)
            if dedicated
            else None
        )
        workspace = image or confine.workspace_folder(root, uid, owned=dedicated)
        run = root / "run"
        run.mkdir(exist_ok=True)
        if dedicated:
            os.chown(run, uid, uid)
        if self._bwrap is not None and machine.root:
            confine.mount_run(run, uid)  # what the sandbox writes there stays in memory, capped
        (run / SOCKET_NAME).unlink(missing_ok=True)
        try:
            return self._run_launch(root, session_id, generation, shared_paths, workspace, uid)
        except BaseException:
            confine.unmount_run(run)
            raise

    def _run_launch(
        self,
        root: Path,
        session_id: str,
        generation: int,
        shared_paths: tuple[str, ...],
        workspace: Path,
        uid: int,
    ) -> Child:
        machine = self._machine
        dedicated = self._bwrap is not None and machine.root and machine.setpriv is not None
        run = root / "run"
        cgroup = (
            Cgroup(machine, f"{session_id}-{generation}", self._limits)
            if self._bwrap is not None
            else None
        )
        sync = SyncPipes() if self._network == "outbound" else None
        env = BWRAP_ENV if self._bwrap else {
            "PATH": BWRAP_ENV["PATH"],
            "HOME": str(workspace),
            "PYTHONPATH": str(self._sandboxd.parent),
        }  # fmt: skip
        stderr = (root / "sandboxd.log").open("ab")
        try:
            # its own session: no terminal signal (Ctrl-C) reaches it, and nothing ties its life
            # to the server's; it outlives the server and is re-adopted by the next one
            process = subprocess.Popen(  # noqa: S603 - argv built from our own paths
                self._command(
                    workspace, run, uid if dedicated else None, shared_paths, sync, cgroup
                ),
                stdout=subprocess.PIPE,
                stderr=stderr,
                stdin=subprocess.PIPE,
                env=env,
                pass_fds=sync.child_fds if sync else (),
                preexec_fn=child_setup(cgroup),
                start_new_session=True,
            )
        finally:
            stderr.close()
        assert process.stdin is not None
        process.stdin.write(self.token_for(session_id, generation).encode() + b"\n")
        process.stdin.close()  # the token is given once, on a pipe: never in the environment
        # on record before anything can go wrong: a server that dies mid-launch leaves a
        # process the next one can prove it launched, and stop (``running``)
        children.launching.add(root)
        record_of(Child(process, root, None, cgroup)).write(root)
        network = None
        try:
            if sync is not None:
                network = self._connect(sync, root / "network.log")
                record_of(Child(process, root, network, cgroup)).write(root)
            self._await_ready(process, root)
        except BaseException:
            kill(process, network, cgroup)
            children.launching.discard(root)
            (root / PROCESS_RECORD).unlink(missing_ok=True)
            raise
        finally:
            if sync is not None:
                sync.close()
        return Child(process, root, network, cgroup)

    def token_for(self, session_id: str, generation: int) -> str:
        return sandbox_token(self._key, session_id, generation)

    def _connect(self, sync: SyncPipes, log_path: Path) -> subprocess.Popen[bytes]:
        """Firewall the sandbox's namespace, attach the user-mode stack, then let it run."""
        pid = sync.child_pid()
        confine.firewall(self._machine, pid)
        network = confine.user_mode_network(self._machine, pid, log_path, sync.lifeline)
        sync.release()
        return network

    def _command(
        self,
        workspace: Path,  # a folder, or an ext4 image to mount (dedicated uid only)
        run: Path,
        uid: int | None,
        shared_paths: tuple[str, ...],
        sync: SyncPipes | None,
        cgroup: Cgroup | None,
    ) -> list[str]:
        limits = self._limits
        # Memory is the whole sandbox's cgroup limit where the machine has one; the per-process
        # address-space limit is only the fallback's bound. Under a cgroup it would refuse what
        # costs no memory: V8 reserves ~10 GiB of address space (WebAssembly), so Node, npm and
        # every JS dev server failed under the default 4 GiB ("Cannot allocate Wasm memory").
        capped = cgroup is not None and cgroup.caps_memory
        address_space = [] if capped else [f"--as={limits.memory_bytes}"]
        prefix = [
            "prlimit",
            *address_space,
            f"--fsize={limits.file_size_bytes}",
            f"--cpu={limits.cpu_seconds}",
            f"--nofile={limits.open_files}",
        ]
        socket = str(run / SOCKET_NAME)
        label = "/" + "/".join(run.parts[-4:-1])  # /sandboxes/<session>/<generation>: for ps
        if self._bwrap is None:
            daemon = [self._python, *SANDBOXD_MODULE, "--workspace", str(workspace)]
            return [*prefix, "--", *daemon, "--unix", socket, "--token-stdin", "--label", label]
        if uid is not None:  # a dedicated host uid: nproc counts this sandbox's processes only
            prefix = [
                self._machine.setpriv or "setpriv",
                f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
                *prefix, f"--nproc={limits.pids}",
            ]  # fmt: skip
        stage = Staging(enabled=uid is not None)
        binds: list[str] = []
        for path in shared_paths:
            if Path(path).exists():  # a local repository, to clone from: read-only
                binds += ["--ro-bind", stage.add(Path(path)), path]
        share = (
            ["--info-fd", str(sync.info_write), "--block-fd", str(sync.block_read)] if sync else []
        )
        bwrap = [
            self._bwrap,
            "--unshare-all", "--unshare-user", "--disable-userns",
            "--uid", str(confine.SANDBOX_UID), "--gid", str(confine.SANDBOX_UID),
            "--hostname", "sandbox",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--ro-bind", "/usr", "/usr",
            "--symlink", "usr/bin", "/bin",
            "--symlink", "usr/sbin", "/sbin",
            "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64",
            "--ro-bind", stage.add(self._rootfs_etc(), copy=True), "/etc",
            "--dev", "/dev",
            "--proc", "/proc",
            "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",  # noqa: S108 - sandbox's own
            "--bind", stage.add(workspace, image=workspace.suffix == ".img"), "/workspace",
            "--bind", stage.add(run), "/run/sandboxd",
            "--ro-bind", stage.add(self._sandboxd, copy=True), f"{SANDBOXD_MOUNT}/sandboxd",
            *binds,
            "--remount-ro", "/",  # only /workspace, /tmp and sandboxd's socket are writable
            *share,
            "--chdir", "/workspace",
            "/usr/bin/python3", *SANDBOXD_MODULE,
            "--workspace", "/workspace", "--unix", f"/run/sandboxd/{SOCKET_NAME}",
            "--token-stdin", "--label", label,
        ]  # fmt: skip
        clean = ["/usr/bin/env", "-i", *(f"{name}={value}" for name, value in BWRAP_ENV.items())]
        return [*stage.command(), *prefix, "--", *KEEPER, *clean, *bwrap]

    def _rootfs_etc(self) -> Path:
        if self._etc is None:
            compile_sandboxd(self._sandboxd)
            outbound = self._network == "outbound"
            self._etc = confine.build_etc(
                self._home / "rootfs" / "etc", confine.resolv_conf(outbound)
            )
        return self._etc

    @staticmethod
    def _await_ready(process: subprocess.Popen[bytes], root: Path) -> None:
        stdout = process.stdout
        assert stdout is not None
        line: list[bytes] = []
        reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(READY_TIMEOUT_SECONDS)
        try:
            ready = json.loads(line[0]) if line and line[0] else {}
        except ValueError:
            ready = {}
        if not isinstance(ready, dict) or ready.get("ready") is not True:
            tail = (root / "sandboxd.log").read_text(errors="replace")[-2000:]
            raise NeverReady(f"sandboxd did not start: {tail.strip() or 'no output'}")

    @staticmethod
    def _recorded(root: Path, session_id: str, generation: int) -> SandboxHandle | None:
        state = root / "sandbox.json"
        if not state.exists():
            return None
        handle = SandboxHandle.model_validate_json(state.read_text())
        if handle.session_id != session_id or handle.generation != generation:
            return None
        return handle

    def probe(self, handle: SandboxHandle) -> Probe:
        """Only a sandbox in the process-wide child table — started by this process, or
        re-adopted after its identity was proven — can be running: a pid from the store is
        never trusted to name one."""
        root = self._dir(handle.session_id, handle.generation)
        if not root.exists():
            return Probe(SandboxState.GONE, reason="sandbox not found")
        child = self._child(root, handle)
        if child is None or child.exited():
            return Probe(SandboxState.STOPPED, reason="sandbox is stopped")
        endpoint = self.endpoint(handle)
        try:
            self._client(endpoint, self.token(handle)).health()
        except SandboxError as exc:
            return Probe(SandboxState.STARTING, endpoint, reason=str(exc))
        return Probe(SandboxState.RUNNING, endpoint)

    def _child(self, root: Path, handle: SandboxHandle) -> Child | None:
        """The sandbox of this generation folder: known to this process, or re-adopted."""
        child = children.get(handle_pid(handle))
        if child is not None and child.root == root:
            return child
        recorded = self._recorded(root, handle.session_id, handle.generation)
        if recorded is None or recorded.ref != handle.ref:
            return None
        return self._adopt(root, handle)

    def _adopt(self, root: Path, handle: SandboxHandle) -> Child | None:
        """A sandbox a previous server launched, taken over when it proves to be that one:
        the recorded pid still runs with the recorded start time, on this boot, inside the
        cgroups it was put in, and its socket accepts this generation's token. Anything else
        is a stranger: None, and nothing is signalled."""
        record = ProcessRecord.read(root)
        if record is None or str(record.pid) != handle.ref:
            return None
        if self._silent.get(root) == record.pid:
            return None  # did not answer before: wedged (reboot kills it when proven)
        child = claim(record, root)
        if child is None:
            return None
        if not self._answers(handle):
            self._silent[root] = record.pid
            release(child)
            return None
        with children.adopting:
            known = children.get(record.pid)
            if known is not None:  # another driver of this process adopted it meanwhile
                release(child)
                return known
            children.add(child)
        log.info("sandbox %s/%s re-adopted (pid %s)", handle.session_id, handle.generation,
                 record.pid)  # fmt: skip
        return child

    def _answers(self, handle: SandboxHandle) -> bool:
        """``/health`` answers within ``ADOPT_HEALTH_SECONDS`` (the client's own timeout is
        longer: the check runs on a thread of its own, left to end by itself)."""
        client = self._client(self.endpoint(handle), self.token(handle))
        answered: list[bool] = []

        def check() -> None:
            with contextlib.suppress(Exception):  # any failure is no answer
                client.health()
                answered.append(True)

        checker = threading.Thread(target=check, name="sandbox-health", daemon=True)
        checker.start()
        checker.join(ADOPT_HEALTH_SECONDS)
        return bool(answered)

    def running(self) -> list[SandboxHandle]:
        """Every sandbox of this home that is running, proven as ``probe`` proves it (the
        runtime's start and ``openagents down``: what sessions run). On the way, a launch that
        a previous server never finished (its process on record, never ready for a handle) is
        stopped, and what is left of a generation whose process is gone (or was never on
        record: the server died inside the launch) is killed in its own cgroups."""
        found: list[SandboxHandle] = []
        for root in sorted(self._sandboxes.glob("*/*")):
            if root in children.launching or not root.name.isdigit():
                continue
            try:
                handle = self._recorded(root, root.parent.name, int(root.name))
            except (OSError, ValueError, SandboxError):
                continue
            finished = handle is not None and launched_by(root, handle)
            if handle is not None and finished:
                child = self._child(root, handle)
                if child is not None and not child.exited():
                    found.append(handle)
                    continue
            if not launched_alive(root):
                self._forget(root)
            elif not finished:
                self._stop_unfinished(root)
        return found

    def _stop_unfinished(self, root: Path) -> None:
        record = ProcessRecord.read(root)
        if record is None:
            return
        child = claim(record, root)
        if child is not None:
            log.info("stopping %s: a launch no server finished (pid %s)", root, record.pid)
            kill(child.process, child.network, child.cgroup)
            confine.unmount_run(root / "run")
            (root / PROCESS_RECORD).unlink(missing_ok=True)

    def has_volume(self, handle: SandboxHandle) -> bool:
        """Whether the generation's workspace volume (or folder) is still on disk."""
        root = self._dir(handle.session_id, handle.generation)
        return (root / "workspace.img").exists() or (root / "workspace").is_dir()

    def reboot(self, handle: SandboxHandle, generation: int) -> SandboxHandle | None:
        """A sandbox that died (host reboot, OOM, killed) started again as ``generation`` on
        its own workspace volume, as a VM reboots: every file, commit and ref kept. None when
        the volume is gone too. Idempotent: a crash half-way leaves the volume in one of the
        two folders, and a running ``generation`` is returned as it is."""
        if generation <= handle.generation:
            raise SandboxError("a reboot starts a later generation")
        old = self._dir(handle.session_id, handle.generation)
        new = self._dir(handle.session_id, generation)
        moved = (new / "workspace.img").exists() or (new / "workspace").is_dir()
        if not moved:
            if not self.has_volume(handle):
                return None
            if self.probe(handle).state is not SandboxState.STOPPED or (
                launched_alive(old) and not self._kill_wedged(old, handle)
            ):
                # its volume may still be mounted: never a second mount of it
                raise SandboxError("the sandbox to reboot is still running")
            self._forget(old)  # nothing of it may still hold the volume
            new.mkdir(parents=True, exist_ok=True)
            for name in VOLUMES:
                if (old / name).exists():
                    (old / name).rename(new / name)
        return self.start(handle.session_id, generation)

    def _kill_wedged(self, root: Path, handle: SandboxHandle) -> bool:
        """A generation whose launched process still runs but whose sandboxd does not answer
        (stopped, wedged: re-adoption needs ``/health``), killed when its identity is proven
        without it — the handle, ``sandbox.json`` and ``process.json`` name the same pid, that
        pid runs with the recorded start time on this boot (held by a pidfd opened first),
        inside the recorded cgroups, which are exactly ones the driver made for this generation
        (named ``<session>-<generation>``: only the driver, as root, puts a process there).
        True when it was killed (its cgroups too, its socket folder unmounted, its record
        dropped); anything not proven is a stranger: False, nothing signalled."""
        record = ProcessRecord.read(root)
        try:
            recorded = self._recorded(root, handle.session_id, handle.generation)
        except (OSError, ValueError):
            return False
        if record is None or recorded is None or recorded.ref != handle.ref:
            return False
        if str(record.pid) != handle.ref or not record.cgroups or self._bwrap is None:
            return False
        own = Cgroup.named(self._machine, f"{handle.session_id}-{handle.generation}")
        if not set(record.cgroups) <= {str(folder) for folder in own.folders}:
            return False
        with children.adopting:
            if children.get(record.pid) is not None:  # adopted meanwhile: it answers
                return False
            child = claim(record, root)
        if child is None:
            return False
        log.warning("sandbox %s/%s does not answer: killed (pid %s, its cgroups)",
                    handle.session_id, handle.generation, record.pid)  # fmt: skip
        child.process.kill()  # the keeper: bubblewrap and the pid namespace die with it
        kill(child.process, child.network, child.cgroup)  # then whatever is left in its cgroups
        confine.unmount_run(root / "run")
        (root / PROCESS_RECORD).unlink(missing_ok=True)
        return True

    def _forget(self, root: Path) -> None:
        """What is left of a generation whose launched process is gone: anything still in its
        own cgroups (named after its folder; only the driver puts processes there) is killed,
        the cgroups removed, and its process record dropped."""
        if self._bwrap is not None:
            Cgroup.named(self._machine, f"{root.parent.name}-{root.name}").remove()
        confine.unmount_run(root / "run")
        (root / PROCESS_RECORD).unlink(missing_ok=True)

    def stop(self, handle: SandboxHandle) -> None:
        """Idempotent; SIGTERM, then SIGKILL after a grace period. Signals only a sandbox this
        process started, or re-adopted, for this session and generation — or one that does not
        answer but proves its identity without that (``_kill_wedged``): killed outright."""
        root = self._dir(handle.session_id, handle.generation)
        child = self._child(root, handle) if root.exists() else None
        if child is not None:
            children.pop(child.process.pid)
            kill(child.process, child.network, child.cgroup, grace=STOP_GRACE_SECONDS)
            self._started.discard(child.process.pid)
            (root / PROCESS_RECORD).unlink(missing_ok=True)
        elif root.exists() and launched_alive(root):
            self._kill_wedged(root, handle)  # one that does not answer, when proven
        if root.exists() and not launched_alive(root):
            confine.unmount_run(root / "run")  # its socket folder's tmpfs, with what it held
        log.info("sandbox %s/%s stopped", handle.session_id, handle.generation)

    def kill_commands(self, handle: SandboxHandle) -> int:
        """Kill every process of the sandbox but its own machinery — the keeper and bubblewrap
        (the host's pid namespace), the namespace's init and sandboxd (pid 1 and its first
        child, pid 2, in the sandbox's namespace) — its cgroups frozen meanwhile: what a fork
        bomb, a runaway build or a command that left its group holds. sandboxd answers again,
        the workspace stays. Returns how many were killed; 0 for a sandbox this process
        neither started nor re-adopted (nothing is signalled then)."""
        root = self._dir(handle.session_id, handle.generation)
        child = self._child(root, handle) if root.exists() else None
        if child is None or child.exited():
            return 0
        keeper = child.process.pid
        cgroup = child.cgroup if child.cgroup is not None and child.cgroup.folders else None
        isolated = self._bwrap is not None

        def members() -> dict[int, int]:
            return cgroup.procs() if cgroup is not None else descendants(keeper)

        killed = confine.kill_all(members, lambda found: machinery(found, keeper, isolated), cgroup)
        log.info("sandbox %s/%s: %d processes killed", handle.session_id, handle.generation,
                 killed)  # fmt: skip
        return killed

    def close(self) -> None:
        """Stop every sandbox this driver instance started (tests and tools). The server never
        calls it: its sandboxes outlive it, the next server re-adopts them, and
        ``openagents down`` hibernates them."""
        for pid in list(self._started):
            child = children.pop(pid)
            if child is not None:
                kill(child.process, child.network, child.cgroup, grace=STOP_GRACE_SECONDS)
                confine.unmount_run(child.root / "run")
                (child.root / PROCESS_RECORD).unlink(missing_ok=True)
        self._started.clear()
        self._spawner.shutdown(wait=False)

    # -------------------------------------------------------------- snapshots

    def snapshot(self, handle: SandboxHandle) -> SnapshotRef:
        """Stream the workspace archive to a file of the snapshot store, kept only verified."""
        self._dir(handle.session_id, 0)  # a checked session id
        client = self._client(self.endpoint(handle), self.token(handle))
        return self._store.take(client, handle, self._limits.disk_bytes)

    def snapshot_file(self, ref: SnapshotRef) -> Path:
        return self._store.path(ref.id)

    def delete_snapshot(self, ref: SnapshotRef) -> None:
        self._store.delete(ref)


def _size(count: int) -> str:
    return f"{count / (1 << 30):g} GiB" if count >= 1 << 30 else f"{count >> 20} MiB"
