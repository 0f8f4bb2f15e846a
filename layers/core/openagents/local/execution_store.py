"""The durable executions' store on one machine: the SDK's SQLite execution store
(``aws-durable-execution-sdk-python-testing``) on one kept connection, written append-only.

The SDK's store opens a connection, sets WAL and closes it for every operation (closing the last
connection to a WAL database checkpoints it into the main file, with fsyncs), parses the whole
execution from JSON at every load (two loads per step) and serialises the whole execution (every
operation and every update so far) at every save: a step cost more the longer the turn
(docs/benchmarks.md). This one

- keeps one connection open (its operations serialised by a lock) and answers loads from the
  executions it saved, as the SDK's in-memory store does (the same objects);
- writes a save as what changed since the last one: a row per new or replaced operation, update,
  timestamp or map entry in ``execution_changes`` (the item's JSON, as the SDK's ``to_json_dict``
  writes it) plus one small row of the execution's other fields, in one transaction that also
  keeps the SDK's ``executions`` row's status and timestamps current;
- writes the whole execution into the SDK's ``executions`` row (and drops its changes) when it
  first saves it and once it is complete, so a finished execution is what the SDK's own store
  reads; a running one is read back (after a restart) by folding its changes over that row.

Every save is on disk when it returns (WAL with ``synchronous=NORMAL``: a committed checkpoint
survives kill -9 of the process).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_durable_execution_sdk_python_testing.exceptions import ResourceNotFoundException
from aws_durable_execution_sdk_python_testing.execution import Execution
from aws_durable_execution_sdk_python_testing.stores.sqlite import SQLiteExecutionStore

KEPT_EXECUTIONS = 64  # the most recently used executions answered from memory
HEAD = ""  # the ``field`` of the row that holds the execution's other fields
LENGTHS = "Lengths"  # in the head row: each list's length (a list may shrink)
CHANGES = """
    CREATE TABLE IF NOT EXISTS execution_changes (
        durable_execution_arn TEXT NOT NULL,
        field TEXT NOT NULL,
        entry TEXT NOT NULL,
        data TEXT,
        PRIMARY KEY (durable_execution_arn, field, entry)
    ) WITHOUT ROWID
"""
# field: a key of the SDK's execution JSON ("" for the head row); entry: a list's index or a
# map's key; data: the item's JSON (NULL: the map's key was removed)


@dataclass(frozen=True)
class _List:
    attribute: str
    key: str
    encode: Callable[[Any], Any]


LISTS = (
    _List("operations", "Operations", lambda op: op.to_json_dict()),
    _List("updates", "Updates", lambda update: update.to_dict()),
    _List("update_timestamps", "UpdateTimestamps", lambda at: at.isoformat()),
    _List("invocation_completions", "InvocationCompletions", lambda done: done.to_json_dict()),
    _List("updated_operation_ids", "UpdatedOperationIds", str),
)
MAPS = {
    "operation_last_touched_seq": "OperationLastTouchedSeq",
    "operation_size_bytes": "OperationSizeBytes",
    "chained_invoke_children": "ChainedInvokeChildren",
}
Row = tuple[str, str, str, str | None]  # (arn, field, entry, data)


@dataclass
class _Written:
    """What the file holds for an execution: its lists' items and its maps, as last saved."""

    lists: dict[str, list[Any]]
    maps: dict[str, dict[str, Any]]

    @classmethod
    def of(cls, execution: Execution) -> _Written:
        return cls(
            {item.attribute: list(getattr(execution, item.attribute)) for item in LISTS},
            {attribute: dict(getattr(execution, attribute)) for attribute in MAPS},
        )


class KeptConnectionStore(SQLiteExecutionStore):
    def __init__(self, db_path: Path) -> None:
        super().__init__(db_path)
        self._lock = threading.RLock()
        self._kept: sqlite3.Connection | None = None
        self._recent: OrderedDict[str, tuple[Execution, _Written]] = OrderedDict()

    def _init_db(self) -> None:
        super()._init_db()
        with self._connection() as db:
            db.execute(CHANGES)

    def _remember(self, execution: Execution) -> None:
        arn = execution.durable_execution_arn
        self._recent[arn] = (execution, _Written.of(execution))
        self._recent.move_to_end(arn)
        while len(self._recent) > KEPT_EXECUTIONS:
            self._recent.popitem(last=False)

    def save(self, execution: Execution) -> None:
        arn = execution.durable_execution_arn
        with self._lock:
            kept = self._recent.get(arn)
            with self._connection() as db:  # one transaction
                if kept is None or execution.is_complete:
                    _save_whole(db, execution)
                else:
                    _save_changes(db, execution, kept[1])
            self._remember(execution)

    def update(self, execution: Execution) -> None:
        self.save(execution)

    def load(self, execution_arn: str) -> Execution:
        with self._lock:
            kept = self._recent.get(execution_arn)
            if kept is not None:
                self._recent.move_to_end(execution_arn)
                return kept[0]
            execution = self._read(execution_arn)
            self._remember(execution)
            return execution

    def _read(self, execution_arn: str) -> Execution:
        """The execution on disk: the SDK's row with its changes folded in."""
        with self._connection() as db:
            row = db.execute(
                "SELECT data FROM executions WHERE durable_execution_arn = ?", (execution_arn,)
            ).fetchone()
            changes = db.execute(
                "SELECT field, entry, data FROM execution_changes WHERE durable_execution_arn = ?",
                (execution_arn,),
            ).fetchall()
        if row is None:
            raise ResourceNotFoundException("Durable Execution does not exist")
        return Execution.from_json_dict(fold(json.loads(row[0]), changes))

    def query(self, *args: Any, **kwargs: Any) -> tuple[list[Execution], str | None]:
        executions, marker = super().query(*args, **kwargs)
        return [self.load(e.durable_execution_arn) for e in executions], marker

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


def _save_changes(db: sqlite3.Connection, execution: Execution, written: _Written) -> None:
    """The rows of what changed since ``written``, and the SDK's row's status."""
    arn = execution.durable_execution_arn
    rows: list[Row] = [(arn, HEAD, "", json.dumps(_head(execution)))]
    shrunk: list[tuple[str, int]] = []
    for item in LISTS:
        now, before = getattr(execution, item.attribute), written.lists[item.attribute]
        kept = min(len(now), len(before))
        # most saves only append: the kept prefix compares equal in C (identity first)
        start = kept if now[:kept] == before[:kept] else 0
        for i in range(start, len(now)):
            if i >= len(before) or now[i] is not before[i]:
                rows.append((arn, item.key, str(i), json.dumps(item.encode(now[i]))))
        if len(now) < len(before):
            shrunk.append((item.key, len(now)))
    for attribute, key in MAPS.items():
        mapping, old = getattr(execution, attribute), written.maps[attribute]
        if mapping != old:  # the values are ints and strings: their items can be diffed as sets
            rows += [(arn, key, str(k), json.dumps(v)) for k, v in mapping.items() - old.items()]
            rows += [(arn, key, str(k), None) for k in old.keys() - mapping.keys()]
    db.executemany("INSERT OR REPLACE INTO execution_changes VALUES (?, ?, ?, ?)", rows)
    for key, length in shrunk:
        db.execute(
            "DELETE FROM execution_changes WHERE durable_execution_arn = ? AND field = ?"
            " AND CAST(entry AS INTEGER) >= ?",
            (arn, key, length),
        )
    db.execute(
        "UPDATE executions SET status = ?, start_timestamp = ?, end_timestamp = ?"
        " WHERE durable_execution_arn = ?",
        (execution.current_status().value, *_times(execution), arn),
    )


def _save_whole(db: sqlite3.Connection, execution: Execution) -> None:
    """The whole execution in the SDK's row (as its store writes it), its changes dropped."""
    arn = execution.durable_execution_arn
    db.execute(
        "INSERT OR REPLACE INTO executions (durable_execution_arn, function_name,"
        " execution_name, status, start_timestamp, end_timestamp, data)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            arn,
            execution.start_input.function_name,
            execution.start_input.execution_name,
            execution.current_status().value,
            *_times(execution),
            json.dumps(execution.to_json_dict()),
        ),
    )
    db.execute("DELETE FROM execution_changes WHERE durable_execution_arn = ?", (arn,))


def _times(execution: Execution) -> tuple[float | None, float | None]:
    started = execution.get_operation_execution_started()
    start, end = started.start_timestamp, started.end_timestamp
    return (start.timestamp() if start else None, end.timestamp() if end else None)


def _head(execution: Execution) -> dict[str, Any]:
    """The execution's JSON without its lists and maps (their lengths instead), from the SDK's
    own ``to_json_dict`` of a copy that holds none (any field a newer SDK adds is kept)."""
    bare = object.__new__(Execution)
    bare.__dict__.update(execution.__dict__)
    for item in LISTS:
        setattr(bare, item.attribute, [])
    for attribute in MAPS:
        setattr(bare, attribute, {})
    head = bare.to_json_dict()
    for key in [item.key for item in LISTS] + list(MAPS.values()):
        head.pop(key, None)
    head[LENGTHS] = {item.key: len(getattr(execution, item.attribute)) for item in LISTS}
    return head


def fold(data: dict[str, Any], changes: list[tuple[str, str, str | None]]) -> dict[str, Any]:
    """The SDK's execution JSON ``data`` with the saved ``changes`` applied."""
    lists: dict[str, dict[int, Any]] = {}
    maps: dict[str, dict[str, str | None]] = {}
    for field, entry, value in changes:
        if field == HEAD:
            data = {**data, **json.loads(str(value))}
        elif field in MAPS.values():
            maps.setdefault(field, {})[entry] = value
        else:
            lists.setdefault(field, {})[int(entry)] = json.loads(str(value))
    lengths = data.pop(LENGTHS, {})
    for item in LISTS:
        items = list(data.get(item.key, []))
        for i, value in sorted(lists.get(item.key, {}).items()):
            items.extend([None] * (i + 1 - len(items)))
            items[i] = value
        data[item.key] = items[: lengths.get(item.key, len(items))]
    for key in MAPS.values():
        mapping = dict(data.get(key, {}))
        for entry, raw in maps.get(key, {}).items():
            if raw is None:
                mapping.pop(entry, None)
            else:
                mapping[entry] = json.loads(raw)
        data[key] = mapping
    return data
