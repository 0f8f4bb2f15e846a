"""Stopping a turn, the same on every engine: the cancel flag is set and trusted first (the loop
ends the run within 2 s); should the run still be running after ``grace`` seconds, its execution
is stopped (the engine's own way: ``StopDurableExecution`` on AWS, the runner's pause on one
machine) and the run ended ``aborted`` with its follow-ups, so a stuck execution never holds the
chat. A failure to stop the execution is logged: the run is ended all the same (each later step
of the execution finds it ended and does nothing)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from openagents.store.runs import RunStore

log = logging.getLogger(__name__)
POLL_SECONDS = 0.2


@dataclass(frozen=True)
class Grace:
    """How long a stop waits for the run to end by itself, on which clock."""

    seconds: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def stop_with_grace(
    run_id: str,
    runs: RunStore,
    grace: Grace,
    *,
    stop_execution: Callable[[], None],
    finalize: Callable[[], object],
) -> bool:
    """Wait out the grace for the run to end by itself; else stop its execution and end it.
    True when it had to (the run was still running at the deadline)."""
    deadline = grace.clock() + grace.seconds
    while True:
        run = runs.get(run_id)
        if run is None or run.status.ended:
            return False
        if grace.clock() >= deadline:
            break
        grace.sleep(POLL_SECONDS)
    log.warning("run %s did not stop by itself: stopping its execution", run_id)
    try:
        stop_execution()
    except Exception:
        log.exception("stopping the execution of run %s", run_id)
    finalize()
    return True
