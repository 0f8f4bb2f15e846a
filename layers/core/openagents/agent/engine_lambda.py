"""The turn engine on AWS: an asynchronous invoke of the durable agent function, the execution
named by the run id (a repeated start is refused by Lambda as a duplicate: a no-op here)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class LambdaTurnEngine:
    def __init__(self, client: Callable[[], Any], function_arn: str) -> None:
        self._client, self._arn = client, function_arn

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
        """The loop honours the cancel flag (model stream and running tool) within 2 s."""
        log.info("stop requested for run %s", run_id)

    def recover(self) -> int:
        """Durable executions outlive a deployment: nothing to recover."""
        return 0
