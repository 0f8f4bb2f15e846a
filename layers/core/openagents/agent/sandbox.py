"""What the agent's tools may do in a sandbox (``Workspace``), and its adapter over the one
sandboxd client protocol (``openagents.sandbox.port.Sandboxd``).

Tools never see sandboxd's JSON: ``Workspace`` answers typed results and raises
``SandboxError`` (sandboxd's own error, readable) on failure. It is the tools' narrow, typed
view, not a second client: ``WorkspaceClient`` is its one implementation, over ``Sandboxd``.
A workspace that can also stream a command's output as it comes is a ``StreamingWorkspace``
(``exec_stream``: ``ExecOutput`` pieces, then the ``ExecResult``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from openagents.domain.checkpoints import Checkpoint
from openagents.sandbox.exec_stream import ExecDone, ExecOutput
from openagents.sandbox.port import ExecResult, Sandboxd, SandboxError

__all__ = [
    "ExecOutput",
    "ExecResult",
    "FileText",
    "RunWorkspace",
    "SandboxError",
    "StreamingWorkspace",
    "Workspace",
    "WorkspaceClient",
]


@dataclass(frozen=True)
class FileText:
    content: str | None  # None: not text (binary)
    size: int
    truncated: bool


class Workspace(Protocol):
    """What the tools may do in the session's sandbox (paths are workspace-relative)."""

    def exec(
        self,
        *,
        command: str | None = None,
        argv: list[str] | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_seconds: float = 60,
        max_output_bytes: int = 1 << 20,
        key: str | None = None,
    ) -> ExecResult:
        """With ``key``, the command runs once per key in the sandbox: a repeat (a step run
        again after a restart) answers the first run's result, or ``interrupted``."""
        ...

    def read_text(self, path: str, max_bytes: int = 10 << 20) -> FileText: ...

    def write_text(self, path: str, content: str) -> None: ...

    def checkpoint(self, ref: str) -> Checkpoint:
        """Save the whole workspace on the hidden ``ref`` (branch, index and stash untouched)."""
        ...


@runtime_checkable
class StreamingWorkspace(Workspace, Protocol):
    """A ``Workspace`` that also streams a command's output while it runs."""

    def exec_stream(
        self,
        *,
        command: str | None = None,
        argv: list[str] | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_seconds: float = 60,
        max_output_bytes: int = 1 << 20,
        key: str | None = None,
    ) -> Iterator[ExecOutput | ExecResult]:
        """``exec``, with what the command writes as it comes (``ExecOutput``, a preview
        sandboxd caps), then its ``ExecResult`` (the truth: the same as ``exec`` answers)."""
        ...


@runtime_checkable
class PortReader(Protocol):
    """A workspace that can say which TCP ports listen in its sandbox (loopback ones too)."""

    def ports(self) -> list[int]: ...


class WorkspaceClient:
    """``Workspace`` (streaming too) over sandboxd."""

    def __init__(self, client: Sandboxd) -> None:
        self._client = client

    def exec(
        self,
        *,
        command: str | None = None,
        argv: list[str] | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_seconds: float = 60,
        max_output_bytes: int = 1 << 20,
        key: str | None = None,
    ) -> ExecResult:
        return self._client.exec(
            command,
            argv=argv,
            cwd=cwd,
            env=dict(env) if env else None,
            timeout_seconds=timeout_seconds,
            max_output_bytes=max_output_bytes,
            key=key,
        )

    def exec_stream(
        self,
        *,
        command: str | None = None,
        argv: list[str] | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_seconds: float = 60,
        max_output_bytes: int = 1 << 20,
        key: str | None = None,
    ) -> Iterator[ExecOutput | ExecResult]:
        pieces = self._client.exec_stream(
            command,
            argv=argv,
            cwd=cwd,
            env=dict(env) if env else None,
            timeout_seconds=timeout_seconds,
            max_output_bytes=max_output_bytes,
            key=key,
        )
        for piece in pieces:
            yield piece.result if isinstance(piece, ExecDone) else piece

    def read_text(self, path: str, max_bytes: int = 10 << 20) -> FileText:
        answer = self._client.read_file(path, max_bytes)
        text = answer.encoding != "base64"
        return FileText(
            content=answer.content if text else None, size=answer.size, truncated=answer.truncated
        )

    def write_text(self, path: str, content: str) -> None:
        self._client.write_file(path, content)

    def checkpoint(self, ref: str) -> Checkpoint:
        return self._client.checkpoint(ref)

    def ports(self) -> list[int]:
        return sorted({found.port for found in self._client.ports()})


class RunWorkspace:
    """A run's ``Workspace``: exec keys made the run's own (a tool call id is unique in its
    run only: a scripted or local model may number its calls the same in every turn)."""

    def __init__(self, workspace: Workspace, run_id: str) -> None:
        self._workspace, self._run_id = workspace, run_id

    def exec(
        self,
        *,
        command: str | None = None,
        argv: list[str] | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_seconds: float = 60,
        max_output_bytes: int = 1 << 20,
        key: str | None = None,
    ) -> ExecResult:
        return self._workspace.exec(
            command=command,
            argv=argv,
            cwd=cwd,
            env=env,
            timeout_seconds=timeout_seconds,
            max_output_bytes=max_output_bytes,
            key=f"{self._run_id}/{key}" if key is not None else None,
        )

    def exec_stream(
        self,
        *,
        command: str | None = None,
        argv: list[str] | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_seconds: float = 60,
        max_output_bytes: int = 1 << 20,
        key: str | None = None,
    ) -> Iterator[ExecOutput | ExecResult]:
        """The inner workspace's stream; over one that cannot stream, the result alone."""
        inner = self._workspace
        run = inner.exec_stream if isinstance(inner, StreamingWorkspace) else None
        asked_key = f"{self._run_id}/{key}" if key is not None else None
        if run is None:
            yield inner.exec(
                command=command,
                argv=argv,
                cwd=cwd,
                env=env,
                timeout_seconds=timeout_seconds,
                max_output_bytes=max_output_bytes,
                key=asked_key,
            )
            return
        yield from run(
            command=command,
            argv=argv,
            cwd=cwd,
            env=env,
            timeout_seconds=timeout_seconds,
            max_output_bytes=max_output_bytes,
            key=asked_key,
        )

    def read_text(self, path: str, max_bytes: int = 10 << 20) -> FileText:
        return self._workspace.read_text(path, max_bytes)

    def write_text(self, path: str, content: str) -> None:
        self._workspace.write_text(path, content)

    def checkpoint(self, ref: str) -> Checkpoint:
        return self._workspace.checkpoint(ref)

    def ports(self) -> list[int]:
        inner = self._workspace
        return inner.ports() if isinstance(inner, PortReader) else []


def sandbox_error_text(error: SandboxError) -> str:
    """sandboxd's message without the client's ``sandbox request failed:`` prefix."""
    return str(error).removeprefix("sandbox request failed: ")
