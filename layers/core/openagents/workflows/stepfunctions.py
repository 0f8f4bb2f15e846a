"""Workflows on Step Functions (AWS, and moto's interpreter on one machine)."""

from __future__ import annotations

import json
from typing import Any


class StepFunctionsWorkflows:
    def __init__(self, client: Any, state_machine_arns: dict[str, str]) -> None:
        self._client = client
        self._arns = state_machine_arns

    def start(self, machine: str, name: str, payload: dict[str, Any]) -> bool:
        try:
            self._client.start_execution(
                stateMachineArn=self._arns[machine], name=name, input=json.dumps(payload)
            )
        except self._client.exceptions.ExecutionAlreadyExists:
            return False
        return True
