"""Scheduled handlers on one machine: a timer thread instead of EventBridge schedules, calling
the same Lambda entry points (resolved by handler string, from the workflow catalog)."""

from __future__ import annotations

import logging
import threading
from typing import Any

from openagents.local.lambda_context import LocalLambdaContext
from openagents.local.stepfunctions import resolve
from openagents.workflows import catalog

log = logging.getLogger(__name__)


def run_schedule(name: str, **extra: Any) -> Any:
    schedule = catalog.SCHEDULES[name]
    handler = resolve(catalog.FUNCTIONS[schedule["function"]])
    context = LocalLambdaContext(function_name=f"openagents-{schedule['function']}")
    return handler({"step": schedule["step"], **extra}, context)


class Timer:
    """Runs every schedule of the catalog every ``period`` seconds until stopped."""

    def __init__(self, period: float) -> None:
        self._period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="schedules", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self._period):
            for name in catalog.SCHEDULES:
                try:
                    run_schedule(name)
                except Exception as exc:  # a failed sweep is retried at the next period
                    log.warning("schedule %s failed: %s", name, exc)
