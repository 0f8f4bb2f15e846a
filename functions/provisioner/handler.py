"""Lambda entry point for the provisioning workflow's tasks (one function, one step per call).

Step Functions passes ``{"step", "sessionId", "generation", ...}``; the step's result is the
task output. Errors propagate so the workflow's Retry/Catch decide.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from openagents.composition import Container, LazyContainer, build
from openagents.observability import NAMESPACE, PowertoolsMetricsSink

SERVICE = "openagents-provisioner"
logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
runtime = LazyContainer(lambda settings: build(settings, PowertoolsMetricsSink(metrics)))


def run_step(container: Container, event: dict[str, Any]) -> dict[str, Any]:
    service = container.provisioning
    session_id = str(event["sessionId"])
    generation = int(event["generation"])
    step = event["step"]
    if step == "start":
        return service.start(session_id, generation)
    if step == "probe":
        return service.probe(session_id, generation, int(event.get("attempts", 0)))
    if step == "prepare":
        return service.prepare(session_id, generation)
    if step == "activate":
        return service.activate(session_id, generation)
    if step == "fail":
        return service.fail(session_id, generation, event.get("error"))
    raise ValueError(f"unknown provisioning step {step!r}")


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    logger.set_correlation_id(str(event.get("sessionId")))
    logger.append_keys(step=event.get("step"), generation=event.get("generation"))
    return run_step(runtime.get(), event)
