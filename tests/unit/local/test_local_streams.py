"""The local event source mapping for the ledger's stream, against moto in process.

What it promises, as Lambda's DynamoDB stream mapping does: records in order, a failed record
retried from itself (the records before it are done), the failing batch halved on each retry,
and after the retries the batch's metadata on the on-failure queue, reading going on after it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws

from agent_wait_cli.local.streams import StreamReader

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def table() -> Iterator[dict[str, Any]]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        sqs = boto3.client("sqs", region_name="us-east-1")
        yield {
            "dynamodb": dynamodb,
            "streams": boto3.client(
                "dynamodbstreams", region_name="us-east-1", config=Config(account_id_endpoint_mode="disabled")
            ),
            "arn": dynamodb.describe_table(TableName="t")["Table"]["LatestStreamArn"],
            "sqs": sqs,
            "dlq": sqs.create_queue(QueueName="stream-dlq")["QueueUrl"],
        }


def put(table: dict[str, Any], *keys: str) -> None:
    for key in keys:
        table["dynamodb"].put_item(TableName="t", Item={"k": {"S": key}})


def keys_of(event: dict[str, Any]) -> list[str]:
    return [record["dynamodb"]["Keys"]["k"]["S"] for record in event["Records"]]


def test_records_come_in_order_shaped_as_lambda_hands_them(table: dict[str, Any]) -> None:
    put(table, "a", "b", "c")
    seen: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.append(event)
        return {"batchItemFailures": []}

    reader = StreamReader(table["streams"], table["arn"], handler, batch_size=2)

    assert reader.drain() == 3
    assert [keys_of(event) for event in seen] == [["a", "b"], ["c"]]
    record = seen[0]["Records"][0]
    assert record["eventSourceARN"] == table["arn"]
    assert isinstance(record["dynamodb"]["ApproximateCreationDateTime"], float)
    # Nothing new: nothing handed over
    assert reader.poll_once() is None
    put(table, "d")
    assert reader.drain() == 1 and keys_of(seen[-1]) == ["d"]


def test_a_failed_record_is_retried_from_itself_halved_until_it_goes(table: dict[str, Any]) -> None:
    put(table, "a", "b", "c", "d")
    seen: list[list[str]] = []
    failures = {"c": 2}

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.append(keys_of(event))
        failed = []
        for record in event["Records"]:
            key = record["dynamodb"]["Keys"]["k"]["S"]
            if failures.get(key):
                failures[key] -= 1
                failed.append({"itemIdentifier": record["dynamodb"]["SequenceNumber"]})
        return {"batchItemFailures": failed}

    reader = StreamReader(table["streams"], table["arn"], handler, batch_size=4, max_retry_attempts=5)

    assert reader.drain() == 4
    # a and b are done at the first failure; c is retried from itself in half the failed batch
    # (c, d) until it goes, then reading goes on at full size
    assert seen == [["a", "b", "c", "d"], ["c"], ["c"], ["d"]]
    assert reader.failed_batches == 2


def test_a_handler_that_raises_fails_the_whole_batch(table: dict[str, Any]) -> None:
    put(table, "a", "b")
    calls: list[list[str]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        calls.append(keys_of(event))
        if len(calls) == 1:
            raise RuntimeError("injected")
        return {"batchItemFailures": []}

    reader = StreamReader(table["streams"], table["arn"], handler, batch_size=2)

    assert reader.drain() == 2
    assert calls == [["a", "b"], ["a"], ["b"]]


def test_records_that_fail_every_retry_go_to_the_dlq_and_reading_goes_on(table: dict[str, Any]) -> None:
    put(table, "poison", "next")
    handled: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        failed = []
        for record in event["Records"]:
            key = record["dynamodb"]["Keys"]["k"]["S"]
            if key == "poison":
                failed.append({"itemIdentifier": record["dynamodb"]["SequenceNumber"]})
            else:
                handled.append(key)
        return {"batchItemFailures": failed}

    reader = StreamReader(
        table["streams"],
        table["arn"],
        handler,
        batch_size=1,
        max_retry_attempts=2,
        sqs=table["sqs"],
        dlq_url=table["dlq"],
    )

    reader.drain()

    assert handled == ["next"]
    assert reader.failed_batches == 3  # the first attempt and its two retries
    [message] = table["sqs"].receive_message(QueueUrl=table["dlq"])["Messages"]
    info = json.loads(message["Body"])["DDBStreamBatchInfo"]
    assert (info["streamArn"], info["batchSize"]) == (table["arn"], 1)
    assert info["startSequenceNumber"] == info["endSequenceNumber"]


def test_a_retry_waits_longer_each_time_but_never_long(table: dict[str, Any]) -> None:
    put(table, "a")
    reader = StreamReader(
        table["streams"],
        table["arn"],
        lambda event, context: {"batchItemFailures": [{"itemIdentifier": "x"}]},
        max_retry_attempts=50,
        idle_sleep=0.2,
    )
    waits = []
    for _ in range(8):
        reader.poll_once()
        waits.append(reader.backoff())

    assert waits == [0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0, 2.0]
