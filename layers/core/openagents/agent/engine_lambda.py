"""The turn engine on AWS: an asynchronous invoke of the durable agent function, the execution
named by the run id (a repeated start is refused by Lambda as a duplicate: a no-op here).

Stop is ``agent/stopping.py``'s, as on one machine: after ``grace`` seconds of a run still
running, the execution is stopped (``StopDurableExecution``) and the run ended ``aborted`` here,
so a stuck execution never holds the chat.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from openagents.agent.loop import AgentLoop
from openagents.agent.stopping import Grace, stop_with_grace
from openagents.store.runs import RunStore

STOP_GRACE_SECONDS = 3.0


class LambdaTurnEngine:
    def __init__(
        self,
        client: Callable[[], Any],
        function_arn: str,
        runs: RunStore,
        loop: Callable[[], AgentLoop],
        *,
        grace: float = STOP_GRACE_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client, self._arn = client, function_arn
        self._runs, self._loop = runs, loop
        self._grace = Grace(grace, clock, sleep)

    def start(self, run_id: str) -> None:
        try:
            self._client().invoke(
                FunctionName=self._arn,
                InvocationType="Event",
                DurableExecutionName=run_id,
                Payload=json.dumps({"runId": run_id}).encode(),
            )
        except Exception as error:
            if "AlreadyExists" in type(error).__name__ or "already exists" in str(error):
                return
            raise

    def stop(self, run_id: str) -> None:
        stop_with_grace(
            run_id,
            self._runs,
            self._grace,
            stop_execution=lambda: self._stop_execution(run_id),
            finalize=lambda: self._loop().finalize(run_id, "aborted"),
        )

    def _stop_execution(self, run_id: str) -> None:
        client = self._client()
        found = client.list_durable_executions_by_function(
            FunctionName=self._arn, DurableExecutionName=run_id, Statuses=["RUNNING"]
        )
        for execution in found.get("DurableExecutions", []):
            client.stop_durable_execution(DurableExecutionArn=execution["DurableExecutionArn"])

    def recover(self) -> int:
        """Durable executions outlive a deployment: nothing to recover."""
        return 0
