"""The local moto server keeps no copy of what it no longer holds.

moto records every model object it creates for its dashboard, the deep copy of a whole table that
each ``TransactWriteItems`` takes (to roll back) included: a long-lived local stack's memory grew
with the square of its writes. The server forgets them after each request; what a table, a queue
or a stream still holds stays.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

import pytest
from moto.dynamodb.models.table import Table
from moto.sqs.models import Message

if TYPE_CHECKING:
    from agent_wait_cli.local.moto_server import SerializedMotoServer

TABLE = "memory-ledger"
WRITES = 30


def alive(kind: type, where: Any) -> int:
    """How many ``kind`` objects ``where`` selects are still referenced, after a full collection."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, kind) and where(o))


@pytest.fixture
def ledger(aws_client: Any) -> Any:
    dynamodb = aws_client("dynamodb")
    dynamodb.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    return dynamodb


def test_transactions_leave_no_copy_of_their_table(ledger: Any, moto_server: SerializedMotoServer) -> None:
    # Given transactions on a table with a stream, half of them cancelled (a rollback)
    for n in range(WRITES):
        ledger.transact_write_items(
            TransactItems=[{"Put": {"TableName": TABLE, "Item": {"k": {"S": f"k{n}"}}}}]
        )
        with pytest.raises(ledger.exceptions.TransactionCanceledException):
            ledger.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": TABLE,
                            "Item": {"k": {"S": f"k{n}"}},
                            "ConditionExpression": "attribute_not_exists(k)",
                        }
                    }
                ]
            )

    # Then one table object is left, holding every write and its stream
    assert alive(Table, lambda t: t.name == TABLE) == 1
    assert ledger.scan(TableName=TABLE, Select="COUNT")["Count"] == WRITES
    assert alive(Table, lambda t: t.name == TABLE and len(t.stream_shard.items) == WRITES) == 1


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
