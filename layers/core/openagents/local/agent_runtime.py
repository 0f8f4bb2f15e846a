"""The one-machine agent engine: the durable handler (``functions.agent.handler``, resolved by
name) on the durable SDK's own local execution runtime (``aws-durable-execution-sdk-python-
testing``): a real clock, its SQLite execution store under ``<OPENAGENTS_HOME>``.

- ``start`` starts one execution per run, named by the run id (a repeat is a no-op);
- ``stop`` trusts the cancel flag (the loop stops within 2 s) and, should the execution not end
  by itself, stops it and ends the run ``aborted``;
- ``recover`` (at start-up) carries on the runs a previous process left ``running``: each
  one's execution, read back from the store, is invoked again, so its recorded steps return
  their results and the step in flight runs again (docs/agent.md, "What a restart replays"); a
  run whose execution was never created is started; one whose execution already ended (which
  the turn's own ``finalize`` step never leaves so) ends ``failed``, its message kept.

An execution is taken up again through the runner's public pause and resume: a paused
execution with an invocation held back is invoked when resumed. Its time limit is the one it
was started with, not armed again here (the turn's own step limit still holds).
"""

from __future__ import annotations

import importlib
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openagents.agent.loop import AgentLoop
from openagents.local.execution_store import KeptConnectionStore
from openagents.store.runs import RunStore

log = logging.getLogger(__name__)
HANDLER = "functions.agent.handler.make_handler"
FUNCTION_NAME = "agent-turn"
STOP_GRACE_SECONDS = 5.0
INTERRUPTED = "The turn was interrupted by a restart of the local runtime."
WAIT_POLL_SECONDS = 0.02


class LocalAgentRuntime:
    def __init__(
        self,
        home: Path,
        runs: RunStore,
        loop: Callable[[], AgentLoop],
        *,
        execution_timeout_seconds: int = 86_400,
    ) -> None:
        self._home, self._runs, self._loop = home, runs, loop
        self._timeout = execution_timeout_seconds
        self._runner: Any = None
        self._store: KeptConnectionStore | None = None
        self._executions: dict[str, str] = {}
        self._adopted: set[str] = set()  # executions a previous process started
        self._lock = threading.Lock()

    @property
    def store_path(self) -> Path:
        return self._home / "durable-executions.db"

    def _started_runner(self) -> Any:
        with self._lock:
            if self._runner is None:
                from aws_durable_execution_sdk_python_testing.runner import (
                    DurableFunctionTestRunner,
                )

                from openagents.local.execution_store import KeptConnectionStore

                module, _, name = HANDLER.rpartition(".")
                handler = getattr(importlib.import_module(module), name)(self._loop)
                self._home.mkdir(parents=True, exist_ok=True)
                store = KeptConnectionStore.create_and_initialize(self.store_path)
                assert isinstance(store, KeptConnectionStore)
                self._store = store
                self._runner = DurableFunctionTestRunner(
                    handler=handler,
                    skip_time=False,
                    store=store,
                    execution_timeout=self._timeout,
                )
            return self._runner

    def start(self, run_id: str) -> None:
        runner = self._started_runner()
        with self._lock:
            if run_id in self._executions:
                return
            self._executions[run_id] = runner.run_async(
                input=json.dumps({"runId": run_id}),
                execution_name=run_id,
                function_name=FUNCTION_NAME,
                execution_timeout=self._timeout,
            )

    def stop(self, run_id: str) -> None:
        threading.Thread(
            target=self._watch, args=(run_id,), name=f"stop-{run_id}", daemon=True
        ).start()

    def _watch(self, run_id: str) -> None:
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        while time.monotonic() < deadline:
            run = self._runs.get(run_id)
            if run is None or run.status.ended:
                return
            time.sleep(0.2)
        log.warning("run %s did not stop by itself: stopping its execution", run_id)
        arn = self._executions.get(run_id)
        if arn is not None and self._runner is not None:
            try:
                self._runner._executor.stop_execution(arn)  # the runner exposes no stop
            except Exception:
                log.exception("stopping the execution of run %s", run_id)
        self._loop().finalize(run_id, "aborted")

    def recover(self) -> int:
        """Carry on the runs a previous process left running; how many there were."""
        left = [run for run in self._runs.running() if run.id not in self._executions]
        for run in left:
            self._carry_on(run.id)
        return len(left)

    def _carry_on(self, run_id: str) -> None:
        runner = self._started_runner()
        assert self._store is not None
        found, _ = self._store.query(function_name=FUNCTION_NAME, execution_name=run_id)
        if not found:  # the process ended between the run's claim and its execution's start
            self.start(run_id)
            return
        execution = found[0]
        arn = execution.durable_execution_arn
        if execution.is_complete:
            self._loop().finalize(run_id, "failed", INTERRUPTED)
            return
        log.info("run %s: carrying on its execution from its last checkpoint", run_id)
        execution.pause()  # the same object the runner loads: held, then invoked on resume
        execution.defer_invocation()
        with self._lock:
            self._executions[run_id] = arn
            self._adopted.add(arn)
        runner.resume_execution(arn)

    def wait(self, run_id: str, timeout: float = 60) -> None:
        """Block until the run's execution completed (tests)."""
        arn = self._executions.get(run_id)
        if arn is None or self._runner is None or self._store is None:
            return
        if arn not in self._adopted:
            self._runner.wait_for_result(arn, timeout=int(timeout))
            return
        deadline = time.monotonic() + timeout
        while not self._store.load(arn).is_complete:  # no completion event for an adopted one
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} did not end within {timeout} s")
            time.sleep(WAIT_POLL_SECONDS)

    def close(self) -> None:
        with self._lock:
            runner, self._runner = self._runner, None
            store, self._store = self._store, None
        if runner is not None:
            runner.close()
        if store is not None:
            store.close()
