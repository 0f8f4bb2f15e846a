"""Artifact store: large message bodies now, git bundles and snapshots later."""

from __future__ import annotations

from typing import Protocol


class ArtifactStore(Protocol):
    def put(self, key: str, data: bytes) -> None: ...
    def get(self, key: str) -> bytes: ...
    def delete(self, key: str) -> None: ...
