"""Metrics adapter over Powertools (EMF on AWS; the same JSON on one machine)."""

from __future__ import annotations

from aws_lambda_powertools import Metrics as PowertoolsMetrics
from aws_lambda_powertools.metrics import MetricUnit

NAMESPACE = "OpenAgents"


class PowertoolsMetricsSink:
    def __init__(self, metrics: PowertoolsMetrics) -> None:
        self._metrics = metrics

    def count(self, name: str, value: int = 1) -> None:
        self._metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
