"""The durable executions' store on one machine: the SDK's SQLite execution store
(``aws-durable-execution-sdk-python-testing``) on one kept connection.

The SDK's store opens a connection, sets WAL and closes it for every operation (closing the last
connection to a WAL database checkpoints it into the main file, with fsyncs), and parses the
whole execution from JSON at every load, two loads per step: about 64 ms per durable step here
(docs/benchmarks.md). This one keeps one connection open (its operations serialised by a
lock) and answers loads from the executions it saved, as the SDK's in-memory store does (the
same objects), while every save and update is still written through: the same file, schema
and durability (WAL with ``synchronous=NORMAL``: a committed checkpoint survives kill -9 of the
process; after a restart the executions are read from the file).
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aws_durable_execution_sdk_python_testing.execution import Execution
from aws_durable_execution_sdk_python_testing.stores.sqlite import SQLiteExecutionStore

KEPT_EXECUTIONS = 64  # the most recently used executions answered from memory


class KeptConnectionStore(SQLiteExecutionStore):
    def __init__(self, db_path: Path) -> None:
        super().__init__(db_path)
        self._lock = threading.RLock()
        self._kept: sqlite3.Connection | None = None
        self._recent: OrderedDict[str, Execution] = OrderedDict()

    def _remember(self, execution: Execution) -> None:
        with self._lock:
            self._recent[execution.durable_execution_arn] = execution
            self._recent.move_to_end(execution.durable_execution_arn)
            while len(self._recent) > KEPT_EXECUTIONS:
                self._recent.popitem(last=False)

    def save(self, execution: Execution) -> None:
        super().save(execution)
        self._remember(execution)

    def update(self, execution: Execution) -> None:
        super().update(execution)
        self._remember(execution)

    def load(self, execution_arn: str) -> Execution:
        with self._lock:
            recent = self._recent.get(execution_arn)
        if recent is not None:
            return recent
        execution = super().load(execution_arn)
        self._remember(execution)
        return execution

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._kept is None:  # the SDK's settings, usable from its worker threads
                kept = sqlite3.connect(self.db_path, timeout=30.0, check_same_thread=False)
                kept.execute("PRAGMA journal_mode=WAL;")
                kept.execute("PRAGMA synchronous=NORMAL;")
                self._kept = kept
            with self._kept:  # commit, or roll back on an error, as the SDK's store does
                yield self._kept

    def close(self) -> None:
        with self._lock:
            kept, self._kept = self._kept, None
        if kept is not None:
            kept.close()
