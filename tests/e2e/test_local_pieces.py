"""The local stack's pieces against real servers on loopback, with toy handlers.

The poller against moto server proves the event source mapping's queue semantics without the
receive path: a failed message stays for the queue's visibility timeout, and after
``maxReceiveCount`` receives the queue (moto, as AWS) moves it to the DLQ on its own.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from agent_wait_cli.local.gateway import Gateway
from agent_wait_cli.local.poller import InboxPoller
from agent_wait_cli.local.stack import LocalStack, StackConfig
from wait_service.resources import API_TIMEOUT_SECONDS, RUNNER_TIMEOUT_SECONDS, QueueSpec, create_queue
from wait_service.settings import DEFAULT_GRAPH

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def _fifo_with_dlq(sqs: Any, visibility: int, max_receives: int) -> tuple[str, str, str]:
    name = f"poller-{uuid.uuid4().hex[:8]}"
    spec = QueueSpec(
        logical_id="Poller",
        name=f"{name}.fifo",
        dlq_name=f"{name}-dlq.fifo",
        max_receive_count=max_receives,
        visibility_timeout=visibility,
    )
    return create_queue(sqs, spec, prefix="")


def _send(sqs: Any, url: str, thread_id: str, n: int = 1) -> None:
    for i in range(n):
        sqs.send_message(
            QueueUrl=url,
            MessageBody=json.dumps({"thread_id": thread_id, "input": {"i": i}}),
            MessageGroupId=thread_id,
            MessageDeduplicationId=f"{thread_id}-{i}",
        )


def test_failing_message_goes_to_the_dlq_after_max_receives(aws_client: Any) -> None:
    sqs = aws_client("sqs")
    # Visibility 0: a failed message is visible again at once, so each poll is one receive.
    url, arn, dlq_url = _fifo_with_dlq(sqs, visibility=0, max_receives=3)
    _send(sqs, url, "t-poison")
    calls: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        calls.extend(r["attributes"]["ApproximateReceiveCount"] for r in event["Records"])
        return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]]}

    poller = InboxPoller(sqs, url, arn, "us-east-1", handler)
    outcomes = [poller.poll_once() for _ in range(4)]

    assert calls == ["1", "2", "3"]
    assert [o is not None for o in outcomes] == [True, True, True, False]
    dead = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10).get("Messages", [])
    assert [json.loads(m["Body"])["thread_id"] for m in dead] == ["t-poison"]


def test_failed_message_waits_for_the_visibility_timeout_and_successes_are_deleted(aws_client: Any) -> None:
    sqs = aws_client("sqs")
    url, arn, _ = _fifo_with_dlq(sqs, visibility=720, max_receives=5)
    _send(sqs, url, "t-a")
    _send(sqs, url, "t-b")

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        failed = [r["messageId"] for r in event["Records"] if json.loads(r["body"])["thread_id"] == "t-a"]
        return {"batchItemFailures": [{"itemIdentifier": m} for m in failed]}

    poller = InboxPoller(sqs, url, arn, "us-east-1", handler)
    first = poller.poll_once()
    second = poller.poll_once()

    assert first is not None and len(first.messages) == 2
    assert [json.loads(m["Body"])["thread_id"] for m in first.failed_messages()] == ["t-a"]
    assert second is None  # t-a is hidden for 720 s; t-b was deleted
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (
        attributes["ApproximateNumberOfMessages"],
        attributes["ApproximateNumberOfMessagesNotVisible"],
    ) == (
        "0",
        "1",
    )


def test_gateway_serves_a_handler_over_loopback_http() -> None:
    seen: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.append(event)
        return {
            "statusCode": 202,
            "headers": {"Content-Type": "application/json", "ETag": '"d1"'},
            "body": json.dumps({"path": event["path"], "body": json.loads(event["body"])}),
        }

    gateway = Gateway(handler, port=0)
    gateway.start()
    try:
        request = urllib.request.Request(
            f"{gateway.url}/questions/q-1/reply?x=1",
            data=b'{"answer": {"action": "approve"}}',
            method="POST",
            headers={"X-Wait-Principal": "erin", "If-Match": '"d1"', "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            status, etag, body = response.status, response.headers["ETag"], json.loads(response.read())
    finally:
        gateway.stop()

    assert (status, etag) == (202, '"d1"')
    assert body == {"path": "/questions/q-1/reply", "body": {"answer": {"action": "approve"}}}
    event = seen[0]
    assert event["headers"]["If-Match"] == '"d1"'
    assert event["queryStringParameters"] == {"x": "1"}
    assert event["requestContext"]["identity"]["userArn"] == "erin"
    assert event["requestContext"]["identity"]["sourceIp"] == "127.0.0.1"


@pytest.mark.parametrize("length", ["abc", "-1", "12, 13"])
def test_a_malformed_content_length_is_400_not_a_closed_connection(length: str) -> None:
    import socket

    seen: list[dict[str, Any]] = []
    gateway = Gateway(lambda event, context: seen.append(event) or {"statusCode": 200, "body": "{}"}, port=0)
    gateway.start()
    try:
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as conn:
            conn.sendall(
                f"POST /threads/t-1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {length}\r\n\r\n{{}}".encode()
            )
            received = b""
            while chunk := conn.recv(65536):
                received += chunk
    finally:
        gateway.stop()

    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), received
    assert json.loads(body) | {"message": ""} == {
        "error": "invalid_request",
        "message": "",
        "field": "Content-Length",
    }
    assert seen == []


def test_local_stack_gives_the_handlers_the_deployed_timeouts_and_graph() -> None:
    seen: dict[str, Any] = {}
    ran = threading.Event()

    def api(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen["api"] = context
        return {"statusCode": 200, "body": "{}"}

    def runner(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen["runner"] = context
        ran.set()
        return {"batchItemFailures": []}

    # (moto keeps its state per process: a prefix of its own)
    config = StackConfig(project=ROOT, port=0, prefix=f"p{uuid.uuid4().hex[:6]}-")
    with LocalStack(config, api_handler=api, runner_handler=runner) as stack:
        with urllib.request.urlopen(f"{stack.api_url}/threads/t-1", timeout=10) as response:
            assert response.status == 200
        _send(stack.client("sqs"), stack.resources.inbox_url, "t-1")
        assert ran.wait(timeout=60), "the poller never handed the inbox message to the runner"
        graph = os.environ["AGENT_WAIT_GRAPH"]

    assert (seen["api"].function_name, seen["api"].timeout_seconds) == ("agent-wait-api", API_TIMEOUT_SECONDS)
    assert (seen["runner"].timeout_seconds, graph) == (RUNNER_TIMEOUT_SECONDS, DEFAULT_GRAPH)


def test_a_failing_runner_prints_one_line_per_retry_and_dlq_move_and_logs_its_traceback(
    tmp_path: Path,
) -> None:
    # Given a local stack whose inbox hides a failed message for 0 s, logging to a file
    lines: list[str] = []
    log_path = tmp_path / "local.log"
    dead = threading.Event()

    def write(line: str) -> None:
        lines.append(line)
        if " dead-lettered " in line:
            dead.set()

    def api(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"statusCode": 200, "body": "{}"}

    def runner(event: dict[str, Any], context: Any) -> dict[str, Any]:
        raise ConnectionError("the ledger did not answer\nsecond line of the message")

    # (moto keeps its state per process: a prefix of its own)
    prefix = f"p{uuid.uuid4().hex[:6]}-"
    config = StackConfig(project=ROOT, port=0, prefix=prefix, inbox_visibility=0, log_path=log_path)
    with LocalStack(config, write=write, api_handler=api, runner_handler=runner) as stack:
        sqs = stack.client("sqs")
        attributes = sqs.get_queue_attributes(QueueUrl=stack.resources.inbox_url, AttributeNames=["All"])
        assert attributes["Attributes"]["VisibilityTimeout"] == "0"
        # When a run fails on every receive
        _send(sqs, stack.resources.inbox_url, "t-poison")
        assert dead.wait(timeout=60), "\n".join(lines)
        # (the queue moves it on the poller's next receive)
        dlq: list[Any] = []
        for _ in range(300):
            dlq = sqs.receive_message(QueueUrl=stack.resources.inbox_dlq_url, WaitTimeSeconds=0).get(
                "Messages", []
            )
            if dlq:
                break
            threading.Event().wait(0.1)

    # Then one line per receive: four retries, then the DLQ move, each naming the runner
    runner_lines = [line[10:25].strip() for line in lines if "thread=t-poison" in line]
    assert runner_lines == ["run started", "retrying"] + ["run started", "retrying"] * 3 + [
        "run started",
        "dead-lettered",
    ]
    assert all(line.endswith("function=agent-wait-runner") for line in lines)
    assert [json.loads(m["Body"])["thread_id"] for m in dlq] == ["t-poison"]
    # and the traceback is in the log file, not in the event lines
    assert not any("Traceback" in line for line in lines)
    logged = log_path.read_text()
    assert "Traceback (most recent call last)" in logged and "second line of the message" in logged


def test_moto_server_fails_the_requests_a_fault_rule_picks(aws_client: Any) -> None:
    from botocore.config import Config
    from botocore.exceptions import ClientError

    from agent_wait_cli.local.moto_server import Fault, SerializedMotoServer

    with SerializedMotoServer(log_requests=False) as server:
        import boto3

        sqs = boto3.client(
            "sqs",
            endpoint_url=server.endpoint,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
            config=Config(retries={"max_attempts": 1, "mode": "standard"}),
        )
        url = sqs.create_queue(QueueName=f"faults-{uuid.uuid4().hex[:6]}")["QueueUrl"]
        server.inject(
            lambda environ, body: (
                Fault(
                    500, b'{"__type": "InternalError", "message": "injected"}', "application/x-amz-json-1.0"
                )
                if environ.get("HTTP_X_AMZ_TARGET", "").endswith("SendMessage")
                else None
            )
        )
        with pytest.raises(ClientError) as failed:
            sqs.send_message(QueueUrl=url, MessageBody="x")
        assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
        # Other requests are served, and with the rule removed the same request succeeds.
        assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
        server.inject(None)
        assert sqs.send_message(QueueUrl=url, MessageBody="x")["MessageId"]
