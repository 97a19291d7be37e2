"""A ledger write refused because a transaction holds its item is retried, a few times.

The runner records a resume's question and the run's end in one ``TransactWriteItems``; while it
runs, DynamoDB refuses any other write to those two items with ``TransactionConflictException``
(nothing written), which botocore does not retry. The api's writes to the same items (a repeated
reply, a new run on the thread) would fail with it; the ledger's client retries them instead.
The moto server plays DynamoDB refusing the first writes (moto itself never conflicts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError

from agent_wait_cli.local.moto_server import Fault
from wait_service.ledger import Ledger
from wait_service.ledger.table import CONFLICT_RETRIES

if TYPE_CHECKING:
    from collections.abc import Iterator

    from agent_wait_cli.local.moto_server import SerializedMotoServer
    from wait_service.resources import LocalResources

CONFLICT = Fault(
    400,
    b'{"__type": "com.amazonaws.dynamodb.v20120810#TransactionConflictException",'
    b' "message": "Transaction is ongoing for the item"}',
)


@pytest.fixture
def refusing(moto_server: SerializedMotoServer) -> Iterator[list[int]]:
    """Refuse the next ``refusals[0]`` UpdateItems as a transaction would; counts what it refused."""
    refusals = [0, 0]  # [to refuse, refused]

    def rule(environ: dict[str, Any], body: bytes) -> Fault | None:
        if environ.get("HTTP_X_AMZ_TARGET", "").endswith(".UpdateItem") and refusals[1] < refusals[0]:
            refusals[1] += 1
            return CONFLICT
        return None

    moto_server.inject(rule)
    try:
        yield refusals
    finally:
        moto_server.inject(None)


def test_a_write_refused_by_a_transaction_is_retried_until_it_goes_through(
    resources: LocalResources, aws_client: Any, refusing: list[int]
) -> None:
    ledger = Ledger(resources.ledger_table, aws_client("dynamodb"))
    refusing[0] = CONFLICT_RETRIES

    ledger.queue_thread("t-1", "01A")

    assert refusing[1] == CONFLICT_RETRIES
    assert ledger.get_thread("t-1").run_status == "queued"


def test_a_write_refused_more_often_fails_with_the_conflict(
    resources: LocalResources, aws_client: Any, refusing: list[int]
) -> None:
    ledger = Ledger(resources.ledger_table, aws_client("dynamodb"))
    refusing[0] = CONFLICT_RETRIES + 1

    with pytest.raises(ClientError) as refused:
        ledger.queue_thread("t-1", "01A")

    assert refused.value.response["Error"]["Code"] == "TransactionConflictException"
    assert refusing[1] == CONFLICT_RETRIES + 1
    assert ledger.find_thread("t-1") is None
