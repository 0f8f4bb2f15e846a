"""Lambda entry point for the provisioning workflow's tasks (one function, one step per call).

Step Functions passes ``{"step", "sessionId", "generation", ...}``; the step's result is the
task output. Errors propagate so the workflow's Retry/Catch decide. This module is where the
payloads of ``provisioning.asl.json`` are parsed and produced.
"""

from __future__ import annotations

import gc

# the collector off while this module imports (its passes over objects that all stay
# alive are wasted cold-start CPU), then on, with them frozen: functions/api/handler.py
gc.disable()

from typing import Any, Literal  # noqa: E402

from openagents.composition import Container  # noqa: E402
from openagents.entrypoints import task  # noqa: E402
from openagents.services.provisioning import Prepared, Probed, Settled, Started  # noqa: E402
from openagents.workflows import TaskError  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field  # noqa: E402

Result = Started | Probed | Prepared | Settled


class Step(BaseModel):
    """One task's payload (the ASL's ``Parameters.Payload``)."""

    model_config = ConfigDict(extra="ignore")

    step: Literal["start", "probe", "prepare", "activate", "fail"]
    session_id: str = Field(alias="sessionId")
    generation: int
    attempts: int = 0
    error: TaskError | None = None  # MarkFailed's: what the Catch caught


def payload(result: Result) -> dict[str, Any]:
    """A step's result as the task output the ASL's ``ResultSelector`` reads."""
    if isinstance(result, Started):
        out: dict[str, Any] = {"started": result.started}
        if result.retry:
            out["retry"] = True
        if result.reason is not None:
            out["reason"] = result.reason
        return out
    if isinstance(result, Probed):
        return {"ready": result.ready, "attempts": result.attempts}
    if isinstance(result, Prepared):
        return {"branch": result.branch, **({"fromBundle": True} if result.from_bundle else {})}
    return {"state": result.state}


def run_step(container: Container, event: dict[str, Any]) -> dict[str, Any]:
    """One step: start, probe and fail are provisioning's own; prepare and activate reach past
    it, through the sandbox-ready flow (``services/flows/sandbox_ready.py``)."""
    step = Step.model_validate(event)
    service, ready = container.provisioning, container.sandbox_ready
    session_id, generation = step.session_id, step.generation
    result: Result
    if step.step == "start":
        result = service.start(session_id, generation)
    elif step.step == "probe":
        result = service.probe(session_id, generation, step.attempts)
    elif step.step == "prepare":
        result = ready.prepare(session_id, generation)
    elif step.step == "activate":
        result = ready.activate(session_id, generation)
    else:
        result = service.fail(session_id, generation, step.error)
    return payload(result)


ENTRY = task(
    "openagents-provisioner", run_step, correlation_id=lambda event: str(event.get("sessionId"))
)
lambda_handler = ENTRY.handler
runtime = ENTRY.runtime

gc.freeze()
gc.enable()
