"""``make capacity`` counts what one question really costs: its counts against a hand count.

One question with a ttl and two reminders goes through the local stack (start, park, the human
reads and answers, resume) under the capacity recorder. Every call below is written out by hand
from the code path it comes from; a call added or removed anywhere on that path changes this
count, and the hand count is then updated with the reason.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import pytest

from bench import capacity, capacity_report

if TYPE_CHECKING:
    from bench.recorder import Call

# The GET route publishes no metric of its own; Powertools warns about that at each flush.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


@pytest.fixture(scope="module")
def one_question() -> capacity_report.Sample:
    return capacity.run_sample(1, timed_share=1.0, progress=lambda _: None, deadline=120)


def _by_target(calls: list[Call]) -> Counter[tuple[str, str]]:
    # Resource names lose the stack's prefix: "capacity-ledger" → "ledger".
    return Counter((c.target.removeprefix("capacity-"), c.name) for c in calls)


def test_one_question_makes_the_calls_counted_by_hand(one_question: capacity_report.Sample) -> None:
    calls, _ = capacity_report.counted(one_question)

    hand = Counter(
        {
            # -- POST /threads/{id}/runs (api) --
            # ledger UpdateItem: the thread item is queued (runs.start → ledger.queue_thread)
            # inbox SendMessage: the start message (group = thread id)
            # -- the inbox's event source mapping --
            # inbox ReceiveMessage + DeleteMessageBatch: the start message handed to the runner, then deleted
            # -- the runner's start run --
            # ledger UpdateItem: the thread is running
            # checkpoints Query: the thread's latest checkpoint (none yet)
            # checkpoints PutItem ×4: the checkpoint, its writes and two payload chunks (durability=exit)
            # ledger PutItem: the question item (DynamoDbAnnounce, the first sink)
            # wait-created Publish: SnsAnnounce
            # outbox SendMessage: SqsAnnounce
            # ledger UpdateItem: the question is delivered
            # timers CreateSchedule ×3: the expiry at the ttl and the two reminders
            # ledger UpdateItem: the thread is interrupted, the question pending
            # -- GET /questions/{id} (api) --
            # ledger GetItem: the question
            # -- POST /questions/{id}/reply (api) --
            # ledger GetItem: the question, to check the responder, the ETag and the answer
            # ledger UpdateItem: the answer, conditional on the question being open (first answer stands)
            # inbox SendMessage: the resume message
            # ledger UpdateItem: the resume is marked enqueued
            # -- the inbox's event source mapping --
            # inbox ReceiveMessage + DeleteMessageBatch: the resume message
            # -- the runner's resume run --
            # ledger GetItem: the answer, read from the ledger (the only source of answers)
            # ledger UpdateItem: the thread is running
            # checkpoints Query, GetItem, Query, GetItem: last checkpoint, its chunk, its writes, their chunk
            # checkpoints PutItem ×2: the final checkpoint and its chunk
            # timers DeleteSchedule ×3: the question is decided, its three timers go
            # ledger TransactWriteItems: the question resumed and the thread done, together
            ("ledger", "dynamodb.UpdateItem"): 1 + 3 + 2 + 1,
            ("ledger", "dynamodb.PutItem"): 1,
            ("ledger", "dynamodb.GetItem"): 1 + 1 + 1,
            ("ledger", "dynamodb.TransactWriteItems"): 1,
            ("checkpoints", "dynamodb.Query"): 1 + 2,
            ("checkpoints", "dynamodb.PutItem"): 4 + 2,
            ("checkpoints", "dynamodb.GetItem"): 2,
            ("inbox.fifo", "sqs.SendMessage"): 1 + 1,
            ("inbox.fifo", "sqs.ReceiveMessage"): 1 + 1,
            ("inbox.fifo", "sqs.DeleteMessageBatch"): 1 + 1,
            ("outbox.fifo", "sqs.SendMessage"): 1,
            ("wait-created", "sns.Publish"): 1,
            ("timers", "scheduler.CreateSchedule"): 3,
            ("timers", "scheduler.DeleteSchedule"): 3,
        }
    )
    assert _by_target(calls) == hand


def test_one_question_writes_each_index_as_counted_by_hand(one_question: capacity_report.Sample) -> None:
    calls, _ = capacity_report.counted(one_question)
    ledger = one_question.ledger_table
    index_writes = Counter(
        u.where.removeprefix(ledger + "/") for c in calls for u in c.usage if "/" in u.where
    )

    # The question item is in both indexes from its PutItem on. by-status is keyed on the status, so
    # a status change moves the item: a delete of the old entry and a put of the new one.
    #   PutItem (raised):                      by-status put             by-thread put
    #   UpdateItem delivered:                  by-status delete + put    by-thread update
    #   UpdateItem answered:                   by-status delete + put    by-thread update
    #   UpdateItem resume enqueued (answered): by-status update          by-thread update
    #   TransactWriteItems resumed:            by-status delete + put    by-thread update
    # The thread item carries neither index's keys: no index write.
    assert index_writes == Counter({"by-status": 1 + 2 + 2 + 1 + 2, "by-thread": 5})


def test_one_question_is_timed_and_attributed(one_question: capacity_report.Sample) -> None:
    functions = Counter(i.function for i in one_question.invocations)
    routes = sorted(i.route for i in one_question.invocations if i.route)

    # Three api requests, a start run and a resume run; no timer was due before the answer.
    assert functions == Counter({"api": 3, "runner": 2})
    assert routes == [
        "GET /questions/{question_id}",
        "POST /questions/{question_id}/reply",
        "POST /threads/{thread_id}/runs",
    ]
    thread_id = next(iter(set(one_question.per_thread_ids.values())))
    assert {i.question for i in one_question.invocations} == {thread_id}
    # The handlers logged, and the logs were counted, not printed.
    assert one_question.log_bytes["runner"] > 0
