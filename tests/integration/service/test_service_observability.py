"""The lazy tracer: the X-Ray SDK is loaded only when tracing is on, and only at the first traced call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from wait_service.observability import LazyTracer, tracing_enabled

IN_LAMBDA = {"LAMBDA_TASK_ROOT": "/var/task"}


class FakeTracer:
    """Records what the real Tracer would be asked to do."""

    def __init__(self) -> None:
        self.decorated: list[str] = []
        self.calls: list[str] = []
        self.annotations: dict[str, Any] = {}

    def _wrap(self, kind: str, function: Any) -> Any:
        self.decorated.append(f"{kind}:{function.__name__}")

        def traced(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(function.__name__)
            return function(*args, **kwargs)

        return traced

    def capture_method(self, method: Any) -> Any:
        return self._wrap("method", method)

    def capture_lambda_handler(self, handler: Any, **options: Any) -> Any:
        self.handler_options = options
        return self._wrap("handler", handler)

    def put_annotation(self, key: str, value: Any) -> None:
        self.annotations[key] = value

    def put_metadata(self, key: str, value: Any, namespace: str | None = None) -> None:
        self.annotations[f"{namespace}:{key}"] = value


def _lazy(environ: dict[str, str]) -> tuple[LazyTracer, list[FakeTracer]]:
    built: list[FakeTracer] = []

    def factory() -> Any:
        built.append(FakeTracer())
        return built[-1]

    return LazyTracer(environ=environ, factory=factory), built


def test_tracing_off_never_builds_the_tracer() -> None:
    off = ({}, IN_LAMBDA | {"POWERTOOLS_TRACE_DISABLED": "true"}, IN_LAMBDA | {"AWS_SAM_LOCAL": "1"})
    for environ in off:
        lazy, built = _lazy(environ)

        @lazy.capture_lambda_handler
        def handler(event: Any, context: Any) -> Any:
            return event

        assert handler({"a": 1}, None) == {"a": 1}
        lazy.put_annotation("k", "v")
        assert built == [] and not lazy.loaded


def test_tracing_on_builds_the_tracer_once_at_the_first_call_and_decorates_once() -> None:
    lazy, built = _lazy(IN_LAMBDA)

    class Service:
        @lazy.capture_method
        def run(self, x: int) -> int:
            return x + 1

    @lazy.capture_lambda_handler
    def handler(event: Any, context: Any) -> Any:
        return Service().run(event)

    assert built == []  # decorating imports nothing
    assert [handler(1, None), handler(2, None)] == [2, 3]
    assert len(built) == 1 and lazy.loaded
    assert built[0].decorated == ["handler:handler", "method:run"]
    assert built[0].handler_options == {"capture_response": False}
    assert built[0].calls == ["handler", "run", "handler", "run"]
    assert handler.__name__ == "handler"
    lazy.put_annotation("thread_id", "t-1")
    lazy.put_metadata("n", 2, namespace="ns")
    assert built[0].annotations == {"thread_id": "t-1", "ns:n": 2}


def test_tracing_enabled_follows_powertools_rules() -> None:
    assert tracing_enabled(IN_LAMBDA)
    assert not tracing_enabled({})
    assert not tracing_enabled(IN_LAMBDA | {"POWERTOOLS_TRACE_DISABLED": "1"})
    assert tracing_enabled(IN_LAMBDA | {"POWERTOOLS_TRACE_DISABLED": "false"})


def test_importing_the_observability_module_does_not_import_the_xray_sdk() -> None:
    code = "import sys, wait_service.observability; sys.exit('aws_xray_sdk' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_log_line_drops_what_every_line_of_its_log_group_shares_and_keeps_the_rest() -> None:
    # The log group is the function's: its name, ARN and memory size on every line are bytes
    # CloudWatch bills for nothing; the request id, cold start, level, location and extras stay.
    import io
    import json

    from aws_lambda_powertools import Logger
    from service_events import LambdaContext

    from wait_service.observability import LeanFormatter

    stream = io.StringIO()
    logger = Logger(service="lean-test", logger_formatter=LeanFormatter(), stream=stream)

    @logger.inject_lambda_context
    def handler(event: Any, context: Any) -> None:
        logger.info("resume enqueued", extra={"question_id": "q-1"})

    handler({}, LambdaContext())

    line = json.loads(stream.getvalue().splitlines()[-1])
    assert not {"function_name", "function_arn", "function_memory_size"} & set(line)
    assert line["function_request_id"] == LambdaContext.aws_request_id
    assert (line["level"], line["message"], line["question_id"], line["service"]) == (
        "INFO",
        "resume enqueued",
        "q-1",
        "lean-test",
    )
    assert "cold_start" in line and "location" in line and "timestamp" in line


TRACED_HANDLER = """
import json, os, socket, sys, uuid
daemon = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
daemon.bind(("127.0.0.1", 0))
os.environ["AWS_XRAY_DAEMON_ADDRESS"] = "%s:%d" % daemon.getsockname()
root, parent = uuid.uuid4().hex[:24], uuid.uuid4().hex[:16]
os.environ["_X_AMZN_TRACE_ID"] = "Root=1-5f000000-%s;Parent=%s;Sampled=1" % (root, parent)
from wait_service.observability import LazyTracer
tracer = LazyTracer()

@tracer.capture_lambda_handler
def handler(event, context):
    if event.get("fail"):
        raise ValueError("the failure is traced")
    return {"statusCode": 200, "body": json.dumps({"customer": "SECRET-CUSTOMER-17"})}

handler({}, None)
try:
    handler({"fail": True}, None)
except ValueError:
    pass
daemon.settimeout(5)
documents = []
while True:
    try:
        documents.append(daemon.recv(65535).decode())
    except socket.timeout:
        break
    daemon.settimeout(0.5)
print(json.dumps(documents))
"""


def test_a_traced_handler_sends_its_errors_but_never_its_response_to_x_ray() -> None:
    # A real Tracer, the X-Ray SDK sending to a local socket as to Lambda's daemon.
    environ = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("POWERTOOLS_TRACE", "AWS_XRAY"))},
        "LAMBDA_TASK_ROOT": "/var/task",
        "AWS_LAMBDA_FUNCTION_NAME": "agent-wait-test",
    }
    done = subprocess.run(
        [sys.executable, "-c", TRACED_HANDLER], capture_output=True, text=True, timeout=120, env=environ
    )
    assert done.returncode == 0, done.stderr[-2000:]
    documents = json.loads(done.stdout.strip().splitlines()[-1])
    sent = "\n".join(documents)
    assert documents, "the SDK sent nothing: the test would prove nothing"
    assert "the failure is traced" in sent
    assert "SECRET-CUSTOMER-17" not in sent
