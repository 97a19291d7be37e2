"""The bench's call accounting: each AWS call filed under what it is for, and round trips in a row
computed from call intervals (no clock involved: the intervals are given)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.calls import CallTimeline, Targets, TimedCall, by_kind, classify, in_a_row

TARGETS = Targets(
    ledger_table="aw-ledger",
    checkpoint_tables=("aw-checkpoints", "aw-writes"),
    checkpoint_bucket="aw-offload",
    inbox_url="https://sqs.us-east-1.amazonaws.com/1/aw-inbox.fifo",
    outbox_url="https://sqs.us-east-1.amazonaws.com/1/aw-outbox.fifo",
    topic_arn="arn:aws:sns:us-east-1:1:aw-created",
)


@pytest.mark.parametrize(
    ("service", "action", "params", "kind"),
    [
        # The announcer's PutItem of a new question is a ledger write, not a sink.
        ("dynamodb", "PutItem", {"TableName": "aw-ledger", "Item": {}}, "ledger"),
        ("dynamodb", "UpdateItem", {"TableName": "aw-ledger"}, "ledger"),
        ("dynamodb", "Query", {"TableName": "aw-checkpoints"}, "checkpoint"),
        (
            "dynamodb",
            "BatchWriteItem",
            {"RequestItems": {"aw-writes": [], "aw-checkpoints": []}},
            "checkpoint",
        ),
        # A transaction touching the ledger and a checkpoint table is the ledger's commit.
        (
            "dynamodb",
            "TransactWriteItems",
            {
                "TransactItems": [
                    {"Update": {"TableName": "aw-checkpoints"}},
                    {"Put": {"TableName": "aw-ledger"}},
                ]
            },
            "ledger",
        ),
        ("dynamodb", "GetItem", {"TableName": "someone-elses"}, "other"),
        ("s3", "PutObject", {"Bucket": "aw-offload", "Key": "k"}, "checkpoint"),
        ("s3", "PutObject", {"Bucket": "elsewhere", "Key": "k"}, "other"),
        ("sns", "Publish", {"TopicArn": "arn:aws:sns:us-east-1:1:aw-created"}, "sink"),
        ("sqs", "SendMessage", {"QueueUrl": "https://sqs.us-east-1.amazonaws.com/1/aw-outbox.fifo"}, "sink"),
        ("sqs", "SendMessage", {"QueueUrl": "https://sqs.us-east-1.amazonaws.com/1/aw-inbox.fifo"}, "queue"),
        ("scheduler", "CreateSchedule", {"Name": "x"}, "timer"),
    ],
)
def test_each_call_is_filed_under_what_it_is_for(
    service: str, action: str, params: dict[str, Any], kind: str
) -> None:
    assert classify(service, action, params, TARGETS) == kind


def call(start: float, end: float, kind: str = "other") -> TimedCall:
    return TimedCall("dynamodb.PutItem", kind, start, end)


def test_calls_one_after_another_are_all_in_a_row() -> None:
    assert in_a_row([call(0, 1), call(1, 2), call(2.5, 3), call(3, 4)]) == 4


def test_calls_made_at_once_count_once() -> None:
    # Query, then four puts two at a time (a pool of two), then a write, then a fan-out of two.
    calls = [
        call(0, 1),
        call(1.1, 2.0),
        call(1.2, 2.1),
        call(2.05, 3.0),
        call(2.15, 3.1),
        call(3.2, 4),
        call(4.1, 5),
        call(4.15, 5.1),
    ]
    assert in_a_row(calls) == 5


def test_the_longest_chain_wins_whatever_the_order_given() -> None:
    # A long call overlapping a chain of three short ones: the three are the critical path.
    calls = [call(0, 10), call(0.5, 1), call(2, 3), call(4, 5)]
    assert in_a_row(reversed(calls)) == 3
    assert in_a_row([]) == 0


def test_the_timeline_records_and_files_real_boto3_calls() -> None:
    import boto3
    from moto import mock_aws

    with mock_aws():
        session = boto3.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1")
        timeline = CallTimeline(TARGETS)
        timeline.attach(session)
        dynamodb, sqs = session.client("dynamodb"), session.client("sqs")
        dynamodb.create_table(
            TableName="aw-ledger",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        queue = sqs.create_queue(QueueName="aw-outbox.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        timeline.targets = Targets("aw-ledger", outbox_url=queue)
        timeline.clear()
        dynamodb.put_item(TableName="aw-ledger", Item={"pk": {"S": "q"}})
        with pytest.raises(dynamodb.exceptions.ConditionalCheckFailedException):
            dynamodb.put_item(
                TableName="aw-ledger", Item={"pk": {"S": "q"}}, ConditionExpression="attribute_not_exists(pk)"
            )
        sqs.send_message(QueueUrl=queue, MessageBody="{}", MessageGroupId="g", MessageDeduplicationId="d")
        calls = timeline.clear()

    assert [c.name for c in calls] == ["dynamodb.PutItem", "dynamodb.PutItem", "sqs.SendMessage"]
    assert by_kind(calls) == {"ledger": 2, "sink": 1}
    assert all(c.start <= c.end for c in calls)
    assert in_a_row(calls) == 3  # made in turn by one thread
