"""The metrics sink collects for EMF only where metrics go somewhere: disabled (as `openagents
dev` sets it), a count is dropped, so nothing is printed and nothing piles up (issue 25)."""

from __future__ import annotations

import pytest
from aws_lambda_powertools import Metrics
from openagents.observability import PowertoolsMetricsSink


def test_counts_are_collected_for_emf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    metrics = Metrics(namespace="Test", service="sink-on")
    metrics.clear_metrics()
    PowertoolsMetricsSink(metrics).count("Things", 2)
    assert metrics.metric_set["Things"]["Value"] == [2.0]
    metrics.clear_metrics()


def test_disabled_metrics_are_not_collected(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    metrics = Metrics(namespace="Test", service="sink-off")
    metrics.clear_metrics()
    sink = PowertoolsMetricsSink(metrics)
    for _ in range(150):  # past Powertools' 100-value flush, which prints even when disabled
        sink.count("Things")
    assert metrics.metric_set == {}
    assert capsys.readouterr().out == ""
