"""Lambda entry point for archive finalisation.

Invoked by the EventBridge rule on ``Session Archived`` events whose ``detail.finalize`` is true
(``openagents.workflows.catalog.RULES``), or by the one-machine bus running the same rule. A
failure raises: EventBridge (asynchronous invocation) retries it, and the error is recorded on
the session as ``lifecycleError``.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from openagents.composition import Container, LazyContainer, build
from openagents.observability import NAMESPACE, PowertoolsMetricsSink

SERVICE = "openagents-archiver"
logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
runtime = LazyContainer(lambda settings: build(settings, PowertoolsMetricsSink(metrics)))


def session_id_of(event: dict[str, Any]) -> str:
    """An EventBridge envelope (``detail.sessionId``) or a direct ``{"sessionId"}``."""
    detail = event.get("detail") if isinstance(event.get("detail"), dict) else event
    session_id = (detail or {}).get("sessionId")
    if not isinstance(session_id, str) or not session_id:
        raise ValueError("the event names no sessionId")
    return session_id


def run(container: Container, event: dict[str, Any]) -> dict[str, Any]:
    return container.archive.finalize(session_id_of(event))


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    session_id = session_id_of(event)
    logger.set_correlation_id(str(event.get("id") or session_id))
    logger.append_keys(session_id=session_id)
    return run(runtime.get(), event)
