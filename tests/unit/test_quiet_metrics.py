"""Disabled metrics keep nothing and print nothing, however many requests a process serves.

Powertools, with ``POWERTOOLS_METRICS_DISABLED``, skips each invocation's flush but keeps every
value, and prints the whole set once a metric holds 100 values: ``agent-wait local`` printed an EMF
document into its console every hundred questions.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_lambda_powertools.metrics import MetricUnit

from wait_service.observability import QuietWhenDisabledMetrics

# With nothing kept, Powertools' flush warns that there is nothing to publish.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


def _serve(metrics: QuietWhenDisabledMetrics, requests: int) -> None:
    @metrics.log_metrics
    def handler(event: Any, context: Any) -> None:
        metrics.add_metric(name="QuestionsAnswered", unit=MetricUnit.Count, value=1)

    for _ in range(requests):
        handler({}, None)


def test_disabled_metrics_keep_and_print_nothing_over_many_requests(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    metrics = QuietWhenDisabledMetrics(namespace="QuietTest", service="quiet")
    # Powertools' metric set is one per process, shared by every instance: other tests' values may
    # be in it.
    metrics.clear_metrics()
    try:
        _serve(metrics, 150)
        assert metrics.metric_set == {}
        assert capsys.readouterr().out == ""
    finally:
        metrics.clear_metrics()


def test_enabled_metrics_are_flushed_after_each_request(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    metrics = QuietWhenDisabledMetrics(namespace="QuietTest", service="quiet")
    metrics.clear_metrics()
    try:
        _serve(metrics, 3)
        documents = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [d["QuestionsAnswered"] for d in documents] == [[1.0], [1.0], [1.0]]
    finally:
        metrics.clear_metrics()
