"""Workflows: the port, the catalog of state machines and Lambda tasks, the Step Functions
adapter. One catalog serves AWS (the CDK app) and the one-machine runtime."""

from __future__ import annotations

from typing import Any, Protocol


class Workflows(Protocol):
    def start(self, machine: str, name: str, payload: dict[str, Any]) -> bool:
        """Start an execution named ``name``. Idempotent: while one of that name runs with the
        same input the call succeeds without starting another; once it has ended, False."""
        ...
