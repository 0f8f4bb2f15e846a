"""The one-machine sandbox driver: sandboxd as a child process in a workspace folder, inside
bubblewrap when it exists, under prlimit limits; snapshots are verified ``.tar.zst`` files."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from openagents.sandbox.port import (
    ClientFactory,
    Probe,
    SandboxError,
    SandboxHandle,
    SandboxState,
    SnapshotRef,
    sandbox_token,
)

log = logging.getLogger(__name__)
READY_TIMEOUT_SECONDS = 15
STOP_GRACE_SECONDS = 5
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class LocalLimits:
    memory_bytes: int = 4 * 1024**3
    file_size_bytes: int = 2 * 1024**3
    cpu_seconds: int = 5 * 3600
    open_files: int = 4096


class _HashingWriter:
    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.size += len(data)
        return self._out.write(data)


def _die_with_parent() -> None:
    """In the child: receive SIGTERM when the runtime that spawned us dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _alive(pid: int) -> bool:
    """True for a live process; a zombie (exited, not yet reaped) is dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True


class _Children:
    """This process's sandbox children. Process-wide on purpose: every driver instance in the
    process (the API's, each Lambda task's) must be able to stop and reap any of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_pid: dict[int, subprocess.Popen[bytes]] = {}

    def add(self, process: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._by_pid[process.pid] = process

    def pop(self, pid: int) -> subprocess.Popen[bytes] | None:
        with self._lock:
            return self._by_pid.pop(pid, None)

    def exited(self, pid: int) -> bool:
        with self._lock:
            child = self._by_pid.get(pid)
        return child is not None and child.poll() is not None


_children = _Children()


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
        limits: LocalLimits | None = None,
        python: str = "/usr/bin/python3",
    ) -> None:
        self._sandboxes = home / "sandboxes"
        self._snapshots = home / "snapshots"
        self._sandboxd = sandboxd.resolve()
        self._key = token_key
        self._client = client_factory
        self._limits = limits or LocalLimits()
        self._python = python if Path(python).exists() else shutil.which("python3") or python
        self._bwrap = self._pick_isolation(isolation)
        # Spawn from one long-lived thread: PR_SET_PDEATHSIG fires when the *thread* that
        # forked exits, and request threads come and go.
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-spawner")
        self._started: set[int] = set()

    @staticmethod
    def _pick_isolation(isolation: str) -> str | None:
        bwrap = shutil.which("bwrap")
        if isolation == "none":
            return None
        if bwrap is None:
            if isolation == "bwrap":
                raise SandboxError("bubblewrap (bwrap) is required but not installed")
            log.warning(
                "bubblewrap (bwrap) not found: sandboxes run as plain child processes WITHOUT "
                "isolation. Install it (apt-get install bubblewrap) for isolated sandboxes."
            )
        return bwrap

    @property
    def isolated(self) -> bool:
        return self._bwrap is not None

    def token(self, handle: SandboxHandle) -> str:
        return sandbox_token(self._key, handle.session_id, handle.generation)

    def _dir(self, session_id: str, generation: int) -> Path:
        return self._sandboxes / session_id / str(generation)

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
        workspace = root / "workspace"
        if workspace.exists() and from_snapshot is not None:
            shutil.rmtree(workspace)  # a half-restored earlier attempt
        workspace.mkdir(parents=True, exist_ok=True)
        handle = self._spawner.submit(
            self._spawn, root, workspace, session_id, generation, shared_paths
        ).result()
        if from_snapshot is not None:
            self._restore(handle, from_snapshot)
        return handle

    def _spawn(
        self,
        root: Path,
        workspace: Path,
        session_id: str,
        generation: int,
        shared_paths: tuple[str, ...],
    ) -> SandboxHandle:
        token = sandbox_token(self._key, session_id, generation)
        home = root / "home"
        home.mkdir(exist_ok=True)
        env = {
            "SANDBOXD_TOKEN": token,
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": "/tmp" if self._bwrap else str(home),  # noqa: S108 - bwrap's private tmpfs
        }
        stderr = (root / "sandboxd.log").open("ab")
        process = subprocess.Popen(  # noqa: S603 - argv built from our own paths
            self._command(workspace, shared_paths),
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            env=env,
            preexec_fn=_die_with_parent,
        )
        stderr.close()
        port = self._await_ready(process, root)
        _children.add(process)
        self._started.add(process.pid)
        handle = SandboxHandle(
            driver=self.name,
            session_id=session_id,
            generation=generation,
            ref=str(process.pid),
            endpoint=f"http://127.0.0.1:{port}",
        )
        (root / "sandbox.json").write_text(json.dumps(handle.to_dict()))
        log.info(
            "sandbox %s/%s started (pid %s, isolated=%s)",
            session_id,
            generation,
            process.pid,
            self.isolated,
        )
        return handle

    def _command(self, workspace: Path, shared_paths: tuple[str, ...]) -> list[str]:
        limits = self._limits
        prlimit = [
            "prlimit",
            f"--as={limits.memory_bytes}",
            f"--fsize={limits.file_size_bytes}",
            f"--cpu={limits.cpu_seconds}",
            f"--nofile={limits.open_files}",
            "--",
        ]
        if self._bwrap is None:
            daemon = [self._python, str(self._sandboxd), "--workspace", str(workspace)]
            return [*prlimit, *daemon, "--host", "127.0.0.1", "--port", "0"]
        binds: list[str] = []
        for path in shared_paths:
            if Path(path).exists():
                binds += ["--bind", path, path]  # a local "remote": cloned from, pushed to
        return [
            *prlimit,
            self._bwrap,
            "--ro-bind", "/usr", "/usr",
            "--symlink", "usr/bin", "/bin",
            "--symlink", "usr/sbin", "/sbin",
            "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64",
            "--ro-bind", "/etc", "/etc",
            "--dev", "/dev",
            "--proc", "/proc",
            "--tmpfs", "/tmp",  # noqa: S108 - a private tmpfs inside the sandbox
            "--unshare-all", "--share-net",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--bind", str(workspace), "/workspace",
            "--ro-bind", str(self._sandboxd.parent), "/opt/sandboxd",
            *binds,
            "--chdir", "/workspace",
            "/usr/bin/python3", f"/opt/sandboxd/{self._sandboxd.name}",
            "--workspace", "/workspace", "--host", "127.0.0.1", "--port", "0",
        ]  # fmt: skip

    @staticmethod
    def _await_ready(process: subprocess.Popen[bytes], root: Path) -> int:
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
        if not ready.get("ready"):
            process.kill()
            process.wait()
            tail = (root / "sandboxd.log").read_text(errors="replace")[-2000:]
            raise SandboxError(f"sandboxd did not start: {tail.strip() or 'no output'}")
        return int(ready["port"])

    @staticmethod
    def _recorded(root: Path, session_id: str, generation: int) -> SandboxHandle | None:
        state = root / "sandbox.json"
        if not state.exists():
            return None
        handle = SandboxHandle.from_dict(json.loads(state.read_text()))
        if handle.session_id != session_id or handle.generation != generation:
            return None
        return handle

    def probe(self, handle: SandboxHandle) -> Probe:
        pid = int(handle.ref)
        if not self._dir(handle.session_id, handle.generation).exists():
            return Probe(SandboxState.GONE, reason="sandbox not found")
        if not _alive(pid) or _children.exited(pid):
            return Probe(SandboxState.STOPPED, reason="sandbox is stopped")
        if handle.endpoint is None:
            return Probe(SandboxState.STARTING)
        try:
            self._client(handle.endpoint, self.token(handle)).health()
        except SandboxError as exc:
            return Probe(SandboxState.STARTING, handle.endpoint, reason=str(exc))
        return Probe(SandboxState.RUNNING, handle.endpoint)

    def stop(self, handle: SandboxHandle) -> None:
        """Idempotent; SIGTERM, then SIGKILL after a grace period."""
        pid = int(handle.ref)
        child = _children.pop(pid)
        if child is None and not _alive(pid):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        while time.monotonic() < deadline:
            if child is not None and child.poll() is not None:
                break
            if child is None and not _alive(pid):
                break
            time.sleep(0.05)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if child is not None:
            child.wait(timeout=STOP_GRACE_SECONDS)
        log.info("sandbox %s/%s stopped", handle.session_id, handle.generation)

    def close(self) -> None:
        """Stop every sandbox this driver started (on shutdown)."""
        for pid in list(self._started):
            child = _children.pop(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            if child is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=STOP_GRACE_SECONDS)
        self._started.clear()
        self._spawner.shutdown(wait=False)

    # -------------------------------------------------------------- snapshots

    def snapshot(self, handle: SandboxHandle) -> SnapshotRef:
        """Stream the workspace archive to a file, hashing it; keep it only if sandboxd's
        manifest reports the same sha256."""
        folder = self._snapshots / handle.session_id
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SandboxError(f"the snapshot store failed: {exc}") from exc
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        final = folder / f"{handle.generation}-{stamp}.tar.zst"
        partial = final.with_suffix(".partial")
        client = self._client(self._endpoint(handle), self.token(handle))
        try:
            with partial.open("wb") as out:
                writer = _HashingWriter(out)
                manifest = client.snapshot_to(writer)  # type: ignore[arg-type]
                out.flush()
                os.fsync(out.fileno())
            digest = writer.sha256.hexdigest()
            if manifest.get("sha256") != digest:
                raise SandboxError(
                    f"snapshot verification failed: manifest sha256 {manifest.get('sha256')} "
                    f"!= received {digest} ({manifest.get('error') or 'archive incomplete'})"
                )
            partial.rename(final)
        except OSError as exc:  # the snapshot store (disk full, permissions): not a snapshot
            partial.unlink(missing_ok=True)
            raise SandboxError(f"the snapshot store failed: {exc}") from exc
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        return SnapshotRef(
            driver=self.name,
            id=str(final),
            session_id=handle.session_id,
            generation=handle.generation,
            size_bytes=writer.size,
            sha256=digest,
            created_at=datetime.now(UTC),
            manifest=manifest,
        )

    def _restore(self, handle: SandboxHandle, ref: SnapshotRef) -> None:
        path = Path(ref.id)
        if not path.exists():
            raise SandboxError("snapshot not found")
        if ref.sha256 is None:
            raise SandboxError("snapshot has no checksum")
        with path.open("rb") as src:
            result = self._client(self._endpoint(handle), self.token(handle)).restore_from(
                src, ref.sha256
            )
        expected = ref.manifest.get("fileCount")
        if expected is not None and result.get("fileCount") != expected:
            raise SandboxError(
                f"restore verification failed: {result.get('fileCount')} files restored, "
                f"the manifest says {expected}"
            )

    def delete_snapshot(self, ref: SnapshotRef) -> None:
        Path(ref.id).unlink(missing_ok=True)

    @staticmethod
    def _endpoint(handle: SandboxHandle) -> str:
        if handle.endpoint is None:
            raise SandboxError("sandbox has no endpoint yet")
        return handle.endpoint
