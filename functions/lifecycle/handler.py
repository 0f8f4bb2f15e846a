"""Lambda entry point for the lifecycle loop's tasks and the scheduled reconciler.

Step Functions passes ``{"step", "sessionId", "runId", ...}`` and routes on the returned
``{"action", "wakeAt"}``; the reconciler's schedule passes ``{"step": "reconcile"}``.
"""

from __future__ import annotations

from typing import Any

from openagents.composition import Container
from openagents.entrypoints import task


def run_step(container: Container, event: dict[str, Any]) -> dict[str, Any]:
    service = container.lifecycle
    step = event["step"]
    if step == "reconcile":
        return service.reconcile(check_all=bool(event.get("checkAll")))
    session_id, run_id = str(event["sessionId"]), str(event["runId"])
    if step == "claim":
        return service.claim(session_id, run_id)
    if step == "evaluate":
        return service.evaluate(session_id, run_id)
    if step == "hibernate":
        return service.hibernate(session_id, run_id)
    if step == "recover":
        return service.recover(session_id, run_id, event.get("error"))
    raise ValueError(f"unknown lifecycle step {step!r}")


ENTRY = task(
    "openagents-lifecycle",
    run_step,
    correlation_id=lambda event: str(event.get("sessionId") or event.get("id") or "reconciler"),
)
lambda_handler = ENTRY.handler
runtime = ENTRY.runtime
