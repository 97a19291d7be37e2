"""The AWS announcers through real boto3 over HTTP against the moto server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import pytest

from agent_wait import Envelope, approval
from agent_wait.aws import DynamoDbAnnounce, SnsAnnounce, SqsAnnounce
from agent_wait.aws.dynamodb import ledger_envelope
from agent_wait.errors import QuestionCollisionError
from agent_wait.testing import sample_envelope
from agent_wait.webhook import WebhookAnnounce, verify
from wait_service.ledger.attributes import from_item

if TYPE_CHECKING:
    from collections.abc import Iterator

    from wait_service.resources import LocalResources

pytestmark = pytest.mark.integration


def _drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while batch := sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        MessageAttributeNames=["All"],
        AttributeNames=["All"],
        WaitTimeSeconds=0,
    ).get("Messages"):
        messages += batch
        for message in batch:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return messages


def test_sns_standard_topic_reaches_a_subscribed_queue_with_attributes(
    resources: LocalResources, aws_client: Any
) -> None:
    """ "SnsAnnounce (standard topic; type, dedupe_key, thread_id as message attributes so subscribers
    can filter)"."""
    envelope = sample_envelope("q-sns", "thread-sns")
    assert SnsAnnounce(resources.topic_arn, client=aws_client("sns")).announce(envelope)

    [message] = _drain(aws_client("sqs"), resources.subscriber_url)
    assert Envelope.model_validate_json(message["Body"]) == envelope
    assert {k: v["StringValue"] for k, v in message["MessageAttributes"].items()} == {
        "type": "wait.created",
        "dedupe_key": "wait.created:q-sns",
        "thread_id": "thread-sns",
        # The keys of subscribers' filter policies (docs/events.md)
        "function": envelope.question["function"],  # type: ignore[index,call-overload]
        "status": "raised",
        "policy_kind": envelope.policy.kind,
    }


def test_sqs_fifo_three_publishes_of_one_question_give_one_message(
    resources: LocalResources, aws_client: Any
) -> None:
    """ "SQS FIFO (three publishes of one question give one message)"."""
    sqs = aws_client("sqs")
    announce = SqsAnnounce(resources.outbox_url, client=sqs)
    publishes = [sample_envelope("q-fifo", "thread-fifo") for _ in range(3)]
    assert all(announce.announce(envelope) for envelope in publishes)
    assert len({e.event_id for e in publishes}) == 3

    [message] = _drain(sqs, resources.outbox_url)
    assert Envelope.model_validate_json(message["Body"]) == publishes[0]
    assert message["Attributes"]["MessageDeduplicationId"] == "wait.created:q-fifo"
    assert message["Attributes"]["MessageGroupId"] == "thread-fifo"


def test_dynamodb_republish_keeps_status_created_at_and_lifecycle(
    resources: LocalResources, aws_client: Any
) -> None:
    """ "DynamoDbAnnounce (item key dedupe_key; a republish of the same question must not reset its
    status or created_at)"."""
    ddb = aws_client("dynamodb")
    announce = DynamoDbAnnounce(resources.ledger_table, client=ddb)
    first = sample_envelope("q-ddb", "thread-ddb")
    assert announce.announce(first)
    key = {"dedupe_key": {"S": first.dedupe_key}}

    # The receive path moves the question on; then a redelivered run republishes it.
    moved_at = "2026-11-30T10:05:00Z"
    ddb.update_item(
        TableName=resources.ledger_table,
        Key=key,
        UpdateExpression=(
            "SET #s = :s, lifecycle = list_append(if_not_exists(lifecycle, :empty), :stage), updated_at = :t"
        ),
        ConditionExpression="#s = :raised",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={
            ":s": {"S": "answered"},
            ":raised": {"S": "raised"},
            ":t": {"S": moved_at},
            ":empty": {"L": []},
            ":stage": {
                "L": [{"M": {"stage": {"S": "answered"}, "at": {"S": moved_at}, "actor": {"S": "ops"}}}]
            },
        },
    )
    later = sample_envelope("q-ddb", "thread-ddb").model_copy(
        update={"created_at": first.created_at.replace(hour=11), "event_id": "01JLATERLATERLATERLATERLAT"}
    )
    assert announce.announce(later)

    item = ddb.get_item(TableName=resources.ledger_table, Key=key, ConsistentRead=True)["Item"]
    assert item["status"] == {"S": "answered"}
    assert item["created_at"] == {"S": "2026-11-30T10:00:00Z"}
    assert item["updated_at"] == {"S": moved_at}
    # (the raise is not stored: it is created_at and the agent)
    assert [s["M"]["stage"]["S"] for s in item["lifecycle"]["L"]] == ["answered"]
    # The first publish's envelope stands (rebuilt from the item: it holds no envelope JSON).
    assert "envelope" not in item
    assert ledger_envelope(from_item(item)) == first
    assert item["kind"] == {"S": "question"}

    # The sparse indexes see the question item.
    by_thread = ddb.query(
        TableName=resources.ledger_table,
        IndexName="by-thread",
        KeyConditionExpression="thread_id = :t",
        ExpressionAttributeValues={":t": {"S": "thread-ddb"}},
    )["Items"]
    assert [i["dedupe_key"]["S"] for i in by_thread] == [first.dedupe_key]


def test_dynamodb_republish_with_another_digest_keeps_the_first_item_entirely(
    resources: LocalResources, aws_client: Any
) -> None:
    """A publish under a taken id with a different digest touches nothing (digest, question, policy,
    envelope and expires_at all stay the first publish's) and is reported as a collision."""
    ddb = aws_client("dynamodb")
    announce = DynamoDbAnnounce(resources.ledger_table, client=ddb)
    first = sample_envelope("q-digest", "thread-digest", policy=approval(ttl=60))
    assert announce.announce(first)
    key = {"dedupe_key": {"S": first.dedupe_key}}
    stored = ddb.get_item(TableName=resources.ledger_table, Key=key, ConsistentRead=True)["Item"]

    changed = sample_envelope(
        "q-digest",
        "thread-digest",
        question={"function": "issue_refund", "args": {"customer": "c-17", "amount": 99}},
        policy=approval(ttl=3600),
    ).model_copy(update={"created_at": first.created_at.replace(hour=11)})
    assert changed.digest != first.digest and changed.expires_at != first.expires_at
    with pytest.raises(QuestionCollisionError) as collided:
        announce.deliver(changed)
    assert collided.value.stored_digest == first.digest

    item = ddb.get_item(TableName=resources.ledger_table, Key=key, ConsistentRead=True)["Item"]
    assert item == stored
    assert item["digest"] == {"S": first.digest}
    assert ledger_envelope(from_item(item)) == first


class _Receiver(BaseHTTPRequestHandler):
    statuses: list[int] = []
    received: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((dict(self.headers.items()), body))
        self.send_response(type(self).statuses.pop(0) if type(self).statuses else 204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    handler = type("Receiver", (_Receiver,), {"statuses": [], "received": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_webhook_default_opener_posts_signed_and_retries_a_5xx(receiver: tuple[str, type[_Receiver]]) -> None:
    url, handler = receiver
    handler.statuses = [503]
    sleeps: list[float] = []
    envelope = sample_envelope("q-hook")

    assert WebhookAnnounce(url, "s3cret", sleep=sleeps.append).announce(envelope)

    assert sleeps == [1.0]
    assert len(handler.received) == 2
    headers, body = handler.received[-1]
    assert json.loads(body)["dedupe_key"] == "wait.created:q-hook"
    assert headers["X-Wait-Dedupe-Key"] == "wait.created:q-hook"
    stamp, signature = headers["X-Wait-Request-Timestamp"], headers["X-Wait-Signature"]
    assert verify("s3cret", stamp, signature, "POST", "/hook", body)
