"""Lambda task entry points: Powertools logging (correlation id), tracing and metrics around one
step function, with a container built on the first invocation and reused after."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from openagents.composition import Container, LazyContainer, build
from openagents.observability import NAMESPACE, PowertoolsMetricsSink, traced

Event = dict[str, Any]
Step = Callable[[Container, Event], dict[str, Any]]
Handler = Callable[[Event, LambdaContext], dict[str, Any]]


@dataclass(frozen=True)
class Task:
    handler: Handler
    runtime: LazyContainer


def task(service: str, step: Step, correlation_id: Callable[[Event], str]) -> Task:
    logger = Logger(service=service)
    metrics = Metrics(namespace=NAMESPACE, service=service)
    runtime = LazyContainer(lambda settings: build(settings, PowertoolsMetricsSink(metrics)))

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics
    @traced(service)
    def lambda_handler(event: Event, context: LambdaContext) -> dict[str, Any]:
        logger.set_correlation_id(correlation_id(event))
        logger.append_keys(step=event.get("step"))
        return step(runtime.get(), event)

    return Task(handler=lambda_handler, runtime=runtime)
