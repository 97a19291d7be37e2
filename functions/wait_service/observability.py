"""Logger, Tracer and Metrics, created once per process and shared by both Lambdas.

Powertools reads ``POWERTOOLS_SERVICE_NAME``, ``POWERTOOLS_METRICS_NAMESPACE`` and ``LOG_LEVEL``
itself; creating the objects here once keeps one set of keys and one metrics buffer per process.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
tracer = Tracer()
metrics = Metrics()

__all__ = ["logger", "metrics", "tracer"]
