"""The daemon's state: the workspace, the token's digest, the last snapshot manifests and the
lock that keeps workspace-wide operations apart."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from .errors import ApiError, JsonObject
from .exec_keys import ExecKeys
from .workspace import Workspace

MANIFESTS_KEPT = 16


class ManifestStore:
    """The last few snapshot manifests, in memory."""

    def __init__(self, keep: int) -> None:
        self._keep = keep
        self._items: OrderedDict[str, JsonObject] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, snapshot_id: str, manifest: JsonObject) -> None:
        with self._lock:
            self._items[snapshot_id] = manifest
            self._items.move_to_end(snapshot_id)
            while len(self._items) > self._keep:
                self._items.popitem(last=False)

    def get(self, snapshot_id: str) -> JsonObject | None:
        with self._lock:
            return self._items.get(snapshot_id)


@dataclass
class App:
    workspace: Workspace
    token_digest: bytes
    manifests: ManifestStore = field(default_factory=lambda: ManifestStore(MANIFESTS_KEPT))
    busy: threading.Lock = field(default_factory=threading.Lock)
    exec_keys: ExecKeys = field(default_factory=ExecKeys)

    @contextmanager
    def exclusive(self, action: str) -> Iterator[None]:
        """Prepare, snapshot and restore never overlap."""
        if not self.busy.acquire(blocking=False):
            raise ApiError(409, "busy", f"cannot {action}: another workspace operation is running")
        try:
            yield
        finally:
            self.busy.release()
