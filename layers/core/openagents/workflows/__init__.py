"""Workflows: the port, the catalog of state machines and Lambda tasks, the Step Functions
adapter. One catalog serves AWS (the CDK app) and the one-machine runtime."""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field


class TaskError(BaseModel):
    """A failed task as a state machine's ``Catch`` hands it on: ``{"Error", "Cause"}`` (the
    cause of a Lambda error is its JSON error object)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    error: str | None = Field(default=None, alias="Error")
    cause: str | None = Field(default=None, alias="Cause")


class Workflows(Protocol):
    def start(self, machine: str, name: str, payload: dict[str, Any]) -> bool:
        """Start an execution named ``name``. Idempotent: while one of that name runs with the
        same input the call succeeds without starting another; once it has ended, False."""
        ...
