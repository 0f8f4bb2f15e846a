"""Lambda entry point for the lifecycle loop's tasks and the scheduled reconciler.

Step Functions passes ``{"step", "sessionId", "runId", ...}`` and routes on the returned
``{"action", "wakeAt"}``; the reconciler's schedule passes ``{"step": "reconcile"}``. This
module is where the payloads of ``lifecycle.asl.json`` (and the schedule's) are parsed and
produced.
"""

from __future__ import annotations

import gc

# the collector off while this module imports (its passes over objects that all stay
# alive are wasted cold-start CPU), then on, with them frozen: functions/api/handler.py
gc.disable()

from datetime import datetime, timedelta  # noqa: E402
from typing import Any, Literal  # noqa: E402

from openagents.composition import Container  # noqa: E402
from openagents.entrypoints import task  # noqa: E402
from openagents.services.lifecycle import Decision  # noqa: E402
from openagents.workflows import TaskError  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field  # noqa: E402


class Reconcile(BaseModel):
    model_config = ConfigDict(extra="ignore")

    step: Literal["reconcile"]
    check_all: bool = Field(default=False, alias="checkAll")


class LoopStep(BaseModel):
    """One task of the loop (the ASL's ``Parameters.Payload``)."""

    model_config = ConfigDict(extra="ignore")

    step: Literal["claim", "evaluate", "hibernate", "recover"]
    session_id: str = Field(alias="sessionId")
    run_id: str = Field(alias="runId")
    error: TaskError | None = None  # Recover's: what the Catch caught


def wake_at(moment: datetime) -> str:
    """Step Functions' Wait ``TimestampPath`` format, rounded up to the next whole second so
    the loop never wakes before the due time."""
    whole = moment.replace(microsecond=0)
    if whole < moment:
        whole += timedelta(seconds=1)
    return whole.strftime("%Y-%m-%dT%H:%M:%SZ")


def payload(decision: Decision) -> dict[str, Any]:
    """A decision as the task output the ASL's ``ResultSelector`` and ``Route`` read."""
    return {
        "action": decision.action.value,
        "wakeAt": wake_at(decision.wake_at) if decision.wake_at else None,
        "reason": decision.reason,
    }


def run_step(container: Container, event: dict[str, Any]) -> dict[str, Any]:
    service = container.lifecycle
    if event.get("step") == "reconcile":
        swept = service.reconcile(check_all=Reconcile.model_validate(event).check_all)
        return {
            "overdue": swept.overdue,
            "kicked": swept.kicked,
            "restarted": swept.restarted,
            "purged": swept.purged,
        }
    step = LoopStep.model_validate(event)
    if step.step == "claim":
        return payload(service.claim(step.session_id, step.run_id))
    if step.step == "evaluate":
        return payload(service.evaluate(step.session_id, step.run_id))
    if step.step == "hibernate":
        return payload(service.hibernate(step.session_id, step.run_id))
    return payload(service.recover(step.session_id, step.run_id, step.error))


ENTRY = task(
    "openagents-lifecycle",
    run_step,
    correlation_id=lambda event: str(event.get("sessionId") or event.get("id") or "reconciler"),
)
lambda_handler = ENTRY.handler
runtime = ENTRY.runtime

gc.freeze()
gc.enable()
