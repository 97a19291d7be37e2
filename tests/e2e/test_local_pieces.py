"""The local stack's pieces against real servers on loopback, with toy handlers.

The poller against moto server proves the event source mapping's queue semantics without the
receive path: a failed message stays for the queue's visibility timeout, and after
``maxReceiveCount`` receives the queue (moto, as AWS) moves it to the DLQ on its own.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from typing import Any

import pytest

from agent_wait.local.gateway import Gateway
from agent_wait.local.poller import InboxPoller

pytestmark = pytest.mark.e2e


def _fifo_with_dlq(sqs: Any, visibility: int, max_receives: int) -> tuple[str, str, str]:
    name = f"poller-{uuid.uuid4().hex[:8]}"
    dlq_url = sqs.create_queue(QueueName=f"{name}-dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    url = sqs.create_queue(
        QueueName=f"{name}.fifo",
        Attributes={
            "FifoQueue": "true",
            "VisibilityTimeout": str(visibility),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receives}),
        },
    )["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn, dlq_url


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
    assert [json.loads(m["Body"])["thread_id"] for m in first.failed] == ["t-a"]
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
