"""Write each question to the ledger table (see docs/internals.md, "Ledger")."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import boto3
from boto3.dynamodb.types import TypeSerializer

from agent_wait.announce.base import BaseAnnounce
from agent_wait.envelope import isoformat_z

if TYPE_CHECKING:
    from agent_wait.envelope import Envelope

__all__ = ["DynamoDbAnnounce", "ledger_update"]

_serializer = TypeSerializer()

# status, created_at, expires_at, envelope, lifecycle and updated_at are written only when absent:
# a republished question (redelivered start message) must not reset a question the receive path
# has already moved, nor its timestamps.
_UPDATE_EXPRESSION = (
    "SET #kind = :kind, #question_id = :question_id, #thread_id = :thread_id, #digest = :digest, "
    "#question = :question, #policy = :policy, #source = :source, "
    "#status = if_not_exists(#status, :status), "
    "#created_at = if_not_exists(#created_at, :created_at), "
    "#expires_at = if_not_exists(#expires_at, :expires_at), "
    "#envelope = if_not_exists(#envelope, :envelope), "
    "#lifecycle = if_not_exists(#lifecycle, :lifecycle), "
    "#updated_at = if_not_exists(#updated_at, :created_at)"
)
_NAMES = (
    "kind question_id thread_id digest question policy source status created_at expires_at "
    "envelope lifecycle updated_at"
).split()


def _dynamo(value: Any) -> dict[str, Any]:
    # DynamoDB has no float type: go through JSON so every number becomes a Decimal.
    plain = json.loads(json.dumps(value), parse_float=Decimal)
    return dict(_serializer.serialize(plain))


def ledger_update(table_name: str, envelope: Envelope) -> dict[str, Any]:
    """The ``UpdateItem`` request that records ``envelope`` in the ledger.

    Examples
    --------
    >>> from agent_wait.envelope import Question, build_envelope
    >>> req = ledger_update("ledger", build_envelope("t1", Question(question_id="q1", question="hi")))
    >>> req["Key"]
    {'dedupe_key': {'S': 'wait.created:q1'}}
    """
    created_at = isoformat_z(envelope.created_at)
    values = {
        ":kind": "question",
        ":question_id": envelope.question_id,
        ":thread_id": envelope.thread_id,
        ":digest": envelope.digest,
        ":question": envelope.question,
        ":policy": envelope.policy.model_dump(mode="json"),
        ":source": envelope.source,
        ":status": "raised",
        ":created_at": created_at,
        ":expires_at": None if envelope.expires_at is None else isoformat_z(envelope.expires_at),
        ":envelope": envelope.to_json(),
        ":lifecycle": [{"stage": "raised", "at": created_at, "actor": "agent"}],
    }
    return {
        "TableName": table_name,
        "Key": {"dedupe_key": {"S": envelope.dedupe_key}},
        "UpdateExpression": _UPDATE_EXPRESSION,
        "ExpressionAttributeNames": {f"#{name}": name for name in _NAMES},
        "ExpressionAttributeValues": {key: _dynamo(value) for key, value in values.items()},
    }


class DynamoDbAnnounce(BaseAnnounce):
    """Record each question in the ledger table, keyed by ``dedupe_key``.

    The first publish creates the item with ``status = "raised"``, ``created_at`` and a
    one-entry ``lifecycle``; a republish of the same question keeps status, ``created_at``,
    ``expires_at``, ``envelope`` and ``lifecycle`` as they are.

    Parameters
    ----------
    table_name:
        The ledger table.
    client:
        A boto3 DynamoDB client; ``boto3.client("dynamodb")`` when ``None``.

    Examples
    --------
    >>> announce = DynamoDbAnnounce("agent-wait-ledger")  # doctest: +SKIP
    """

    def __init__(self, table_name: str, client: Any = None, *, name: str = "dynamodb") -> None:
        self.table_name = table_name
        self.client = client if client is not None else boto3.client("dynamodb")
        self.name = name

    def deliver(self, envelope: Envelope) -> None:
        self.client.update_item(**ledger_update(self.table_name, envelope))
