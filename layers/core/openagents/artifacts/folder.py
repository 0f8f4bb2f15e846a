"""One-machine artifact store: files under a folder, written atomically."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class FolderArtifactStore:
    def __init__(self, root: Path) -> None:
        self._root = root.resolve()

    def _path(self, key: str) -> Path:
        path = (self._root / key).resolve()
        if not path.is_relative_to(self._root) or path == self._root:
            raise ValueError(f"artifact key escapes the store: {key!r}")
        return path

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)

    def get(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def keys(self, prefix: str) -> list[str]:
        """The keys under the folder ``prefix`` (ending in ``/``), sorted."""
        folder = self._path(prefix.rstrip("/"))
        if not folder.is_dir():
            return []
        found = (p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".tmp-"))
        return sorted(str(p.relative_to(self._root)) for p in found)
