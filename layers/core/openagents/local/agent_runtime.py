"""The one-machine agent engine: the durable handler (``functions.agent.handler``, resolved by
name) on the durable SDK's own local execution runtime (``aws-durable-execution-sdk-python-
testing``): a real clock, its SQLite execution store under ``<OPENAGENTS_HOME>``.

- ``start`` starts one execution per run, named by the run id (a repeat is a no-op);
- ``stop`` is ``agent/stopping.py``'s, as on AWS: the cancel flag is trusted (the loop stops
  within 2 s); should the run not end by itself, its execution is paused (the runner's public
  pause: its invocation ends at its next checkpoint), the run ended ``aborted`` with its
  follow-ups, and the execution resumed to run out (each of its steps finds the run ended);
- ``recover`` (at start-up) carries on every execution of the agent function a previous process
  left incomplete (docs/agent.md, "What a restart replays"): each is invoked again, so its
  recorded steps return their results and the step in flight runs again. That is a run still
  ``running`` (its turn goes on) and a run whose end was recorded but whose ``follow-ups`` step
  was not (they run: auto-commit, audit entry, metrics, event, each recorded once). A running
  run whose execution was never created (the process ended between the run's claim and the
  start) is started; one whose execution already ended (which the turn's own ``finalize`` step
  never leaves so) ends ``failed``, its message kept.

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
from typing import TYPE_CHECKING, Any

from openagents.agent.loop import AgentLoop
from openagents.agent.stopping import Grace, stop_with_grace
from openagents.local.execution_store import KeptConnectionStore
from openagents.store.runs import RunStore

if TYPE_CHECKING:
    from aws_durable_execution_sdk_python_testing.execution import Execution

log = logging.getLogger(__name__)
HANDLER = "functions.agent.handler.make_handler"
FUNCTION_NAME = "agent-turn"
STOP_GRACE_SECONDS = 5.0
PAUSE_WAIT_SECONDS = 2.0  # how long a stop waits for the invocation in flight to stop
RUNNING = "RUNNING"  # an execution's status until it completes (paused ones too)
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
        stop_grace: Grace | None = None,
        pause_wait_seconds: float = PAUSE_WAIT_SECONDS,
    ) -> None:
        self._home, self._runs, self._loop = home, runs, loop
        self._timeout = execution_timeout_seconds
        self._grace = stop_grace or Grace(STOP_GRACE_SECONDS)
        self._pause_wait = pause_wait_seconds
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
        arn = self._executions.get(run_id)
        stopped = stop_with_grace(
            run_id,
            self._runs,
            self._grace,
            stop_execution=lambda: self._hold(run_id, arn),
            finalize=lambda: self._loop().finalize(run_id, "aborted"),
        )
        if stopped and arn is not None and self._runner is not None:
            self._runner.resume_execution(arn)  # it runs out: every step finds the run ended

    def _hold(self, run_id: str, arn: str | None) -> None:
        """Pause the run's execution: its invocation ends at its next checkpoint."""
        if arn is None or self._runner is None:
            return
        try:
            self._runner.pause_execution(arn, timeout=self._pause_wait)
        except TimeoutError:  # a step is never interrupted: it ends the invocation when it ends
            log.warning("run %s: its step in flight goes on until it returns", run_id)

    def recover(self) -> int:
        """Carry on what a previous process left: its runs still running, and the executions
        of runs whose end was recorded but not their follow-ups; how many there were."""
        self._started_runner()
        assert self._store is not None
        found, _ = self._store.query(function_name=FUNCTION_NAME, status_filter=RUNNING)
        incomplete = {
            execution.start_input.execution_name: execution
            for execution in found
            if not execution.is_complete
            and execution.durable_execution_arn not in self._executions.values()
        }
        left = [run.id for run in self._runs.running() if run.id not in self._executions]
        for run_id in left:
            self._carry_on(run_id, incomplete.pop(run_id, None))
        for run_id, execution in incomplete.items():  # the run ended: its follow-ups carry on
            log.info("run %s ended: carrying on its follow-ups", run_id)
            self._adopt(run_id, execution)
        return len(left) + len(incomplete)

    def _carry_on(self, run_id: str, execution: Execution | None) -> None:
        if execution is None:
            assert self._store is not None
            ended, _ = self._store.query(function_name=FUNCTION_NAME, execution_name=run_id)
            if ended:  # complete with its run still running: not the turn's own end
                self._loop().finalize(run_id, "failed", INTERRUPTED)
            else:  # the process ended between the run's claim and its execution's start
                self.start(run_id)
            return
        log.info("run %s: carrying on its execution from its last checkpoint", run_id)
        self._adopt(run_id, execution)

    def _adopt(self, run_id: str, execution: Execution) -> None:
        """Invoke a previous process's execution again, from its last checkpoint."""
        runner = self._started_runner()
        arn = execution.durable_execution_arn
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
