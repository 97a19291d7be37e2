"""The ledger's stream and its dispatcher: what follows a committed write, at least once, never twice.

DESIGN.md ("Decisions for production"): "Whatever must follow an accepted reply or start (the resume
or start message, ...) follows from the ledger's DynamoDB stream, at least once, deduplicated
downstream (FIFO deduplication id = question or run id)".
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError

from agent_wait_cli.local.streams import StreamReader, lambda_record
from wait_service.ledger import Ledger
from wait_service.observability import logger
from wait_service.stream.dispatcher import build_ledger_stream
from wait_service.stream.ledger_stream import LedgerChange, LedgerStream, OutboxDispatcher

if TYPE_CHECKING:
    from service_events import Aws, FakeClock

    from wait_service.http.api import WaitApi

APPROVE = {"action": "approve"}


def stream_records(aws: Aws) -> list[dict[str, Any]]:
    """Every record of the ledger's stream, from its start, shaped as Lambda hands them over."""
    arn = aws.resources.ledger_stream_arn
    shard = aws.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = aws.streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")[
        "ShardIterator"
    ]
    return [lambda_record(r, arn) for r in aws.streams.get_records(ShardIterator=iterator)["Records"]]


def inbox(aws: Aws) -> list[dict[str, Any]]:
    """Receive (and delete) what is on the inbox, with its FIFO attributes."""
    found: list[dict[str, Any]] = []
    while got := aws.sqs.receive_message(
        QueueUrl=aws.resources.inbox_url, MaxNumberOfMessages=10, AttributeNames=["All"]
    ).get("Messages", []):
        for message in got:
            found.append({"body": json.loads(message["Body"]), **message["Attributes"]})
            aws.sqs.delete_message(QueueUrl=aws.resources.inbox_url, ReceiptHandle=message["ReceiptHandle"])
    return found


def fail_sends(aws: Aws, times: int) -> list[int]:
    """Make the next ``times`` sends of ``aws.sqs`` (one by one or in a batch) fail as an SQS outage would."""
    failed = [0]

    def refuse(**_: Any) -> None:
        if failed[0] < times:
            failed[0] += 1
            raise ClientError({"Error": {"Code": "InternalFailure", "Message": "injected"}}, "SendMessage")

    for action in ("SendMessage", "SendMessageBatch"):
        aws.sqs.meta.events.register(f"before-call.sqs.{action}", refuse)
    return failed


def test_a_start_is_one_write_and_its_message_comes_from_the_stream(aws: Aws, api: WaitApi) -> None:
    # When a run is started
    api.runs.start("t-1", {"customer": "c-17", "amount": 40})

    # Then the api sent nothing; the ledger holds the run queued and its start record
    assert inbox(aws) == []
    thread = api.ledger.get_thread("t-1")
    assert thread.run_status == "queued"
    run_id = aws.dynamodb.get_item(
        TableName=aws.resources.ledger_table, Key={"dedupe_key": {"S": "thread:t-1"}}
    )["Item"]["latest_run"]["S"]
    record = aws.dynamodb.get_item(
        TableName=aws.resources.ledger_table, Key={"dedupe_key": {"S": f"run:{run_id}"}}
    )
    assert json.loads(record["Item"]["input"]["S"]) == {"customer": "c-17", "amount": 40}

    # When the dispatcher reads the stream: the start message, deduplicated by the run's id
    aws.dispatch()
    [message] = inbox(aws)
    assert message["body"] == {
        "thread_id": "t-1",
        "run_id": run_id,
        "input": {"customer": "c-17", "amount": 40},
    }
    assert (message["MessageGroupId"], message["MessageDeduplicationId"]) == ("t-1", f"run:t-1:{run_id}")


def test_a_refused_start_records_nothing_for_the_stream(aws: Aws, api: WaitApi) -> None:
    from agent_wait.errors import ThreadBusyError

    # Given a thread parked on a question
    aws.raise_question("t-1", "q-1")
    api.ledger.thread_interrupted("t-1", ["q-1"])

    # When a run is started on it: 409, and no run record reaches the stream
    with pytest.raises(ThreadBusyError):
        api.runs.start("t-1", {"customer": "c-17", "amount": 40})
    assert not [r for r in stream_records(aws) if r["dynamodb"]["Keys"]["dedupe_key"]["S"].startswith("run:")]
    aws.dispatch()
    assert inbox(aws) == []


def test_only_the_change_that_decides_a_question_sends_its_resume(aws: Aws, api: WaitApi) -> None:
    # Given a question raised, delivered, answered, resumed: four writes on its item
    envelope = aws.raise_question("t-1", "q-1")
    api.ledger.mark_delivered("q-1", ["dynamodb"])
    api.replies.reply("q-1", APPROVE, principal="ann", if_match=f'"{envelope.digest}"')
    api.ledger.mark_resumed(api.ledger.get_question("q-1"))

    # When the dispatcher reads them all
    aws.dispatch()
    aws.dispatch()

    # Then exactly one resume was sent, for the answer
    assert [m["body"] for m in inbox(aws)] == [{"thread_id": "t-1", "question_id": "q-1"}]
    changes = [LedgerChange.from_record(r) for r in stream_records(aws)]
    assert [c.decided for c in changes if c.kind == "question"].count(True) == 1


def test_a_failing_enqueue_is_retried_from_the_stream_until_it_goes(aws: Aws, api: WaitApi) -> None:
    # Given an answer recorded and every send failing for a while
    envelope = aws.raise_question("t-1", "q-1")
    api.replies.reply("q-1", APPROVE, principal="ann", if_match=f'"{envelope.digest}"')
    failed = fail_sends(aws, 3)
    service = build_ledger_stream(aws.settings, dynamodb=aws.dynamodb, sqs=aws.sqs, sns=aws.sns)
    reader = StreamReader(
        aws.streams,
        aws.resources.ledger_stream_arn,
        lambda event, context: _handle(event, context, service),
        max_retry_attempts=5,
    )

    # When the mapping reads the stream: each failed batch is retried, halved, from the failure
    reader.drain()

    # Then the resume went once the queue took sends again, with no client (a batch's sends are the
    # inbox's resume and the outbox's event: the first failed batch failed both, the second one)
    assert failed[0] == 3 and reader.failed_batches == 2
    assert [m["body"] for m in inbox(aws)] == [{"thread_id": "t-1", "question_id": "q-1"}]


def test_a_record_handled_twice_sends_one_message(aws: Aws, api: WaitApi) -> None:
    # Given a decided question and a started run, both dispatched
    envelope = aws.raise_question("t-1", "q-1")
    api.replies.reply("q-1", APPROVE, principal="ann", if_match=f'"{envelope.digest}"')
    api.runs.start("t-2", {"customer": "c-17", "amount": 40})
    event = {"Records": stream_records(aws)}
    service = build_ledger_stream(aws.settings, dynamodb=aws.dynamodb, sqs=aws.sqs, sns=aws.sns)

    # When the whole batch is handled twice (a mapping's retry after a timeout)
    assert _handle(event, None, service) == {"batchItemFailures": []}
    assert _handle(event, None, service) == {"batchItemFailures": []}

    # Then the FIFO deduplication ids (the question's, the run's) keep one message each
    messages = inbox(aws)
    by_thread = {m["body"]["thread_id"]: m["body"] for m in messages}
    assert len(messages) == len(by_thread) == 2
    assert by_thread["t-1"] == {"thread_id": "t-1", "question_id": "q-1"}
    assert by_thread["t-2"]["input"] == {"customer": "c-17", "amount": 40}


def _sqs_calls(aws: Aws) -> list[str]:
    calls: list[str] = []
    aws.sqs.meta.events.register("before-call.sqs.*", lambda model, **_: calls.append(model.name))
    return calls


def logged(caplog: pytest.LogCaptureFixture, message: str) -> list[dict[str, Any]]:
    """The fields of the service's log lines with ``message`` (their extras among them)."""
    return [vars(record) for record in caplog.records if record.getMessage() == message]


def test_a_batch_of_starts_goes_in_batch_calls_with_each_threads_runs_in_order(
    aws: Aws, api: WaitApi, caplog: pytest.LogCaptureFixture
) -> None:
    # Given 12 threads started, the first of them twice (its second run queued behind the first)
    for n in range(12):
        api.runs.start(f"t-{n}", {"customer": "c-17", "amount": n})
    api.runs.start("t-0", {"customer": "c-17", "amount": 100})
    event = {"Records": stream_records(aws)}
    service = build_ledger_stream(aws.settings, dynamodb=aws.dynamodb, sqs=aws.sqs, sns=aws.sns)
    calls = _sqs_calls(aws)

    # When the dispatcher handles them as one batch
    with caplog.at_level(logging.INFO, logger=logger.name):
        assert _handle(event, None, service) == {"batchItemFailures": []}

    # Then 13 start messages went in batch calls of up to 10, never two of one thread in a call
    assert calls == ["SendMessageBatch", "SendMessageBatch"]
    messages = inbox(aws)
    assert len(messages) == 13
    first = [m["body"]["input"]["amount"] for m in messages if m["body"]["thread_id"] == "t-0"]
    assert first == [0, 100]
    # And one log line says so for the batch, its ids in the records' order
    [line] = logged(caplog, "starts enqueued")
    assert line["count"] == 13
    assert line["thread_ids"] == [f"t-{n}" for n in range(12)] + ["t-0"]
    assert sorted(line["run_ids"]) == sorted(m["body"]["run_id"] for m in messages)


def test_a_start_the_inbox_refuses_in_a_batch_is_retried_from_its_record_and_nothing_is_lost(
    aws: Aws, api: WaitApi
) -> None:
    from sends import refuse_entries

    # Given 6 threads started, and the inbox refusing t-3's start once within a batch call that
    # takes the others
    for n in range(6):
        api.runs.start(f"t-{n}", {"customer": "c-17", "amount": n})
    refused = refuse_entries(aws.sqs, "SendMessageBatch", lambda e: '"t-3"' in e["MessageBody"])
    records = stream_records(aws)
    service = build_ledger_stream(aws.settings, dynamodb=aws.dynamodb, sqs=aws.sqs, sns=aws.sns)

    # When the dispatcher handles the batch
    response = _handle({"Records": records}, None, service)

    # Then the batch is retried from t-3's run record, not from its first
    [failure] = response["batchItemFailures"]
    [t3] = [
        r["dynamodb"]["SequenceNumber"]
        for r in records
        if r["eventName"] == "INSERT"
        and r["dynamodb"]["NewImage"].get("thread_id", {}).get("S") == "t-3"
        and r["dynamodb"]["Keys"]["dedupe_key"]["S"].startswith("run:")
    ]
    assert len(refused) == 1 and failure["itemIdentifier"] == t3

    # When the mapping retries from there: every start is on the inbox once
    retried = [r for r in records if int(r["dynamodb"]["SequenceNumber"]) >= int(t3)]
    assert _handle({"Records": retried}, None, service) == {"batchItemFailures": []}
    assert sorted(m["body"]["thread_id"] for m in inbox(aws)) == [f"t-{n}" for n in range(6)]


def test_a_second_message_for_a_run_is_refused_by_the_run_record(
    aws: Aws, api: WaitApi, clock: FakeClock
) -> None:
    # Given a run queued (its record written)
    api.runs.start("t-1", {"customer": "c-17", "amount": 40})
    aws.dispatch()
    [message] = inbox(aws)
    run_id = message["body"]["run_id"]
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)

    # Then the first message to reach the runner claims it; its own redelivery may run again
    assert ledger.claim_run(run_id, "m-1")
    assert ledger.claim_run(run_id, "m-1")
    # And a second message for the same run (past the FIFO window) is a duplicate
    assert not ledger.claim_run(run_id, "m-2")
    # A run with no record (a message written by hand) is not checked
    assert ledger.claim_run("01HANDWRITTEN", "m-3")


def test_a_failing_consumer_fails_only_its_record_and_later_consumers_plug_in(aws: Aws, api: WaitApi) -> None:
    seen: list[str] = []

    class Broken:
        name = "broken"

        def handle(self, change: LedgerChange) -> None:
            if change.key == "thread:t-bad":
                raise RuntimeError("injected")

    class Recording:
        name = "recording"

        def handle(self, change: LedgerChange) -> None:
            seen.append(change.key)

    api.runs.start("t-ok", {"customer": "c-17", "amount": 40})
    api.runs.start("t-bad", {"customer": "c-17", "amount": 40})
    records = stream_records(aws)
    stream = LedgerStream([OutboxDispatcher(api.ledger, _inbox(aws)), Broken(), Recording()])

    response = _handle({"Records": records}, None, stream)

    failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
    bad = [
        r["dynamodb"]["SequenceNumber"]
        for r in records
        if r["dynamodb"]["Keys"]["dedupe_key"]["S"] == "thread:t-bad"
    ]
    assert failed == bad
    assert "thread:t-ok" in seen and "thread:t-bad" not in seen


def test_a_record_that_is_not_a_ledger_change_is_skipped_not_retried(aws: Aws) -> None:
    service = build_ledger_stream(aws.settings, dynamodb=aws.dynamodb, sqs=aws.sqs, sns=aws.sns)
    record = {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "7", "Keys": {"pk": {"S": "x"}}}}

    assert _handle({"Records": [record]}, None, service) == {"batchItemFailures": []}


def _inbox(aws: Aws) -> Any:
    from wait_service.runs.inbox import Inbox

    return Inbox(aws.resources.inbox_url, aws.sqs)


def _handle(event: dict[str, Any], context: Any, service: LedgerStream) -> Any:
    from service_events import load_handler

    return load_handler("dispatcher").handle(event, context, service)


class _Gathering:
    """A batch consumer that gathers every change and writes them in ``flush`` through ``write``."""

    def __init__(self, name: str, write: Any) -> None:
        self.name = name
        self.write = write
        self.changes: list[str] = []
        self.written: list[str] = []

    @property
    def pending(self) -> int:
        return len(self.changes)

    def handle(self, change: LedgerChange) -> None:
        self.changes.append(change.sequence_number)

    def flush(self) -> None:
        changes, self.changes = self.changes, []
        self.write()
        self.written += changes


def test_the_consumers_write_a_batchs_work_at_once(aws: Aws, api: WaitApi) -> None:
    import threading

    # Given two batch consumers whose writes each wait for the other's to have started
    both = threading.Barrier(2, timeout=10)
    first, second = _Gathering("first", both.wait), _Gathering("second", both.wait)
    api.runs.start("t-1", {"customer": "c-17", "amount": 40})
    records = stream_records(aws)

    # When a batch is handled: neither write could finish had they run one after the other
    assert _handle({"Records": records}, None, LedgerStream([first, second])) == {"batchItemFailures": []}

    # Then both wrote the whole batch
    assert first.written == second.written == [r["dynamodb"]["SequenceNumber"] for r in records]


def test_a_consumer_failing_its_write_at_once_with_others_has_its_records_retried_and_theirs_kept(
    aws: Aws, api: WaitApi
) -> None:
    def broken() -> None:
        raise RuntimeError("injected: the counters' table is unavailable")

    ok, failing = _Gathering("ok", lambda: None), _Gathering("failing", broken)
    api.runs.start("t-1", {"customer": "c-17", "amount": 40})
    records = stream_records(aws)

    response = _handle({"Records": records}, None, LedgerStream([ok, failing]))

    # The batch is retried from the failing consumer's first record; the other's work is written
    assert response["batchItemFailures"] == [{"itemIdentifier": records[0]["dynamodb"]["SequenceNumber"]}]
    assert ok.written == [r["dynamodb"]["SequenceNumber"] for r in records]
    assert failing.written == []
