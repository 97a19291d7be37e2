"""Logger, Tracer and Metrics, created once per process and shared by both Lambdas.

Powertools reads ``POWERTOOLS_SERVICE_NAME``, ``POWERTOOLS_METRICS_NAMESPACE`` and ``LOG_LEVEL``
itself; creating the objects here once keeps one set of keys and one metrics buffer per process.

``tracer`` is a :class:`LazyTracer`: Powertools' ``Tracer()`` imports the X-Ray SDK, which builds a
recorder and its botocore clients at import, even when tracing is off. The lazy one decides at the
first traced call: with tracing disabled (``POWERTOOLS_TRACE_DISABLED``, or outside Lambda) the SDK
is never imported; otherwise the real ``Tracer`` is built then, once, and every decorated function
goes through it from that call on. Lambda's active tracing (the function's own segments) needs no SDK
at all.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from aws_lambda_powertools import Tracer
    from aws_lambda_powertools.metrics import MetricResolution, MetricUnit

F = TypeVar("F", bound="Callable[..., Any]")

_TRUTHY = {"1", "true", "yes", "on", "y", "t"}


def tracing_enabled(environ: Mapping[str, str]) -> bool:
    """Whether Powertools would trace in this environment (same rules as ``Tracer``).

    Examples
    --------
    >>> tracing_enabled({"LAMBDA_TASK_ROOT": "/var/task"})
    True
    >>> tracing_enabled({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "true"})
    False
    >>> tracing_enabled({})  # outside Lambda
    False
    """
    if environ.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower() in _TRUTHY:
        return False
    if not environ.get("LAMBDA_TASK_ROOT"):
        return False
    return not (environ.get("AWS_SAM_LOCAL") or environ.get("AWS_CHALICE_CLI_MODE"))


class LazyTracer:
    """Powertools' ``Tracer`` decorators, with the X-Ray SDK imported only when tracing is on.

    Parameters
    ----------
    environ:
        Read at the first traced call (``os.environ`` by default).
    factory:
        Builds the real tracer; injected by tests.

    Examples
    --------
    >>> lazy = LazyTracer(environ={})
    >>> @lazy.capture_method
    ... def double(x):
    ...     return 2 * x
    >>> double(21), lazy.loaded
    (42, False)
    """

    def __init__(
        self,
        *,
        environ: Mapping[str, str] | None = None,
        factory: Callable[[], Tracer] | None = None,
    ) -> None:
        self._environ = environ
        self._factory = factory
        self._decided = False
        self._tracer: Tracer | None = None

    @property
    def loaded(self) -> bool:
        """Whether the real tracer (and so the X-Ray SDK) has been built."""
        return self._tracer is not None

    def real(self) -> Tracer | None:
        """The real tracer if tracing is on (built at the first call), else ``None``."""
        if not self._decided:
            environ = os.environ if self._environ is None else self._environ
            if tracing_enabled(environ):
                if self._factory is not None:
                    self._tracer = self._factory()
                else:
                    from aws_lambda_powertools import Tracer

                    self._tracer = Tracer()
            self._decided = True
        return self._tracer

    def _lazily(self, function: F, decorate: Callable[[Tracer, F], Callable[..., Any]]) -> F:
        traced: list[Callable[..., Any]] = []

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            tracer = self.real()
            if tracer is None:
                return function(*args, **kwargs)
            if not traced:
                traced.append(decorate(tracer, function))
            return traced[0](*args, **kwargs)

        return call  # type: ignore[return-value]

    def capture_lambda_handler(self, handler: F) -> F:
        """``Tracer.capture_lambda_handler``, applied at the first invocation when tracing is on.

        The handler's response is not copied into the trace (``capture_response=False``): an api
        response holds people's data (a question's proposal, an answer), which a trace would keep
        for 30 days for anyone who may read traces; serializing it also cost every traced
        invocation. An error still is (``capture_error``): its type and message are what a trace
        is read for.
        """
        return self._lazily(
            handler, lambda tracer, f: tracer.capture_lambda_handler(f, capture_response=False)
        )

    def capture_method(self, method: F) -> F:
        """``Tracer.capture_method``, applied at the first call when tracing is on."""
        return self._lazily(method, lambda tracer, f: tracer.capture_method(f))

    def put_annotation(self, key: str, value: Any) -> None:
        tracer = self.real()
        if tracer is not None:
            tracer.put_annotation(key=key, value=value)

    def put_metadata(self, key: str, value: Any, namespace: str | None = None) -> None:
        tracer = self.real()
        if tracer is not None:
            tracer.put_metadata(key=key, value=value, namespace=namespace)


# Keys Powertools' Lambda context puts on every line that are the same for every line of a log
# group (one function's): its name is the group's, its ARN and memory size are the function's
# configuration, and Lambda's REPORT line gives the memory at each invocation's end. Each line keeps
# its level, location, message, time, service, cold start, request and correlation ids and extras.
SAME_ON_EVERY_LINE = ("function_arn", "function_memory_size", "function_name")


class LeanFormatter(LambdaPowertoolsFormatter):
    """Powertools' JSON lines without the keys every line of a function's log group shares.

    Examples
    --------
    >>> import json, logging
    >>> formatter = LeanFormatter()
    >>> formatter.append_keys(function_name="agent-wait-api", function_request_id="r-1")
    >>> line = json.loads(formatter.format(logging.makeLogRecord({"msg": "hi", "levelname": "INFO"})))
    >>> "function_name" in line, line["function_request_id"], line["message"]
    (False, 'r-1', 'hi')
    """

    def serialize(self, log: Any) -> str:
        for key in SAME_ON_EVERY_LINE:
            log.pop(key, None)
        return super().serialize(log)


class QuietWhenDisabledMetrics(Metrics):
    """Powertools' metrics, keeping nothing while metrics are disabled.

    With ``POWERTOOLS_METRICS_DISABLED`` set (the local stack sets it: its console shows event lines,
    not EMF documents), Powertools skips the flush at the end of each invocation but keeps every
    value it is given, and once a metric holds 100 values it prints the whole set anyway. A process
    that serves many requests (``agent-wait local``) would keep them all and print a document every
    hundred. Here a value is not even kept while metrics are disabled.

    Examples
    --------
    >>> import os
    >>> from unittest import mock
    >>> quiet = QuietWhenDisabledMetrics(namespace="Example")
    >>> with mock.patch.dict(os.environ, {"POWERTOOLS_METRICS_DISABLED": "true"}):
    ...     before = dict(quiet.metric_set)  # the process's one set, whatever it holds
    ...     quiet.add_metric(name="Replies", unit="Count", value=1)
    ...     quiet.metric_set == before
    True
    """

    # Powertools keeps one metric set per process and updates it without a lock; the dispatcher's
    # consumers write their batch's work at once, each adding its metrics from its own thread.
    _adding = threading.Lock()

    def add_metric(
        self,
        name: str,
        unit: MetricUnit | str,
        value: float,
        resolution: MetricResolution | int = 60,
    ) -> None:
        if is_metrics_disabled():
            return
        with self._adding:
            super().add_metric(name=name, unit=unit, value=value, resolution=resolution)


logger = Logger(logger_formatter=LeanFormatter())
tracer = LazyTracer()
metrics = QuietWhenDisabledMetrics()

__all__ = ["LazyTracer", "QuietWhenDisabledMetrics", "logger", "metrics", "tracer", "tracing_enabled"]
