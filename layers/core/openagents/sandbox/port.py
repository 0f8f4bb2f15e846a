"""The sandbox driver port. A sandbox is one generation of a session's machine running
``sandboxd``; a snapshot is a verified copy of its workspace."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, BinaryIO, Protocol

# the domain's models, persisted on the session; re-exported as the port's vocabulary
from openagents.domain.models import SandboxHandle as SandboxHandle
from openagents.domain.models import SnapshotRef as SnapshotRef


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


class SandboxError(Exception):
    """A driver or sandboxd failure with a readable message; ``status``/``code`` when sandboxd
    answered with an error (``status`` None: it could not be reached)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.detail = detail  # sandboxd's own error text (no route, no status), when it answered


class SandboxdOps(Protocol):
    """The part of the sandboxd client the drivers use."""

    def health(self) -> dict[str, Any]: ...
    def sync(self) -> dict[str, Any]: ...
    def snapshot_to(self, out: BinaryIO) -> dict[str, Any]: ...
    def restore_from(self, src: BinaryIO, expected_sha256: str) -> dict[str, Any]: ...


ClientFactory = Callable[[str, str], SandboxdOps]  # (endpoint, token) -> client


class SandboxExec(Protocol):
    """sandboxd's exec, as the services that run commands in a sandbox see it."""

    def exec(
        self,
        command: str | None = None,
        *,
        argv: list[str] | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_seconds: float = 60,
        max_output_bytes: int = 1 << 20,
    ) -> dict[str, Any]: ...


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
    def delete_snapshot(self, ref: SnapshotRef) -> None: ...
    def token(self, handle: SandboxHandle) -> str: ...
    def endpoint(self, handle: SandboxHandle) -> str:
        """Where this sandbox's sandboxd answers (a SandboxError when not known yet)."""
        ...

    def close(self) -> None:
        """Release what the driver holds (the local driver stops its sandboxes)."""
        ...


def sandbox_token(key: bytes, session_id: str, generation: int) -> str:
    """The per-sandbox bearer token: derived, never stored, never returned by the API."""
    message = f"sandbox:{session_id}:{generation}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()
