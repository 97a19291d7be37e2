"""Twenty api instances start the same run with one ``Idempotency-Key`` at once: one run is queued.

Each instance has its own clients and services, as concurrent Lambda invocations do; the records
are written to moto server over HTTP, whose conditional writes are atomic as on DynamoDB.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import pytest

from agent_wait.errors import IdempotencyInProgressError
from wait_service.ledger import Ledger
from wait_service.resources import LEDGER
from wait_service.runs.idempotent_starts import IdempotentStarts
from wait_service.runs.starts import RunService

if TYPE_CHECKING:
    from wait_service.resources import LocalResources

pytestmark = pytest.mark.integration

REFUND = {"customer": "c-17", "amount": 40}
CALLERS = 20


class LambdaContext:
    def get_remaining_time_in_millis(self) -> int:
        return 29_000


def test_concurrent_starts_with_one_key_queue_one_run(
    resources: LocalResources, aws_client: Any, dispatch: Any
) -> None:
    instances = []
    for _ in range(CALLERS):
        dynamodb = aws_client("dynamodb")
        ledger = Ledger(resources.ledger_table, dynamodb)
        runs = RunService(ledger)
        instances.append(IdempotentStarts(runs, resources.ledger_table, LEDGER, dynamodb))
    barrier = threading.Barrier(CALLERS)
    outcomes: list[str] = []
    lock = threading.Lock()

    def start(starts: IdempotentStarts) -> None:
        barrier.wait()
        try:
            starts.start("t-race", REFUND, key="retry-1", context=LambdaContext())
            outcome = "queued"
        except IdempotencyInProgressError:
            outcome = "in_progress"
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=start, args=(s,)) for s in instances]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert len(outcomes) == CALLERS
    assert "queued" in outcomes
    # The start messages come from the ledger's stream: one run recorded, one message.
    dispatch()
    sqs = aws_client("sqs")
    bodies = []
    while got := sqs.receive_message(QueueUrl=resources.inbox_url, MaxNumberOfMessages=10).get("Messages"):
        bodies += [json.loads(m["Body"]) for m in got]
    assert [b["thread_id"] for b in bodies] == ["t-race"]
    # Once done, every repeat is answered from the record and still starts nothing.
    assert instances[0].start("t-race", REFUND, key="retry-1").thread_id == "t-race"
    dispatch()
    assert sqs.receive_message(QueueUrl=resources.inbox_url).get("Messages") is None
