"""What one process keeps of a run between its steps: values per run id, at most ``limit`` runs
(the oldest dropped first: runs that never finalized in this process); several runs' steps run
at once on their own threads."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

T = TypeVar("T")
RUNS_KEPT = 256


class PerRun(Generic[T]):
    def __init__(self, limit: int = RUNS_KEPT) -> None:
        self._values: OrderedDict[str, T] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    def get(self, run_id: str) -> T | None:
        with self._lock:
            return self._values.get(run_id)

    def put(self, run_id: str, value: T) -> None:
        with self._lock:
            self._values[run_id] = value
            self._values.move_to_end(run_id)
            while len(self._values) > self._limit:
                self._values.popitem(last=False)

    def pop(self, run_id: str) -> T | None:
        with self._lock:
            return self._values.pop(run_id, None)
