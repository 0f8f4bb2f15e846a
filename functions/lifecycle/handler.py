"""Lambda entry point for the lifecycle loop's tasks and the scheduled reconciler.

Step Functions passes ``{"step", "sessionId", "runId", ...}`` and routes on the returned
``{"action", "wakeAt"}``; the reconciler's schedule passes ``{"step": "reconcile"}``.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from openagents.composition import Container, LazyContainer, build
from openagents.observability import NAMESPACE, PowertoolsMetricsSink

SERVICE = "openagents-lifecycle"
logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
runtime = LazyContainer(lambda settings: build(settings, PowertoolsMetricsSink(metrics)))


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


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    logger.set_correlation_id(str(event.get("sessionId") or event.get("id") or "reconciler"))
    logger.append_keys(step=event.get("step"), run_id=event.get("runId"))
    return run_step(runtime.get(), event)
