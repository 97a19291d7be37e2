"""One side of the reply-throughput figure, in a process of its own: ``python -m bench.reply_worker``.

``--side ours`` imports the api Lambda's real module (``functions/api/handler.py``) and calls its
``handler``: Powertools' logger context injection, the lazy tracer's ``capture_lambda_handler`` and
``log_metrics`` with its flush, around the api built from the environment by the module's own init.
``--side bare`` is the bare Powertools resolver of ``bench.baseline.bare_api`` behind the same three
wrappers (a plain ``Logger``, ``Tracer`` and ``Metrics``), making the same AWS calls.

Lambda's environment is reproduced where it changes the work done: ``LAMBDA_TASK_ROOT`` set (so
tracing is on unless ``--tracing off`` sets ``POWERTOOLS_TRACE_DISABLED``), ``LOG_LEVEL`` as
deployed, and before each invocation a new ``_X_AMZN_TRACE_ID`` with ``Sampled=1``, as the Lambda
runtime sets it for a sampled request. The X-Ray SDK then works as in Lambda: a facade segment per
invocation, a subsegment for the handler and one per boto3 call (Powertools patches botocore), each
sent as UDP to ``AWS_XRAY_DAEMON_ADDRESS`` -- here a socket this process binds and never reads, in
place of Lambda's daemon. (Setting the SDK's context-missing strategy to ignore instead would skip
the segments altogether and flatter both sides.) Every invocation is sampled: this is the per-call
cost of a traced request; unsampled ones cost less.

AWS is answered at botocore's ``before-send`` (``bench.figures.StubEndpoint``): everything a boto3
call does up to the network runs. Log lines and the metrics' EMF documents go to ``/dev/null``
instead of the runtime's pipe, on both sides.

Protocol (one line each way): the parent writes a number of replies, the worker answers the CPU
seconds (this thread's) they took; ``calls`` answers the AWS calls one reply makes (JSON);
``segments`` the X-Ray documents the daemon's socket received since the last ask; an empty line
ends it.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class LambdaContext:
    """What Powertools reads of Lambda's context object."""

    function_name: str = "agent-wait-api"
    function_version: str = "$LATEST"
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:agent-wait-api"
    memory_limit_in_mb: int = 512
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"
    log_group_name: str = "/aws/lambda/agent-wait-api"
    log_stream_name: str = "bench"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 29_000


def trace_header() -> str:
    """A new sampled trace header, as Lambda's runtime sets ``_X_AMZN_TRACE_ID`` per invocation."""
    root = f"1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]}"
    return f"Root={root};Parent={uuid.uuid4().hex[:16]};Sampled=1"


def lambda_environment(tracing: bool, daemon: str) -> dict[str, str]:
    from infra.constants import LOG_LEVEL

    env = {
        "LAMBDA_TASK_ROOT": str(ROOT / "functions" / "api"),
        "AWS_LAMBDA_FUNCTION_NAME": "agent-wait-api",
        "AWS_XRAY_DAEMON_ADDRESS": daemon,
        "LOG_LEVEL": LOG_LEVEL,
        "POWERTOOLS_SERVICE_NAME": "agent-wait-bench",
        "POWERTOOLS_METRICS_NAMESPACE": "AgentWaitBench",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AGENT_WAIT_LEDGER_TABLE": "bench-ledger",
        "AGENT_WAIT_INBOX_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/bench-inbox.fifo",
    }
    if not tracing:
        env["POWERTOOLS_TRACE_DISABLED"] = "true"
    return env


def _question() -> tuple[dict[str, Any], dict[str, Any]]:
    """The question item as the ledger stores it, and a reply event for it."""
    from agent_wait.aws import DynamoDbAnnounce
    from bench.figures import StubAws, _envelope

    envelope = _envelope()
    memory = StubAws({})
    DynamoDbAnnounce("bench-ledger", client=memory).deliver(envelope)
    template = (ROOT / "tests" / "events" / "reply.json").read_text()
    event = json.loads(
        template.replace("QUESTION_ID", envelope.question_id).replace("DIGEST", envelope.digest)
    )
    return memory.item, event


def _ours() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench_api_handler", ROOT / "functions" / "api" / "handler.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


def _bare() -> Any:
    import boto3
    from aws_lambda_powertools import Logger, Metrics, Tracer
    from aws_lambda_powertools.logging import correlation_paths

    from bench.baseline.bare_api import build_app

    app = build_app(
        boto3.client("dynamodb"),
        boto3.client("sqs"),
        table=os.environ["AGENT_WAIT_LEDGER_TABLE"],
        queue_url=os.environ["AGENT_WAIT_INBOX_URL"],
    )
    logger, tracer, metrics = Logger(), Tracer(), Metrics()

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
    @tracer.capture_lambda_handler
    @metrics.log_metrics
    def handler(event: dict[str, Any], context: Any) -> Any:
        return app.resolve(event, context)

    return handler


def _drain(daemon: socket.socket) -> int:
    """X-Ray documents waiting on the daemon's socket (read and counted; each datagram has a header
    line, then one segment or subsegment)."""
    daemon.setblocking(False)
    count = 0
    try:
        while True:
            daemon.recv(65535)
            count += 1
    except BlockingIOError:
        pass
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reply_worker")
    parser.add_argument("--side", choices=("ours", "bare"), required=True)
    parser.add_argument("--tracing", choices=("on", "off"), default="on")
    args = parser.parse_args(argv)

    # Lambda's X-Ray daemon: a UDP socket nobody reads (datagrams beyond its buffer are dropped).
    daemon = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    daemon.bind(("127.0.0.1", 0))
    host, port = daemon.getsockname()
    os.environ.update(lambda_environment(args.tracing == "on", f"{host}:{port}"))
    # The protocol keeps the real stdout; logs and metrics (printed to sys.stdout) go to /dev/null.
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the process's life

    import boto3

    from bench.figures import StubEndpoint

    item, event = _question()
    boto3.setup_default_session()
    session = boto3.DEFAULT_SESSION
    assert session is not None
    stub = StubEndpoint(item)
    session.events.register("before-send", stub.answer)
    calls: Counter[str] = Counter()
    session.events.register(
        "before-call", lambda model, **_: calls.update([f"{model.service_model.service_name}.{model.name}"])
    )
    handler = _ours() if args.side == "ours" else _bare()
    context = LambdaContext()

    def invoke(count: int) -> float:
        events = [json.loads(json.dumps(event)) for _ in range(count)]
        headers = [trace_header() for _ in range(count)]
        started = time.thread_time()
        for e, header in zip(events, headers, strict=True):
            os.environ["_X_AMZN_TRACE_ID"] = header
            response = handler(e, context)
            if response["statusCode"] != 202:
                raise RuntimeError(
                    f"the {args.side} reply answered {response['statusCode']}: {response['body']}"
                )
        return time.thread_time() - started

    invoke(20)  # warm: the first invocation builds the tracer; caches fill
    calls.clear()
    invoke(1)
    one_reply = dict(calls)
    for line in sys.stdin:
        command = line.strip()
        if not command:
            break
        if command == "calls":
            protocol.write(json.dumps(one_reply, sort_keys=True) + "\n")
        elif command == "segments":
            protocol.write(f"{_drain(daemon)}\n")
        else:
            protocol.write(f"{invoke(int(command))!r}\n")
    daemon.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
