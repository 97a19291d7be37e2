"""``make capacity`` counts what one question really costs: its counts against a hand count.

One question with a ttl and two reminders goes through the local stack (start, park, the human
reads and answers, resume) under the capacity recorder. Every call below is written out by hand
from the code path it comes from; a call added or removed anywhere on that path changes this
count, and the hand count is then updated with the reason.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from bench import capacity, capacity_report

if TYPE_CHECKING:
    from bench.recorder import Call

# The GET route publishes no metric of its own; Powertools warns about that at each flush.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


@pytest.fixture(scope="module")
def one_question() -> capacity_report.Sample:
    # The ledger's stream is read late, as on a busy machine: every write made before a read is in
    # its batch. A count below that depends on how the records fall into batches holds only if
    # the sample orders them (a person answers after the raise is handled), not if the reader is
    # quick enough.
    from agent_wait_cli.local.streams import StreamReader

    read = StreamReader._read

    def late_read(self: StreamReader, limit: int) -> list[dict[str, Any]]:
        time.sleep(0.3)
        return read(self, limit)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StreamReader, "_read", late_read)
        return capacity.run_sample(1, timed_share=1.0, progress=lambda _: None, deadline=120, rate=1000)


def _by_function(calls: list[Call]) -> Counter[tuple[str, str, str]]:
    # Resource names lose the stack's prefix: "capacity-ledger" → "ledger".
    return Counter((c.function, c.target.removeprefix("capacity-"), c.name) for c in calls)


def test_one_question_makes_the_calls_counted_by_hand(one_question: capacity_report.Sample) -> None:
    calls, _ = capacity_report.counted(one_question)

    # One commit point per request, the ledger write; what must follow it is the dispatcher's, from
    # the ledger's stream (both images of every change).
    hand = Counter(
        {
            # -- POST /threads/{id}/runs (api) --
            # ledger TransactWriteItems: the thread queued and the run's record `run:<id>` together
            #   (ledger.queue_run); nothing else: the start message follows from the stream
            ("api", "ledger", "dynamodb.TransactWriteItems"): 1,
            # -- GET /questions/{id} (api) --
            # ledger GetItem: the question
            # -- POST /questions/{id}/reply (api) --
            # ledger GetItem: the question, to check the responder, the ETag and the answer
            ("api", "ledger", "dynamodb.GetItem"): 1 + 1,
            # ledger UpdateItem: the answer, conditional on the question being open (first answer
            #   stands); the resume follows from the stream
            ("api", "ledger", "dynamodb.UpdateItem"): 1,
            # -- the dispatcher, on the ledger's stream: a batch's messages in batch calls --
            # the run record inserted → inbox SendMessageBatch: the start message (group = thread
            # id); the question moved into answered, in a later batch → inbox SendMessageBatch: the
            # resume message
            ("dispatcher", "inbox.fifo", "sqs.SendMessageBatch"): 1 + 1,
            # (and writes nothing on the question)
            # resolution events wait.answered, then wait.resumed and thread.done in one batch (the
            # question's move to resumed and the thread's to done are one transaction): to the
            # outbox one call each, a call holding one message of a thread (group) at most; to the
            # standard topic, which keeps no order, the batch's two in one call
            ("dispatcher", "outbox.fifo", "sqs.SendMessageBatch"): 3,
            ("dispatcher", "wait-created", "sns.PublishBatch"): 1 + 1,
            # analytics, once per stream batch: the question raised and the question answered come
            #   in two batches (the sample's person answers once the raise is dispatched), each counted once
            #   with its once-only marker in the batch's one TransactWriteItems; the time to answer's
            #   max (a conditional UpdateItem, kept only when larger: the first in its cell)
            ("dispatcher", "stats", "dynamodb.TransactWriteItems"): 2,
            ("dispatcher", "stats", "dynamodb.UpdateItem"): 1,
            # (its audit archive records, answered and resumed, are a file locally: no AWS call;
            # deployed one Firehose PutRecordBatch per stream batch holding one: the next test)
            # -- the inbox's event source mapping: the start, then the resume message --
            # inbox ReceiveMessage + DeleteMessageBatch: handed to the runner, then deleted
            ("local stack", "inbox.fifo", "sqs.ReceiveMessage"): 1 + 1,
            ("local stack", "inbox.fifo", "sqs.DeleteMessageBatch"): 1 + 1,
            # -- the runner's start run --
            # ledger UpdateItem: the run record claimed by the message (claim_run), the thread
            #   running (start_if_at_rest)
            # checkpoints Query: the thread's latest checkpoint (none yet), read at once with those
            # checkpoints PutItem ×4: the checkpoint, its writes and two payload chunks (durability=exit)
            # policies Query: the function's policy override, if any (then cached for 30 s per
            #   function, as deployed: the capacity stack keeps the deployed cache)
            # ledger PutItem: the question item (DynamoDbAnnounce, the first sink)
            # wait-created Publish: SnsAnnounce; outbox SendMessage: SqsAnnounce (wait.created)
            # timers CreateSchedule ×1: one live schedule per question, for its next due timer (the
            #   first reminder; the second reminder and the expiry are armed as each fires)
            # ledger TransactWriteItems: the question delivered and the thread interrupted, together
            # -- the runner's resume run --
            # ledger GetItem: the answer, read from the ledger (the only source of answers), at once
            #   with the ledger UpdateItem: the thread is running (resume_if_waiting)
            # checkpoints Query, GetItem, Query, GetItem: last checkpoint, its chunk, its writes, their
            #   chunk (the first read started at once with the two above)
            # checkpoints PutItem ×2: the final checkpoint and its chunk
            # timers DeleteSchedule ×1: the question is decided, its one live schedule goes
            # ledger TransactWriteItems: the question resumed and the thread done, together
            ("runner", "ledger", "dynamodb.UpdateItem"): 2 + 1,
            ("runner", "ledger", "dynamodb.PutItem"): 1,
            ("runner", "ledger", "dynamodb.GetItem"): 1,
            ("runner", "ledger", "dynamodb.TransactWriteItems"): 1 + 1,
            ("runner", "checkpoints", "dynamodb.Query"): 1 + 2,
            ("runner", "checkpoints", "dynamodb.PutItem"): 4 + 2,
            ("runner", "checkpoints", "dynamodb.GetItem"): 2,
            ("runner", "wait-created", "sns.Publish"): 1,
            ("runner", "outbox.fifo", "sqs.SendMessage"): 1,
            ("runner", "timers", "scheduler.CreateSchedule"): 1,
            ("runner", "timers", "scheduler.DeleteSchedule"): 1,
            ("runner", "policies", "dynamodb.Query"): 1,
        }
    )
    assert _by_function(calls) == hand


def test_at_the_rate_the_whole_stream_goes_to_the_dispatcher_again_in_the_batches_the_rate_fills(
    one_question: capacity_report.Sample,
) -> None:
    replay = one_question.at_rate
    sample = [i for i in one_question.invocations if i.function == "dispatcher"]
    records = sum(i.records for i in sample)
    calls, _ = capacity_report.counted(one_question)
    ledger_wru = capacity_report.ledger_wru_per_question(calls, one_question.ledger_table, 1)
    # At 1,000 questions a second a batch holds at least 54 records: one question's stream is one batch
    assert replay is not None and replay.size == capacity_report.batch_at_rate(records, ledger_wru, 1000)
    assert replay.size >= records and len(sample) > 1
    assert [(i.function, i.records) for i in replay.invocations] == [(capacity_report.AT_RATE_BATCH, records)]
    # The same messages as the sample's batches sent, on resources named for the sample's
    made = _by_function(replay.calls)
    assert made == Counter(
        {
            # the start and the resume: a thread's messages in calls of their own, in order
            (capacity_report.AT_RATE_BATCH, "inbox.fifo", "sqs.SendMessageBatch"): 2,
            # the three resolution events, one thread: one a call to the FIFO outbox, one call to the topic
            (capacity_report.AT_RATE_BATCH, "outbox.fifo", "sqs.SendMessageBatch"): 3,
            (capacity_report.AT_RATE_BATCH, "wait-created", "sns.PublishBatch"): 1,
            # the raise and the answer counted in the batch's one transaction, the time to answer's max
            (capacity_report.AT_RATE_BATCH, "stats", "dynamodb.TransactWriteItems"): 1,
            (capacity_report.AT_RATE_BATCH, "stats", "dynamodb.UpdateItem"): 1,
        }
    )
    # and the request units it charged are the sample's tables' (the counters' markers and cells)
    assert {u.where for c in replay.calls for u in c.usage} == {"capacity-stats"}
    assert replay.log_bytes > 0
    # and its one batch holds both archive records of the decided question: one PutRecordBatch
    assert replay.archive_puts == [len(one_question.archive_records)] == [2]


def test_the_archive_records_are_counted_for_firehose(one_question: capacity_report.Sample) -> None:
    # The question's first decided state (answered) and its move to resumed each change what a
    # decided question holds: two records.
    # They leave in two stream batches (the resume is written after the answer's batch sent it):
    # one PutRecordBatch each, one record each. Each is under 5 KB, so Firehose bills each as 5 KB.
    assert len(one_question.archive_records) == 2
    assert one_question.archive_puts == [1, 1]
    assert all(0 < size <= capacity_report.FIREHOSE_RECORD_ROUNDING for size in one_question.archive_records)
    per_q = capacity_report.analyse(one_question, 1000, answer_after=None).per_question
    assert per_q.firehose_billed_bytes == 2 * capacity_report.FIREHOSE_RECORD_ROUNDING


def test_one_question_writes_each_index_as_counted_by_hand(one_question: capacity_report.Sample) -> None:
    calls, _ = capacity_report.counted(one_question)
    ledger = one_question.ledger_table
    index_writes = Counter(
        u.where.removeprefix(ledger + "/") for c in calls for u in c.usage if "/" in u.where
    )

    # The question item is in both indexes from its PutItem on. by-status is keyed on
    # `<listing>#<shard>`: every open status (raised, delivered) is the `open` listing, so a move
    # between them updates the entry in place; a move out of it (answered, resumed) deletes the old
    # entry and puts the new one. It projects only the listed attributes (INCLUDE), so a write
    # changing none of them writes it not. by-thread holds the keys alone (KEYS_ONLY), and a
    # question's keys never change: only its first write writes it.
    #   PutItem (raised):                          by-status put             by-thread put
    #   TransactWriteItems delivered (open → open): by-status update         none
    #   UpdateItem answered (open → answered):     by-status delete + put    none
    #   UpdateItem resume enqueued (not listed):   none                      none
    #   TransactWriteItems resumed:                by-status delete + put    none
    # The thread item and the run record carry neither index's keys: no index write.
    assert index_writes == Counter({"by-status": 1 + 1 + 2 + 2, "by-thread": 1})


def test_one_question_is_timed_and_attributed(one_question: capacity_report.Sample) -> None:
    functions = Counter(i.function for i in one_question.invocations)
    routes = sorted(i.route for i in one_question.invocations if i.route)

    # Three api requests, a start run and a resume run; no timer was due before the answer. The
    # dispatcher is invoked once per batch of the ledger's stream: how the records fall into batches
    # is the reader's timing, so only its presence is pinned here.
    dispatcher = functions.pop("dispatcher", 0)
    assert functions == Counter({"api": 3, "runner": 2})
    assert dispatcher >= 1
    assert routes == [
        "GET /questions/{question_id}",
        "POST /questions/{question_id}/reply",
        "POST /threads/{thread_id}/runs",
    ]
    thread_id = next(iter(set(one_question.per_thread_ids.values())))
    assert {i.question for i in one_question.invocations} == {thread_id}
    # The handlers logged, and the logs were counted, not printed.
    assert one_question.log_bytes["runner"] > 0
    assert one_question.log_bytes["dispatcher"] > 0
    # Each invocation's CPU time was measured, and its calls listed for the duration model: the
    # start's api request made one call (the ledger's TransactWriteItems), its archive puts are
    # the dispatcher's.
    assert all(i.cpu_seconds is not None and i.cpu_seconds > 0 for i in one_question.invocations)
    [start] = [i for i in one_question.invocations if i.route == "POST /threads/{thread_id}/runs"]
    assert start.calls == ("dynamodb.TransactWriteItems",)
    dispatcher_calls = [c for i in one_question.invocations if i.function == "dispatcher" for c in i.calls]
    assert dispatcher_calls.count("firehose.PutRecordBatch") == 2


def test_each_key_the_question_alone_writes_is_counted_as_its_own(
    one_question: capacity_report.Sample,
) -> None:
    # The question's item, its thread's and its run's (whose id the api names to nobody: the
    # sample reads it from the ledger) are one question's keys, whatever the rate; the listing's
    # shards and the counters' are shared, even where this one question was their only writer.
    parts = capacity_report.partitions(one_question.calls)
    own = {
        key
        for (_, key), part in parts.items()
        if capacity_report.per_question_key(part, one_question.per_thread_ids)
    }
    assert {key.split(":")[0] for key in own} >= {"wait.created", "thread", "run"}
    assert not [key for key in own if key.startswith(("stats#", "open#", "answered#", "resumed#"))]
