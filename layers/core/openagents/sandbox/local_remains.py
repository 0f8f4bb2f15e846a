"""What the local driver keeps of a session on disk, removed when the session is deleted:
``<home>/sandboxes/<id>/`` (every generation's workspace volume and socket folder) and
``<home>/snapshots/<id>/``. Called once the session's sandbox is stopped."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from openagents.sandbox.port import SandboxError

SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")  # as the driver's own folders are named


class LocalRemains:
    def __init__(self, home: Path) -> None:
        self._folders = (home / "sandboxes", home / "snapshots")

    def discard(self, session_id: str) -> None:
        if not SESSION_ID.fullmatch(session_id):
            raise SandboxError("invalid session id for a sandbox")
        for folder in self._folders:
            try:
                shutil.rmtree(folder / session_id)  # links inside are removed, not followed
            except FileNotFoundError:
                pass
            except OSError as error:
                raise SandboxError(f"could not remove {folder / session_id}: {error}") from error
