"""One server per state folder: ``openagents dev`` holds an exclusive lock on
``<OPENAGENTS_HOME>/server.lock`` for its whole life (the kernel drops it when the process
ends, however it ends) and writes its pid and port into it. ``openagents down`` and
``openagents token`` read who holds it; ``down`` stops that server and keeps the lock while it
hibernates the sandboxes, so no server starts meanwhile."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

LOCK_NAME = "server.lock"


@dataclass(frozen=True)
class Holder:
    """The running server of a state folder, as it wrote itself into the lock file."""

    pid: int
    port: int


class ServerLock:
    def __init__(self, home: Path) -> None:
        self.path = home / LOCK_NAME
        self._file: IO[str] | None = None

    def acquire(self) -> bool:
        """Take the lock without waiting; False while a server holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        file = self.path.open("a+")
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.close()
            return False
        self._file = file
        return True

    def announce(self, port: int) -> None:
        """Write this (locked) process's pid and port for ``down`` and ``token`` to read."""
        assert self._file is not None
        self._file.seek(0)
        self._file.truncate()
        self._file.write(json.dumps({"pid": os.getpid(), "port": port}))
        self._file.flush()

    def holder(self) -> Holder | None:
        """The server holding the lock now, or None when no server runs on this folder."""
        if not self.path.exists():
            return None
        with self.path.open() as file:
            try:
                fcntl.flock(file, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                pass  # held: its holder wrote itself in
            else:
                return None
            with contextlib.suppress(ValueError, KeyError, TypeError):
                data = json.loads(file.read())
                return Holder(pid=int(data["pid"]), port=int(data["port"]))
        return None

    def take_over(self, timeout: float) -> bool:
        """Stop the server holding the lock (SIGTERM: it shuts down, its sandboxes keep
        running) and take the lock once it is gone; False if it is still held at ``timeout``."""
        holder = self.holder()
        if holder is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(holder.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while not self.acquire():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing drops the lock
            self._file = None
