"""What every part of the ledger shares: the table, its client and the clock."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from agent_wait.aws.dynamodb import MAX_STATUS_SHARDS, STATUS_SHARDS
from wait_service.clients import CLIENT_CONFIG
from wait_service.ledger.attributes import Clock, condition_failed, utcnow

if TYPE_CHECKING:
    from collections.abc import Callable

    from mypy_boto3_dynamodb import DynamoDBClient

# A single-item write to an item that a transaction (the runner's end of a resume) is writing at
# that moment is refused with this code, nothing written; botocore does not retry it.
TRANSACTION_CONFLICT = "TransactionConflictException"
# Retries of such a write, after 25, 50 and 100 ms: a transaction holds its items for milliseconds.
CONFLICT_RETRIES = 3
CONFLICT_BACKOFF_SECONDS = 0.025


def retry_transaction_conflicts(response: Any = None, attempts: int = 1, **_: Any) -> float | None:
    """botocore's ``needs-retry`` hook: the delay before retrying a write refused by a transaction.

    ``None`` (no retry from this hook; botocore's own policy still applies) for every other
    outcome, and once :data:`CONFLICT_RETRIES` retries were made.

    Examples
    --------
    >>> refused = (None, {"Error": {"Code": "TransactionConflictException"}})
    >>> retry_transaction_conflicts(refused, attempts=1), retry_transaction_conflicts(refused, attempts=4)
    (0.025, None)
    >>> retry_transaction_conflicts((None, {"Error": {"Code": "ConditionalCheckFailedException"}})) is None
    True
    """
    if response is None or attempts > CONFLICT_RETRIES:
        return None
    code = response[1].get("Error", {}).get("Code") if isinstance(response[1], dict) else None
    if code != TRANSACTION_CONFLICT:
        return None
    return float(CONFLICT_BACKOFF_SECONDS * 2 ** (attempts - 1))


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
    listing_shards:
        The shards of each status listing (``AGENT_WAIT_LISTING_SHARDS``,
        :mod:`wait_service.ledger.shards`): where moves list a question, and what a page reads.
    """

    def __init__(
        self,
        table_name: str,
        client: DynamoDBClient | None = None,
        *,
        clock: Clock = utcnow,
        ttl_days: int = 90,
        listing_shards: int = STATUS_SHARDS,
    ) -> None:
        if client is None:
            import boto3

            client = boto3.client("dynamodb", config=CLIENT_CONFIG)
        events = getattr(getattr(client, "meta", None), "events", None)
        if events is not None:
            events.register(
                "needs-retry.dynamodb",
                retry_transaction_conflicts,
                unique_id="agent-wait-transaction-conflicts",
            )
        self.table_name = table_name
        self._client = client
        self._clock = clock
        # Waits between reads of keys DynamoDB left unprocessed; tests replace it.
        self._sleep: Callable[[float], None] = time.sleep
        self._ttl = timedelta(days=ttl_days)
        if not 1 <= listing_shards <= MAX_STATUS_SHARDS:
            raise ValueError(f"listing_shards={listing_shards}: expected 1 to {MAX_STATUS_SHARDS}")
        self.listing_shards = listing_shards

    def _get(self, key: str, **projection: Any) -> dict[str, Any] | None:
        """The item at ``key``, read consistently (``projection``: a ``ProjectionExpression`` and
        its names, to read some attributes only)."""
        response = self._client.get_item(
            TableName=self.table_name, Key={"dedupe_key": {"S": key}}, ConsistentRead=True, **projection
        )
        item = response.get("Item")
        return dict(item) if item else None

    def _update_if(self, **request: Any) -> bool:
        """One conditional ``UpdateItem``; ``False`` when its condition does not hold."""
        try:
            self._client.update_item(**request)
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
        return True
