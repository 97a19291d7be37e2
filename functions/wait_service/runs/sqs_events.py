"""Lambda SQS events built from ``ReceiveMessage`` results, and a one-batch consumer.

Lambda's event source mapping receives messages, hands them to the function as one SQS event
and deletes those not named in ``batchItemFailures``. Tests and the local stack's poller
(``agent_wait_cli.local.poller``) do the same with these helpers, so the runner handler sees exactly
the event shape, and the queue exactly the deletes, it gets on AWS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

Handler = Callable[[dict[str, Any], Any], Any]
MAX_BATCH = 10


def sqs_record(message: Mapping[str, Any], *, queue_arn: str, region: str) -> dict[str, Any]:
    """One Lambda SQS record from one message as ``ReceiveMessage`` returns it.

    Examples
    --------
    >>> message = {"MessageId": "m", "ReceiptHandle": "h", "Body": "{}"}
    >>> r = sqs_record(message, queue_arn="arn", region="us-east-1")
    >>> (r["messageId"], r["eventSource"], r["attributes"])
    ('m', 'aws:sqs', {})
    """
    message_attributes = {
        name: {
            "stringValue": attr.get("StringValue"),
            "binaryValue": attr.get("BinaryValue"),
            "stringListValues": list(attr.get("StringListValues") or []),
            "binaryListValues": list(attr.get("BinaryListValues") or []),
            "dataType": attr.get("DataType", "String"),
        }
        for name, attr in (message.get("MessageAttributes") or {}).items()
    }
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": {key: str(value) for key, value in (message.get("Attributes") or {}).items()},
        "messageAttributes": message_attributes,
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


def sqs_event(messages: Sequence[Mapping[str, Any]], *, queue_arn: str, region: str) -> dict[str, Any]:
    """The Lambda SQS event (``{"Records": [...]}``) for a batch of received messages.

    Receive with ``AttributeNames=["All"]`` so that FIFO attributes (``MessageGroupId``,
    ``ApproximateReceiveCount``, ...) reach the handler as they do on AWS.

    Examples
    --------
    >>> sqs_event([], queue_arn="arn:aws:sqs:us-east-1:1:inbox.fifo", region="us-east-1")
    {'Records': []}
    """
    return {"Records": [sqs_record(m, queue_arn=queue_arn, region=region) for m in messages]}


def failed_ids(response: Any, message_ids: Sequence[str]) -> set[str]:
    """Message ids a handler's response reports as failed, read as Lambda reads ``batchItemFailures``.

    A response that is not a mapping, or has no ``batchItemFailures``, means the whole batch
    succeeded. An entry whose ``itemIdentifier`` is missing, empty or not one of ``message_ids``
    fails the whole batch: Lambda cannot tell which message it meant, so it deletes none.

    Examples
    --------
    >>> sorted(failed_ids({"batchItemFailures": [{"itemIdentifier": "b"}]}, ["a", "b"]))
    ['b']
    >>> sorted(failed_ids({"batchItemFailures": [{"itemIdentifier": "zzz"}]}, ["a", "b"]))
    ['a', 'b']
    >>> failed_ids(None, ["a"])
    set()
    """
    if not isinstance(response, Mapping):
        return set()
    known = set(message_ids)
    result: set[str] = set()
    for failure in response.get("batchItemFailures") or []:
        identifier = failure.get("itemIdentifier") if isinstance(failure, Mapping) else None
        if not identifier or identifier not in known:
            return known
        result.add(str(identifier))
    return result


@dataclass
class BatchResult:
    """What one :func:`consume_batch` call did: the messages received and how each ended."""

    messages: list[MessageTypeDef] = field(default_factory=list)
    succeeded: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    response: Any = None
    error: Exception | None = None

    @property
    def received(self) -> int:
        return len(self.messages)

    def succeeded_messages(self) -> list[MessageTypeDef]:
        """The received messages that were deleted, in receive order."""
        done = set(self.succeeded)
        return [m for m in self.messages if m["MessageId"] in done]

    def failed_messages(self) -> list[MessageTypeDef]:
        """The received messages left in the queue, in receive order."""
        bad = set(self.failed)
        return [m for m in self.messages if m["MessageId"] in bad]


def consume_batch(
    client: SQSClient,
    queue_url: str,
    handler: Handler,
    context: Any,
    *,
    queue_arn: str | None = None,
    region: str | None = None,
    max_messages: int = MAX_BATCH,
    release_failed: bool = False,
    on_receive: Callable[[list[MessageTypeDef]], None] | None = None,
) -> BatchResult:
    """Receive one batch, invoke ``handler(event, context)``, delete the records that succeeded.

    This is the one emulation of Lambda's SQS event source mapping (the local poller runs it in a
    loop): a short-poll receive with the queue's own visibility timeout, one SQS event per batch,
    a handler that raises or a ``batchItemFailures`` entry naming no received message fails the
    whole batch (see :func:`failed_ids`), and the rest is deleted. Moving a message to the DLQ
    after ``maxReceiveCount`` receives is the queue's job, not the consumer's.

    Parameters
    ----------
    client, queue_url:
        The queue to consume, through a boto3 SQS client.
    handler, context:
        The Lambda handler and the context object to pass it.
    queue_arn, region:
        Put into each record; looked up from the queue / client when omitted.
    max_messages:
        Batch size, at most 10 as for the event source mapping.
    release_failed:
        Make failed messages visible again at once instead of after the visibility timeout
        (Lambda waits for the timeout; tests need not).
    on_receive:
        Called with the received messages before the handler sees them (a non-empty batch only).

    Returns
    -------
    BatchResult
        ``received == 0`` when the queue had nothing visible.

    Examples
    --------
    >>> result = consume_batch(sqs, inbox_url, runner.handler, context)  # doctest: +SKIP
    >>> result.succeeded  # doctest: +SKIP
    ['0c5f...']
    """
    received = client.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=max(1, min(max_messages, MAX_BATCH)),
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
        WaitTimeSeconds=0,
    ).get("Messages", [])
    result = BatchResult(messages=list(received))
    if not received:
        return result
    if on_receive is not None:
        on_receive(result.messages)
    if queue_arn is None:
        queue_arn = client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
    event = sqs_event(received, queue_arn=queue_arn, region=region or client.meta.region_name)
    ids = [m["MessageId"] for m in received]
    try:
        result.response = handler(event, context)
    except Exception as exc:
        # A handler that raises fails the whole batch, as with the event source mapping.
        result.error = exc
        failed = set(ids)
    else:
        failed = failed_ids(result.response, ids)
    done: list[MessageTypeDef] = []
    for message in received:
        if message["MessageId"] in failed:
            result.failed.append(message["MessageId"])
            if release_failed:
                client.change_message_visibility(
                    QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )
        else:
            done.append(message)
            result.succeeded.append(message["MessageId"])
    if done:
        # One request for the batch: the local moto server serves one request at a time.
        client.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
        )
    return result
