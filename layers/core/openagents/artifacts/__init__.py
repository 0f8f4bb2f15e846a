"""Artifact store: large message bodies, attachments, git bundles, the diff cache."""

from __future__ import annotations

from typing import Protocol


class ArtifactStore(Protocol):
    def put(self, key: str, data: bytes) -> None: ...
    def get(self, key: str) -> bytes:
        """The object's bytes; ``FileNotFoundError`` when there is none under ``key``."""
        ...

    def delete(self, key: str) -> None: ...
