"""What every part of the ledger shares: the table, its client and the clock."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from wait_service.ledger.attributes import Clock, utcnow

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class LedgerTable:
    """The ledger table as the question, thread and paging parts of :class:`Ledger` use it.

    Parameters
    ----------
    table_name:
        The ledger table (``AGENT_WAIT_LEDGER_TABLE``).
    client:
        A boto3 DynamoDB client; ``None`` creates the default one.
    clock:
        Returns the current UTC time; injected by tests.
    ttl_days:
        Days after which an ended question or a finished thread is removed by DynamoDB TTL.
    """

    def __init__(
        self,
        table_name: str,
        client: DynamoDBClient | None = None,
        *,
        clock: Clock = utcnow,
        ttl_days: int = 90,
    ) -> None:
        if client is None:
            import boto3

            client = boto3.client("dynamodb")
        self.table_name = table_name
        self._client = client
        self._clock = clock
        self._ttl = timedelta(days=ttl_days)

    def _get(self, key: str) -> dict[str, Any] | None:
        response = self._client.get_item(
            TableName=self.table_name, Key={"dedupe_key": {"S": key}}, ConsistentRead=True
        )
        item = response.get("Item")
        return dict(item) if item else None
