"""The sandbox driver port. A sandbox is one generation of a session's machine running
``sandboxd``; a snapshot is a verified copy of its workspace."""

from __future__ import annotations

import hashlib
import hmac
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import BinaryIO, Protocol

from openagents.domain.checkpoints import Checkpoint

# the domain's models, persisted on the session; re-exported as the port's vocabulary
from openagents.domain.models import SandboxHandle as SandboxHandle
from openagents.domain.models import SnapshotRef as SnapshotRef

# sandboxd's answers, typed (``sandbox/answers.py``): the port's vocabulary too
from openagents.sandbox.answers import ExecResult as ExecResult
from openagents.sandbox.answers import FileContent as FileContent
from openagents.sandbox.answers import FileList as FileList
from openagents.sandbox.answers import FileWritten as FileWritten
from openagents.sandbox.answers import GitDiff as GitDiff
from openagents.sandbox.answers import GitStatus as GitStatus
from openagents.sandbox.answers import Health as Health
from openagents.sandbox.answers import PreparedWorkspace as PreparedWorkspace
from openagents.sandbox.answers import Restored as Restored
from openagents.sandbox.answers import Reverted as Reverted
from openagents.sandbox.answers import SnapshotManifest as SnapshotManifest
from openagents.sandbox.answers import Synced as Synced
from openagents.sandbox.errors import SandboxError as SandboxError
from openagents.sandbox.exec_stream import ExecPiece
from openagents.sandbox.git_answers import GitBranch, GitPlace, GitRemote
from openagents.sandbox.ports import ListeningPort


class SandboxState(StrEnum):
    STARTING = "starting"  # accepted, not reachable yet
    RUNNING = "running"  # sandboxd answers /health
    STOPPED = "stopped"  # stopped or stopping
    GONE = "gone"  # unknown to the driver


@dataclass(frozen=True)
class Probe:
    state: SandboxState
    endpoint: str | None = None
    reason: str | None = None


class Sandboxd(Protocol):
    """What sandboxd answers, one method per endpoint (``sandbox/README.md``): the one protocol
    of its client (``openagents.sandbox.client.SandboxClient``) that drivers, services and the
    agent use. Every failure is a ``SandboxError`` (``status``/``code`` when sandboxd refused)."""

    def health(self) -> Health: ...

    def exec(
        self,
        command: str | None = None,
        *,
        argv: list[str] | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_seconds: float = 60,
        max_output_bytes: int = 1 << 20,
        key: str | None = None,
    ) -> ExecResult: ...

    def exec_stream(
        self,
        command: str | None = None,
        *,
        argv: list[str] | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_seconds: float = 60,
        max_output_bytes: int = 1 << 20,
        key: str | None = None,
    ) -> Iterator[ExecPiece]:
        """``exec`` with the output as it comes (``ExecOutput``), the result last (``ExecDone``)."""
        ...

    # files
    def list_files(self, path: str = ".", depth: int = 1) -> FileList: ...
    def read_file(self, path: str, max_bytes: int = 1 << 20) -> FileContent: ...
    def write_file(self, path: str, content: str | bytes) -> FileWritten: ...

    # the workspace and its git
    def prepare_workspace(
        self,
        clone_url: str,
        branch: str | None,
        is_new_branch: bool,
        git_name: str,
        git_email: str,
    ) -> PreparedWorkspace: ...
    def git_branch(self) -> GitBranch: ...
    def git_status(self) -> GitStatus: ...
    def git_diff(self) -> GitDiff: ...
    def checkpoint(self, ref: str) -> Checkpoint: ...
    def revert(self, ref: str, *, save_ref: str | None, dry_run: bool) -> Reverted: ...

    # publishing the work
    def git_remote(self) -> GitRemote: ...
    def git_commit(self, message: str, git_name: str, git_email: str) -> GitPlace: ...
    def git_upstream(self, branch: str, commit: str) -> None: ...
    def git_archive(self) -> GitPlace: ...
    def git_bundle(
        self, *, branch: str | None = None, thin: bool = False, max_bytes: int
    ) -> bytes: ...
    def git_bundle_restore(
        self,
        data: bytes,
        *,
        place: GitPlace,
        remote: GitRemote,
        clone_url: str | None,
        git_name: str,
        git_email: str,
    ) -> GitPlace: ...

    # snapshot and restore
    def snapshot_to(self, out: BinaryIO) -> SnapshotManifest: ...
    def restore_from(self, src: BinaryIO, expected_sha256: str) -> Restored: ...
    def sync(self) -> Synced: ...

    # previews (``openagents.sandbox.ports``)
    def ports(self) -> list[ListeningPort]: ...
    def open_tunnel(self, port: int) -> socket.socket: ...


ClientFactory = Callable[[str, str], Sandboxd]  # a driver's: (endpoint, token) -> client
SandboxdClients = Callable[[SandboxHandle], Sandboxd]  # a sandbox's client, from its handle


class SandboxDriver(Protocol):
    name: str

    def start(
        self,
        session_id: str,
        generation: int,
        from_snapshot: SnapshotRef | None = None,
        shared_paths: tuple[str, ...] = (),
    ) -> SandboxHandle: ...
    def probe(self, handle: SandboxHandle) -> Probe: ...
    def snapshot(self, handle: SandboxHandle) -> SnapshotRef: ...
    def stop(self, handle: SandboxHandle) -> None: ...
    def kill_commands(self, handle: SandboxHandle) -> int:
        """Kill every process in the sandbox but sandboxd and what runs it (a fork bomb, a
        runaway command, one that left its process group), so that sandboxd answers again and
        a snapshot or a bundle can be taken; the workspace stays. Returns how many processes
        were killed (0 where the driver cannot reach into the sandbox)."""
        ...

    def delete_snapshot(self, ref: SnapshotRef) -> None: ...
    def token(self, handle: SandboxHandle) -> str: ...
    def endpoint(self, handle: SandboxHandle) -> str:
        """Where this sandbox's sandboxd answers (a SandboxError when not known yet)."""
        ...

    def close(self) -> None:
        """Release what the driver holds (the local driver stops its sandboxes)."""
        ...


class Reboots(Protocol):
    """A driver whose sandboxes outlive the control plane (the local driver; a Fargate task
    never was the control plane's child): what the runtime's start and ``openagents down``
    ask of it. Both prove a sandbox's identity before they name it."""

    def running(self) -> list[SandboxHandle]:
        """Every sandbox of this driver that runs now (re-adopted, identity proven)."""
        ...

    def reboot(self, handle: SandboxHandle, generation: int) -> SandboxHandle | None:
        """A sandbox that died, started again as ``generation`` on its own workspace volume
        (every file, commit and ref kept); None when the volume is gone too."""
        ...


def sandbox_token(key: bytes, session_id: str, generation: int) -> str:
    """The per-sandbox bearer token: derived, never stored, never returned by the API."""
    message = f"sandbox:{session_id}:{generation}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()
