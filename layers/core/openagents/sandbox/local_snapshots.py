"""The one-machine snapshot store: verified ``.tar.zst`` files under ``<home>/snapshots``, one
folder per session, named by opaque ids that resolve only inside the store."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from openagents.sandbox.port import Sandboxd, SandboxError, SandboxHandle, SnapshotRef

SNAPSHOT_ID = re.compile(r"[A-Za-z0-9_-]{1,80}/[0-9]{1,9}-[0-9]{8}T[0-9]{12}Z\.tar\.zst")


def snapshot_cap(disk_bytes: int) -> int:
    """The largest archive a workspace of ``disk_bytes`` can give (incompressible files grow a
    little under zstd, tar adds headers): past it, the sandbox is not sending a snapshot."""
    return disk_bytes + disk_bytes // 16 + (64 << 20)


class _HashingWriter:
    """Hashes and counts what it writes; refuses past ``limit`` bytes (the sandbox streams the
    archive: an endless one must not fill the host's disk)."""

    def __init__(self, out: IO[bytes], limit: int) -> None:
        self._out = out
        self._limit = limit
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        if self.size + len(data) > self._limit:
            raise SandboxError(
                f"snapshot refused: the sandbox sent more than {self._limit} bytes, more than "
                "its workspace can hold"
            )
        self.sha256.update(data)
        self.size += len(data)
        return self._out.write(data)


class SnapshotStore:
    """Snapshots of sandboxes, streamed from sandboxd and kept only when verified."""

    def __init__(self, folder: Path, driver: str) -> None:
        self._folder = folder
        self._driver = driver

    def take(self, client: Sandboxd, handle: SandboxHandle, disk_bytes: int) -> SnapshotRef:
        """Stream the workspace archive to a file, hashing it; keep it only if sandboxd's
        manifest reports the same sha256. ``handle``'s session id is a checked one."""
        folder = self._folder / handle.session_id
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SandboxError(f"the snapshot store failed: {exc}") from exc
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        final = folder / f"{handle.generation}-{stamp}.tar.zst"
        partial = final.with_suffix(".partial")
        try:
            with partial.open("wb") as out:
                writer = _HashingWriter(out, snapshot_cap(disk_bytes))
                manifest = client.snapshot_to(writer)  # type: ignore[arg-type]
                out.flush()
                os.fsync(out.fileno())
            digest = writer.sha256.hexdigest()
            if manifest.sha256 != digest:
                raise SandboxError(
                    f"snapshot verification failed: manifest sha256 {manifest.sha256} "
                    f"!= received {digest} ({manifest.error or 'archive incomplete'})"
                )
            partial.rename(final)
        except OSError as exc:  # the snapshot store (disk full, permissions): not a snapshot
            partial.unlink(missing_ok=True)
            raise SandboxError(f"the snapshot store failed: {exc}") from exc
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        return SnapshotRef(
            driver=self._driver,
            id=f"{folder.name}/{final.name}",  # opaque: resolved inside the snapshot folder
            session_id=handle.session_id,
            generation=handle.generation,
            size_bytes=writer.size,
            sha256=digest,
            created_at=datetime.now(UTC),
            manifest=manifest.as_json(),
        )

    def path(self, snapshot_id: str) -> Path:
        """An opaque snapshot id as a file of the snapshot folder, or a SandboxError: never a
        path elsewhere on the host, whatever the store holds. Ids recorded before ids were
        opaque (absolute paths inside the folder) still resolve."""
        folder = self._folder.resolve()
        relative = snapshot_id
        if os.path.isabs(snapshot_id):
            with contextlib.suppress(ValueError):
                relative = str(Path(snapshot_id).resolve().relative_to(folder))
        if not SNAPSHOT_ID.fullmatch(relative):
            raise SandboxError("invalid snapshot id")
        path = (folder / relative).resolve()
        if not path.is_relative_to(folder):
            raise SandboxError("invalid snapshot id")
        return path

    @staticmethod
    def restore(client: Sandboxd, path: Path, ref: SnapshotRef) -> None:
        """Stream the snapshot into a sandbox's empty workspace and check its file count."""
        if not path.exists():
            raise SandboxError("snapshot not found")
        if ref.sha256 is None:
            raise SandboxError("snapshot has no checksum")
        with path.open("rb") as src:
            result = client.restore_from(src, ref.sha256)
        expected = ref.manifest.get("fileCount")
        if expected is not None and result.file_count != expected:
            raise SandboxError(
                f"restore verification failed: {result.file_count} files restored, "
                f"the manifest says {expected}"
            )

    def delete(self, ref: SnapshotRef) -> None:
        self.path(ref.id).unlink(missing_ok=True)
