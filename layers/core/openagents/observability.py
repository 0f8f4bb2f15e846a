"""Powertools adapters: the metrics sink (EMF on AWS, where Lambda's log stream carries it to
CloudWatch; nothing with ``POWERTOOLS_METRICS_DISABLED``, which ``openagents dev`` sets) and the
handler tracer, which loads the X-Ray SDK only when tracing is on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Metrics as PowertoolsMetrics
from aws_lambda_powertools import Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

NAMESPACE = "OpenAgents"
Handler = Callable[..., Any]  # as Powertools types a decorated handler


class PowertoolsMetricsSink:
    def __init__(self, metrics: PowertoolsMetrics) -> None:
        self._metrics = metrics

    def count(self, name: str, value: int = 1) -> None:
        # disabled: Powertools would still collect (and print each 100th value), not flush
        if is_metrics_disabled():
            return
        self._metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def tracing_enabled() -> bool:
    """Powertools' own rule, read from the environment as a Tracer reads it when built:
    off with ``POWERTOOLS_TRACE_DISABLED``, outside Lambda, under SAM local or Chalice."""
    return not Tracer._is_tracer_disabled()  # the rule Tracer applies itself


def traced(service: str) -> Callable[[Handler], Handler]:
    """``Tracer(service).capture_lambda_handler(capture_response=False)`` when tracing is on
    (its subsegment, ``ColdStart`` and ``Service`` annotations, patched clients: unchanged);
    the handler itself when off. A disabled Powertools Tracer still imports the X-Ray SDK and,
    through it, botocore's client machinery: a quarter of a cold start that traces nothing."""
    if not tracing_enabled():
        return lambda handler: handler
    tracer = Tracer(service=service)
    decorate: Callable[[Handler], Handler] = tracer.capture_lambda_handler(capture_response=False)
    return decorate
