"""Commands run once per idempotency key (``POST /exec`` with ``key``: the agent's tool call id).

A re-sent exec with a key already seen does not run the command again: while the first runs it
waits for it and answers its result; once it ended it answers the recorded result; when the
record says it started but it is not running here (sandboxd itself was restarted: the command
died with its sandbox) it answers ``interrupted``, and the caller decides. Records are written
before the command starts and when it ends (fsynced), in the workspace's git folder
(``.git/openagents/exec/``, outside the work tree, carried by a snapshot), the newest
``KEPT`` of them kept; a workspace without one keeps them in memory only.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

from .errors import JsonObject, bad_request
from .workspace import Workspace

KEPT = 256
MAX_KEY_CHARS = 256
FOLDER = "openagents/exec"


def exec_key(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_KEY_CHARS:
        raise bad_request(f"key must be a string of 1 to {MAX_KEY_CHARS} characters")
    return value


def interrupted() -> JsonObject:
    return {
        "exitCode": None,
        "stdout": "",
        "stderr": "",
        "truncated": False,
        "timedOut": False,
        "durationMs": 0,
        "interrupted": True,
    }


class ExecKeys:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, threading.Event] = {}
        self._results: dict[str, JsonObject] = {}  # this process's, newest last

    def run(self, workspace: Workspace, key: str, command: Callable[[], JsonObject]) -> JsonObject:
        folder = _folder(workspace)
        with self._lock:
            running = self._running.get(key)
            if running is None:
                known = self._results.get(key) or _read(folder, key)
                if known is not None:
                    return known if "exitCode" in known else interrupted()
                self._running[key] = threading.Event()
                _write(folder, key, {"started": True})
        if running is not None:
            running.wait()
            with self._lock:
                return self._results.get(key) or interrupted()
        try:
            result = command()
        except BaseException:
            result = interrupted()
            raise
        finally:
            with self._lock:
                self._remember(key, result)
                _write(folder, key, result)
                self._running.pop(key).set()
        return result

    def _remember(self, key: str, result: JsonObject) -> None:
        self._results.pop(key, None)
        self._results[key] = result
        while len(self._results) > KEPT:
            self._results.pop(next(iter(self._results)))


def _folder(workspace: Workspace) -> Path | None:
    git = workspace.root / ".git"
    return git / FOLDER if git.is_dir() and not git.is_symlink() else None


def _path(folder: Path, key: str) -> Path:
    return folder / (hashlib.sha256(key.encode()).hexdigest() + ".json")


def _read(folder: Path | None, key: str) -> JsonObject | None:
    if folder is None:
        return None
    try:
        data = json.loads(_path(folder, key).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write(folder: Path | None, key: str, data: JsonObject) -> None:
    """The record, replaced atomically and on disk; then the oldest beyond ``KEPT`` dropped."""
    if folder is None:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = _path(folder, key)
        temporary = path.with_suffix(".tmp")
        with temporary.open("w") as out:
            json.dump(data, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
        records = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for old in records[:-KEPT]:
            old.unlink(missing_ok=True)
    except OSError:
        pass  # a workspace that cannot keep the record: the key holds for this process only
