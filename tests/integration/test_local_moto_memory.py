"""The local moto server keeps no copy of what it no longer holds, and does not slow as it ages.

moto records every model object it creates for its dashboard, the deep copy of a whole table that
each ``TransactWriteItems`` takes (to roll back) included: a long-lived local stack's memory grew
with the square of its writes. The server forgets them after each request; what a table, a queue
or a stream still holds stays. That copy held the table's whole stream too, so each transaction
cost more than the one before: the backup now leaves the stream out, and a cancelled transaction
cuts the stream back, as moto's own backup did.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from moto.dynamodb.models.table import Table
from moto.sqs.models import Message

if TYPE_CHECKING:
    from agent_wait_cli.local.moto_server import SerializedMotoServer

WRITES = 30


def alive(kind: type, where: Any) -> int:
    """How many ``kind`` objects ``where`` selects are still referenced, after a full collection."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, kind) and where(o))


@pytest.fixture
def table() -> str:
    """A table name of the test's own (the moto server lives as long as the test session)."""
    return f"memory-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def ledger(aws_client: Any, table: str) -> Any:
    dynamodb = aws_client("dynamodb")
    dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    return dynamodb


def test_transactions_leave_no_copy_of_their_table(ledger: Any, table: str) -> None:
    # Given transactions on a table with a stream, half of them cancelled (a rollback)
    for n in range(WRITES):
        ledger.transact_write_items(
            TransactItems=[{"Put": {"TableName": table, "Item": {"k": {"S": f"k{n}"}}}}]
        )
        with pytest.raises(ledger.exceptions.TransactionCanceledException):
            ledger.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": table,
                            "Item": {"k": {"S": f"k{n}"}},
                            "ConditionExpression": "attribute_not_exists(k)",
                        }
                    }
                ]
            )

    # Then one table object is left, holding every write and its stream
    assert alive(Table, lambda t: t.name == table) == 1
    assert ledger.scan(TableName=table, Select="COUNT")["Count"] == WRITES
    assert alive(Table, lambda t: t.name == table and len(t.stream_shard.items) == WRITES) == 1


def test_deleted_messages_are_not_kept(aws_client: Any, moto_server: SerializedMotoServer) -> None:
    sqs = aws_client("sqs")
    url = sqs.create_queue(QueueName="memory-queue")["QueueUrl"]
    for n in range(WRITES):
        sqs.send_message(QueueUrl=url, MessageBody=f"memory-{n}")
    received = 0
    while received < WRITES:
        for message in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            received += 1

    assert alive(Message, lambda m: m.body.startswith("memory-")) == 0


def test_a_cancelled_transaction_leaves_the_stream_as_it_was(
    ledger: Any, table: str, aws_client: Any
) -> None:
    # Given a transaction whose first write moto makes before its second is refused
    ledger.put_item(TableName=table, Item={"k": {"S": "held"}})
    with pytest.raises(ledger.exceptions.TransactionCanceledException):
        ledger.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": {"k": {"S": "new"}}}},
                {
                    "Put": {
                        "TableName": table,
                        "Item": {"k": {"S": "held"}},
                        "ConditionExpression": "attribute_not_exists(k)",
                    }
                },
            ]
        )

    # Then neither the table nor its stream holds the first write, and later writes reach both
    ledger.put_item(TableName=table, Item={"k": {"S": "after"}})
    streams = aws_client("dynamodbstreams")
    arn = ledger.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    records = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    assert [r["dynamodb"]["Keys"]["k"]["S"] for r in records] == ["held", "after"]
    assert sorted(i["k"]["S"] for i in ledger.scan(TableName=table)["Items"]) == ["after", "held"]


def test_the_local_server_backs_up_transactions_without_their_stream() -> None:
    # In a process of its own (the tests' setup applies the same to mock_aws): starting the server does
    script = (
        "import moto.dynamodb.models as m\n"
        "from agent_wait_cli.local.moto_server import SerializedMotoServer\n"
        "before = getattr(m.DynamoDBBackend.transact_write_items, 'backs_up_without_the_stream', False)\n"
        "server = SerializedMotoServer(log_requests=False)\n"
        "server.start()\n"
        "server.stop()\n"
        "print(before, m.DynamoDBBackend.transact_write_items.backs_up_without_the_stream)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["False", "True"]
