"""``POST /restore``: an archive unpacked into the empty workspace, refused (and the workspace
emptied again) unless its hash matches and every member is safe."""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import suppress
from typing import IO, TYPE_CHECKING, cast

from .errors import ApiError, JsonObject, bad_request
from .git import Git
from .log import log
from .process import kill_all, pipeline_problem, spawn, tool_env
from .workspace import Workspace

if TYPE_CHECKING:
    from .app import App
    from .request import Request


SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


def restore(app: App, request: Request) -> JsonObject:
    expected = (request.header("X-Expected-Sha256") or "").strip().lower()
    if not SHA256_HEX.match(expected):
        raise bad_request("X-Expected-Sha256 must be a sha256 hex digest", "missing_checksum")
    workspace = app.workspace
    with app.exclusive("restore"):
        if not workspace.is_empty():
            raise ApiError(409, "workspace_not_empty", "restore needs an empty workspace")
        try:
            digest, problem = unpack_archive(workspace, request.body())
        except BaseException:
            workspace.empty()
            raise
        if digest != expected or problem is not None:
            workspace.empty()
            raise restore_failure(digest, expected, problem)
        file_count, total_bytes = workspace.tally()
        git_head = Git(workspace).head() if (workspace.root / ".git").exists() else None
    log("info", "restore.done", fileCount=file_count, bytes=total_bytes, sha256=digest)
    return {"fileCount": file_count, "bytes": total_bytes, "sha256": digest, "gitHead": git_head}


def restore_failure(digest: str, expected: str, problem: str | None) -> ApiError:
    if digest != expected:
        message = f"checksum mismatch: received {digest}, expected {expected}"
        return ApiError(422, "checksum_mismatch", message)
    return ApiError(422, "archive_rejected", f"archive rejected: {problem}")


def unpack_archive(workspace: Workspace, chunks: Iterator[bytes]) -> tuple[str, str | None]:
    """Feed the body to ``zstd -d | tar -x`` while hashing it: (sha256, problem or None)."""
    env = tool_env(workspace)
    with tempfile.TemporaryFile() as tar_errors, tempfile.TemporaryFile() as zstd_errors:
        zstd = spawn(
            ["zstd", "-d", "-q", "-c"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=zstd_errors,
            env=env,
        )
        tar = spawn(
            ["tar", "-C", str(workspace.root), "-xf", "-", "--no-same-owner", "--no-overwrite-dir"],
            stdin=zstd.stdout,
            stdout=subprocess.DEVNULL,
            stderr=tar_errors,
            env=env,
        )
        cast(IO[bytes], zstd.stdout).close()
        try:
            digest = feed(cast(IO[bytes], zstd.stdin), chunks)
        except BaseException:
            kill_all(zstd, tar)
            raise
        problem = pipeline_problem(
            ("zstd", zstd, zstd_errors, (0,)), ("tar", tar, tar_errors, (0,))
        ) or unsafe_members(tar_errors)
    return digest, problem


def feed(sink: IO[bytes], chunks: Iterator[bytes]) -> str:
    """Hash every chunk and write it while the pipe accepts; keep reading after it breaks."""
    hasher = hashlib.sha256()
    writable = True
    for chunk in chunks:
        hasher.update(chunk)
        if writable:
            try:
                sink.write(chunk)
            except BrokenPipeError:
                writable = False
    with suppress(BrokenPipeError):
        sink.close()
    return hasher.hexdigest()


def unsafe_members(tar_errors: IO[bytes]) -> str | None:
    """GNU tar strips a leading '/' or '../' with only a warning: treat it as a refusal."""
    tar_errors.seek(0)
    message = tar_errors.read().decode("utf-8", "replace")
    if "Removing leading" in message:
        return "absolute or '..' member paths: " + message.strip()[-2000:]
    return None
