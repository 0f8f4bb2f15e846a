"""``POST /snapshot`` (the workspace streamed as ``tar | zstd``, hashed as it goes),
``GET /snapshots/<id>/manifest`` and ``POST /sync``."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
import uuid
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, cast

from .errors import ApiError, JsonObject
from .git import Git
from .log import log, now_iso
from .process import CHUNK_BYTES, PipelineStep, kill_all, pipeline_problem, spawn, tool_env
from .workspace import Workspace

if TYPE_CHECKING:
    from .app import App
    from .request import Request, Stream


MANIFEST_ROUTE = re.compile(r"^/snapshots/([A-Za-z0-9-]{1,64})/manifest$")


def sync(app: App, request: Request) -> JsonObject:
    os.sync()
    return {"ok": True}


def snapshot(app: App, request: Request) -> None:
    with app.exclusive("snapshot"):
        snapshot_id = f"snap-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:12]}"
        manifest = snapshot_facts(app.workspace, snapshot_id)
        app.manifests.put(snapshot_id, {"id": snapshot_id, "status": "streaming"})
        try:
            manifest.update(stream_archive(app.workspace, request.stream, snapshot_id))
        except BaseException as error:
            manifest["error"] = f"snapshot failed: {error!r}"
            raise
        finally:
            app.manifests.put(snapshot_id, manifest)
        if "error" not in manifest:
            # The last chunk goes out only once the manifest is readable: a client that got the
            # whole stream can always fetch it.
            request.stream.end()
        log("info", "snapshot.done", **{k: v for k, v in manifest.items() if k != "gitStatus"})


def snapshot_facts(workspace: Workspace, snapshot_id: str) -> JsonObject:
    file_count, total_bytes = workspace.tally()
    git_head = git_status_text = None
    if (workspace.root / ".git").exists():
        git = Git(workspace)
        git_head = git.head()
        status = git.run("status", "--porcelain=v2", "--branch")
        git_status_text = (
            status.stdout.decode("utf-8", "replace") if status.returncode == 0 else None
        )
    return {
        "id": snapshot_id,
        "fileCount": file_count,
        "bytes": total_bytes,
        "gitHead": git_head,
        "gitStatus": git_status_text,
        "createdAt": now_iso(),
    }


def stream_archive(workspace: Workspace, stream: Stream, snapshot_id: str) -> JsonObject:
    """Stream ``tar | zstd`` as the chunked body (without its last chunk); the result holds
    the sha256 only on success."""
    env = tool_env(workspace)
    with tempfile.TemporaryFile() as tar_errors, tempfile.TemporaryFile() as zstd_errors:
        tar = spawn(
            ["tar", "-C", str(workspace.root), "--exclude=./lost+found", "-cf", "-", "."],
            stdout=subprocess.PIPE,
            stderr=tar_errors,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        zstd = spawn(
            ["zstd", "-3", "-T0", "-q", "-c"],
            stdin=tar.stdout,
            stdout=subprocess.PIPE,
            stderr=zstd_errors,
            env=env,
        )
        cast(IO[bytes], tar.stdout).close()
        digest, archive_bytes, disconnected = pump_archive(zstd, stream, snapshot_id)
        if disconnected:
            kill_all(tar, zstd)
            problem: str | None = "client disconnected"
        else:
            # tar exits 1 when a file changed while it was read: the archive is still sound.
            tar_step: PipelineStep = ("tar", tar, tar_errors, (0, 1))
            problem = pipeline_problem(tar_step, ("zstd", zstd, zstd_errors, (0,)))
    if problem is not None:
        log("error", "snapshot.failed", id=snapshot_id, error=problem)
        return {"error": problem, "archiveBytes": archive_bytes}
    return {"archiveBytes": archive_bytes, "sha256": digest}


def pump_archive(
    zstd: subprocess.Popen[bytes], stream: Stream, snapshot_id: str
) -> tuple[str, int, bool]:
    hasher = hashlib.sha256()
    sent = 0
    source = cast(IO[bytes], zstd.stdout)
    stream.start("application/zstd", {"X-Snapshot-Id": snapshot_id})
    try:
        while chunk := os.read(source.fileno(), CHUNK_BYTES):
            hasher.update(chunk)
            sent += len(chunk)
            stream.write(chunk)
    except OSError:
        return hasher.hexdigest(), sent, True
    finally:
        source.close()
    return hasher.hexdigest(), sent, False


def get_manifest(app: App, request: Request) -> JsonObject:
    match = MANIFEST_ROUTE.match(request.path)
    manifest = app.manifests.get(match.group(1)) if match else None
    if manifest is None:
        raise ApiError(404, "not_found", "no such snapshot (manifests are kept in memory)")
    if manifest.get("status") == "streaming":
        raise ApiError(409, "snapshot_in_progress", "the snapshot is still streaming")
    return manifest
