"""Lambda SQS events built from ``ReceiveMessage`` results, and a one-batch consumer.

Lambda's event source mapping receives messages, hands them to the function as one SQS event
and deletes those not named in ``batchItemFailures``. Tests and the local stack do the same with
these helpers, so the runner handler sees exactly the event shape it gets on AWS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

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


def failed_ids(response: Any) -> set[str]:
    """The ``itemIdentifier`` of every entry of a partial batch response's ``batchItemFailures``."""
    if not isinstance(response, Mapping):
        return set()
    return {
        str(f["itemIdentifier"]) for f in response.get("batchItemFailures") or [] if "itemIdentifier" in f
    }


@dataclass
class BatchResult:
    """What one :func:`consume_batch` call did."""

    received: int = 0
    succeeded: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    response: Any = None
    error: Exception | None = None


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
) -> BatchResult:
    """Receive one batch, invoke ``handler(event, context)``, delete the records that succeeded.

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
        (Lambda waits for the timeout; tests and a local poller need not).

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
    result = BatchResult(received=len(received))
    if not received:
        return result
    if queue_arn is None:
        queue_arn = client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
    event = sqs_event(received, queue_arn=queue_arn, region=region or client.meta.region_name)
    try:
        result.response = handler(event, context)
        failed = failed_ids(result.response)
    except Exception as exc:
        # A handler that raises fails the whole batch, as with the event source mapping.
        result.error = exc
        failed = {m["MessageId"] for m in received}
    for message in received:
        if message["MessageId"] in failed:
            result.failed.append(message["MessageId"])
            if release_failed:
                client.change_message_visibility(
                    QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )
        else:
            client.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            result.succeeded.append(message["MessageId"])
    return result
