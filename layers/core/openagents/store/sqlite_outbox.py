"""The events outbox of the SQLite store.

Each domain event is a row written in the transaction of the change it reports, so no event is
lost between the write and the publish. ``Outbox.drain`` publishes the rows to the bus in
commit order (hence in order per session) and deletes them only once the bus took them: at least
once — a crash between the publish and the delete publishes them again, and consumers tolerate
replays (docs/events.md). The store drains right after each commit; ``OutboxDrainer`` drains in
the background, and first of all what a previous run committed but never published.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from openagents.domain.models import AuditEntry
from openagents.events import Event, from_entry
from openagents.store.sqlite_schema import Database

log = logging.getLogger(__name__)
Publish = Callable[[Sequence[Event]], None]

_locks: dict[Path, threading.Lock] = {}
_registry = threading.Lock()


def _drain_lock(path: Path) -> threading.Lock:
    """One drain at a time per database in this process, so events leave in commit order."""
    with _registry:
        return _locks.setdefault(path.resolve(), threading.Lock())


class Outbox:
    def __init__(self, database: Database, publish: Publish, batch: int = 100) -> None:
        self._db = database
        self._publish = publish
        self._batch = batch
        self._lock = _drain_lock(database.path)

    def pending(self) -> int:
        row = self._db.connection().execute("SELECT count(*) FROM outbox").fetchone()
        return int(row[0])

    def drain(self) -> int:
        """Publish every pending event, oldest first; how many were published."""
        total = 0
        with self._lock:
            while True:
                rows = (
                    self._db.connection()
                    .execute(
                        "SELECT seq, user_id, entry FROM outbox ORDER BY seq LIMIT ?",
                        (self._batch,),
                    )
                    .fetchall()
                )
                if not rows:
                    return total
                self._publish(
                    [from_entry(AuditEntry.model_validate_json(e), u) for _, u, e in rows]
                )
                with self._db.transaction() as db:
                    db.execute("DELETE FROM outbox WHERE seq <= ?", (rows[-1][0],))
                total += len(rows)

    def try_drain(self) -> None:
        """Drain, never raising: what is not published stays for the next drain."""
        try:
            self.drain()
        except Exception as exc:
            log.warning("events outbox: publish failed, will retry: %s", exc)


class OutboxDrainer:
    """Drains the outbox every ``interval`` seconds on a daemon thread (the first drain at
    once: events a previous run committed but never published)."""

    def __init__(self, outbox: Outbox, interval: float = 1.0) -> None:
        self.outbox = outbox
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="outbox-drainer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            self.outbox.try_drain()
            if self._stop.wait(self._interval):
                return
