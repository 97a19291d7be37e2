"""Resolution events: one per end of a question or run, from the ledger's stream, on both sinks.

DESIGN.md ("Decisions for production"): "Whatever must follow an accepted reply or start (the
resume or start message, the resolution events, ...) follows from the ledger's DynamoDB stream, at
least once, deduplicated downstream (FIFO deduplication id = question or run id; event
`dedupe_key`)."
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError

from agent_wait import OnExpiry, Policy
from agent_wait.aws import SnsAnnounce, SqsAnnounce
from agent_wait.errors import AgentWaitError
from agent_wait.events import parse_event
from agent_wait_cli.local.streams import StreamReader
from wait_service.ledger.attributes import iso
from wait_service.lifecycle.timers import TimerEvent
from wait_service.lifecycle.unanswered import LifecycleService
from wait_service.observability import logger
from wait_service.stream.dispatcher import build_ledger_stream
from wait_service.stream.ledger_stream import LedgerChange, LedgerStream
from wait_service.stream.resolution_events import ResolutionEvents, events_of

if TYPE_CHECKING:
    from service_events import Aws, FakeClock

    from wait_service.http.api import WaitApi

APPROVE = {"action": "approve"}
RECEIPT = {
    "ran": True,
    "args": {"customer": "c-17", "amount": 40},
    "outcome": "returned",
    "at": "2026-11-30T10:00:05Z",
}


def redeliver(aws: Aws) -> None:
    """Hand every record of the stream, from its start, to a fresh dispatcher: a retried batch."""
    service = build_ledger_stream(aws.settings, dynamodb=aws.dynamodb, sqs=aws.sqs, sns=aws.sns)
    StreamReader(
        aws.streams,
        aws.resources.ledger_stream_arn,
        lambda event, _: [service.process(record) for record in event["Records"]],
    ).drain()


def events(aws: Aws, type_: str | None = None) -> list[dict[str, Any]]:
    """The resolution events on the outbox (each validated against its type's schema)."""
    found = [e for e in aws.outbox() if e["type"] not in ("wait.created", "wait.escalated", "wait.reminder")]
    for event in found:
        parse_event(event)
    return [e for e in found if type_ is None or e["type"] == type_]


def start_run(aws: Aws, api: WaitApi, thread_id: str) -> str:
    """Queue a run and mark it running, as the runner does when its start message arrives."""
    api.runs.start(thread_id, {"customer": "c-17", "amount": 40})
    run_id = aws.dynamodb.get_item(
        TableName=aws.resources.ledger_table, Key={"dedupe_key": {"S": f"thread:{thread_id}"}}
    )["Item"]["latest_run"]["S"]
    api.ledger.thread_running(thread_id, run_id)
    return str(run_id)


def test_an_answer_publishes_one_wait_answered_on_both_sinks_with_filter_attributes(
    aws: Aws, api: WaitApi
) -> None:
    # Given a question answered
    envelope = aws.raise_question("t-1", "q-1")
    api.replies.reply("q-1", APPROVE, principal="ann", if_match=f'"{envelope.digest}"')

    # When the dispatcher reads the stream, and the record is redelivered
    aws.dispatch()
    subscribed = aws.subscribed()
    redeliver(aws)

    # Then the outbox holds one wait.answered (FIFO drops the redelivered one) ...
    [answered] = events(aws)
    assert answered["type"] == "wait.answered"
    assert answered["dedupe_key"] == "wait.answered:q-1"
    assert (answered["answer"], answered["answered_by"], answered["digest"]) == (
        APPROVE,
        "ann",
        envelope.digest,
    )
    # ... and the topic's subscriber got it once from the first read, with the filter attributes
    [(body, attributes)] = [(b, a) for b, a in subscribed if b["type"] == "wait.answered"]
    assert body["event_id"] == answered["event_id"]
    assert attributes == {
        "type": "wait.answered",
        "dedupe_key": "wait.answered:q-1",
        "thread_id": "t-1",
        "function": "issue_refund",
        "status": "answered",
        "policy_kind": "approval",
    }


def test_wait_created_carries_the_same_filter_attributes(aws: Aws) -> None:
    envelope = aws.raise_question("t-1", "q-1")
    SnsAnnounce(aws.resources.topic_arn, client=aws.sns).deliver(envelope)
    up = envelope.follow_up("wait.escalated", 1, route="managers")
    SnsAnnounce(aws.resources.topic_arn, client=aws.sns).deliver(up)

    [(_, created), (_, escalated)] = aws.subscribed()

    assert {k: created[k] for k in ("type", "function", "status", "policy_kind")} == {
        "type": "wait.created",
        "function": "issue_refund",
        "status": "raised",
        "policy_kind": "approval",
    }
    assert (escalated["type"], escalated["status"], escalated["route"]) == (
        "wait.escalated",
        "escalated",
        "managers",
    )


def test_a_redelivered_resume_publishes_one_wait_resumed_with_its_receipt(aws: Aws, api: WaitApi) -> None:
    # Given an answered question whose resume message is handled twice (the second finds it resumed)
    envelope = aws.raise_question("t-1", "q-1")
    api.replies.reply("q-1", APPROVE, principal="ann", if_match=f'"{envelope.digest}"')
    question = api.ledger.get_question("q-1")
    assert api.ledger.mark_resumed(question, receipt=RECEIPT) is True
    assert api.ledger.mark_resumed(question, receipt=RECEIPT) is False

    # When the dispatcher reads the stream twice over
    aws.dispatch()
    redeliver(aws)

    # Then one wait.resumed, carrying the receipt
    [resumed] = events(aws, "wait.resumed")
    assert resumed["dedupe_key"] == "wait.resumed:q-1"
    assert resumed["status"] == "resumed"
    assert resumed["receipt"] == RECEIPT | {"error": None}


def test_a_revocation_publishes_one_wait_revoked(aws: Aws, api: WaitApi) -> None:
    aws.raise_question("t-1", "q-1")
    api.replies.revoke("q-1", "duplicate request", principal="ops@example.com")
    # A second revocation loses on the ledger and records nothing
    with pytest.raises(AgentWaitError):
        api.replies.revoke("q-1", "again", principal="bob")

    aws.dispatch()
    redeliver(aws)

    [revoked] = events(aws, "wait.revoked")
    assert (revoked["reason"], revoked["revoked_by"]) == ("duplicate request", "ops@example.com")
    assert [e["type"] for e in events(aws)] == []  # drained above: nothing else


@pytest.mark.parametrize(
    ("on_expiry", "applied", "answer"),
    [
        (None, False, {"action": "reject", "reason": "expired"}),
        (OnExpiry(action="default", answer={"action": "approve"}), True, {"action": "approve"}),
    ],
)
def test_an_expiry_publishes_one_wait_expired_saying_whether_the_default_applied(
    aws: Aws, api: WaitApi, clock: FakeClock, on_expiry: OnExpiry | None, applied: bool, answer: Any
) -> None:
    # Given a question with a ttl, its timer firing twice (a retried schedule)
    aws.raise_question("t-1", "q-1", policy=Policy(kind="approval", ttl=60, on_expiry=on_expiry))
    clock.advance(61)
    lifecycle = LifecycleService(
        api.ledger, SqsAnnounce(aws.resources.outbox_url, client=aws.sqs), clock=clock
    )
    lifecycle.handle(TimerEvent(question_id="q-1", timer="expire", n=0))
    lifecycle.handle(TimerEvent(question_id="q-1", timer="expire", n=0))

    aws.dispatch()
    redeliver(aws)

    [expired] = events(aws, "wait.expired")
    assert (expired["default_applied"], expired["answer"]) == (applied, answer)
    assert expired["dedupe_key"] == "wait.expired:q-1"


def test_a_failing_graph_publishes_one_thread_failed_and_one_wait_resume_failed(
    aws: Aws, api: WaitApi
) -> None:
    # Given an answered question whose resume ran a graph that raised (recorded as the runner does)
    envelope = aws.raise_question("t-1", "q-1")
    run_id = start_run(aws, api, "t-1")
    api.replies.reply("q-1", APPROVE, principal="ann", if_match=f'"{envelope.digest}"')
    question = api.ledger.get_question("q-1")
    assert api.ledger.mark_resume_failed(question, "ValueError: boom", attempts=1)
    assert not api.ledger.mark_resume_failed(question, "ValueError: boom", attempts=1)
    api.ledger.thread_failed("t-1", "ValueError: boom")

    aws.dispatch()
    redeliver(aws)

    found = events(aws)
    [failed] = [e for e in found if e["type"] == "thread.failed"]
    assert (failed["run_id"], failed["error"], failed["dedupe_key"]) == (
        run_id,
        "ValueError: boom",
        f"thread.failed:t-1:{run_id}",
    )
    [resume_failed] = [e for e in found if e["type"] == "wait.resume_failed"]
    assert (resume_failed["error"], resume_failed["attempts"]) == ("ValueError: boom", 1)


def test_a_finished_run_publishes_one_thread_done_with_its_size_and_summary(aws: Aws, api: WaitApi) -> None:
    run_id = start_run(aws, api, "t-1")
    output = json.dumps({"refund": "issued", "notes": "x" * 400})
    api.ledger.thread_done("t-1", output)

    aws.dispatch()
    redeliver(aws)

    [done] = events(aws, "thread.done")
    assert done["output_bytes"] == len(output.encode())
    assert done["summary"] == output[:200] + "…"
    assert done["dedupe_key"] == f"thread.done:t-1:{run_id}"


def test_a_failing_sink_fails_the_record_and_the_retry_publishes_the_event(
    aws: Aws, api: WaitApi, clock: FakeClock
) -> None:
    # Given an answer, and the topic refusing the first publish
    envelope = aws.raise_question("t-1", "q-1")
    api.replies.reply("q-1", APPROVE, principal="ann", if_match=f'"{envelope.digest}"')
    refused = [0]

    def refuse(**_: Any) -> None:
        if refused[0] == 0:
            refused[0] += 1
            raise ClientError({"Error": {"Code": "InternalError", "Message": "injected"}}, "Publish")

    aws.sns.meta.events.register("before-call.sns.PublishBatch", refuse)
    stream = LedgerStream(
        [
            ResolutionEvents(
                [
                    SqsAnnounce(aws.resources.outbox_url, client=aws.sqs),
                    SnsAnnounce(aws.resources.topic_arn, client=aws.sns),
                ]
            )
        ]
    )
    reader = StreamReader(
        aws.streams,
        aws.resources.ledger_stream_arn,
        lambda event, _: [stream.process(record) for record in event["Records"]],
        max_retry_attempts=3,
    )

    # When the mapping reads the stream: the failed record is retried
    reader.drain()

    # Then the topic got the event on the retry, and the outbox holds it once
    assert refused[0] == 1 and reader.failed_batches == 1
    assert [b["type"] for b, _ in aws.subscribed()] == ["wait.answered"]
    assert [e["type"] for e in events(aws)] == ["wait.answered"]


def test_an_event_the_outbox_refuses_in_a_batch_stops_the_topic_there_and_the_retry_delivers_each_once(
    aws: Aws, api: WaitApi, caplog: pytest.LogCaptureFixture
) -> None:
    from sends import refuse_entries
    from test_service_ledger_stream import _handle, logged, stream_records

    caplog.set_level(logging.INFO, logger=logger.name)

    # Given five questions of five threads answered, and the outbox refusing q-2's event once in
    # a batch call that takes the others
    for n in range(5):
        envelope = aws.raise_question(f"t-{n}", f"q-{n}")
        api.replies.reply(f"q-{n}", APPROVE, principal="ann", if_match=f'"{envelope.digest}"')
    refused = refuse_entries(aws.sqs, "SendMessageBatch", lambda e: '"wait.answered:q-2"' in e["MessageBody"])
    records = stream_records(aws)
    service = build_ledger_stream(aws.settings, dynamodb=aws.dynamodb, sqs=aws.sqs, sns=aws.sns)

    # When the dispatcher handles them as one batch
    response = _handle({"Records": records}, None, service)

    # Then the batch is retried from q-2's answer, and the topic got only the events before it
    [q2] = [
        r["dynamodb"]["SequenceNumber"]
        for r in records
        if r["dynamodb"]["Keys"]["dedupe_key"]["S"] == "wait.created:q-2" and r["eventName"] == "MODIFY"
    ]
    assert len(refused) == 1 and response["batchItemFailures"] == [{"itemIdentifier": q2}]
    first = [b["dedupe_key"] for b, _ in aws.subscribed()]
    assert first == ["wait.answered:q-0", "wait.answered:q-1"]
    # and its log line names those two only: the others are published on the retry
    [line] = logged(caplog, "events published")
    assert (line["count"], line["dedupe_keys"], line["thread_ids"]) == (2, first, ["t-0", "t-1"])
    caplog.clear()

    # When the mapping retries from there: each event is on the outbox and on the topic once
    retried = [r for r in records if int(r["dynamodb"]["SequenceNumber"]) >= int(q2)]
    assert _handle({"Records": retried}, None, service) == {"batchItemFailures": []}
    expected = [f"wait.answered:q-{n}" for n in range(5)]
    # (q-3's and q-4's went in the call that refused q-2's: other threads, whose order is their own)
    assert sorted(e["dedupe_key"] for e in events(aws)) == expected
    assert first + [b["dedupe_key"] for b, _ in aws.subscribed()] == expected
    [line] = logged(caplog, "events published")
    assert line["dedupe_keys"] == expected[2:]


def test_unrelated_changes_publish_nothing(aws: Aws, api: WaitApi) -> None:
    aws.raise_question("t-1", "q-1")
    api.ledger.mark_delivered("q-1", ["dynamodb"])
    api.runs.start("t-2", {"customer": "c-17", "amount": 40})
    api.ledger.thread_interrupted("t-2", ["q-1"])

    aws.dispatch()

    assert events(aws) == []


def test_event_time_is_the_ledger_write_time(aws: Aws, api: WaitApi, clock: FakeClock) -> None:
    envelope = aws.raise_question("t-1", "q-1")
    clock.advance(5)
    api.replies.reply("q-1", APPROVE, principal="ann", if_match=f'"{envelope.digest}"')
    aws.dispatch()
    [answered] = events(aws, "wait.answered")
    assert answered["occurred_at"] == iso(clock.now)


def test_a_resume_whose_graph_raises_publishes_its_failure_events_once(aws: Aws, clock: FakeClock) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from test_service_runner import failing_runner

    from wait_service.ledger import Ledger
    from wait_service.runs.inbox import ResumeMessage
    from wait_service.runs.runner import build_runner

    # Given an answered question whose thread's graph raises when resumed, the message handled twice
    runner = build_runner(
        aws.settings,
        dynamodb=aws.dynamodb,
        sns=aws.sns,
        sqs=aws.sqs,
        checkpointer=InMemorySaver(),
        clock=clock,
    )
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)
    aws.raise_question("t-1", "q-1")
    ledger.record_answer("q-1", APPROVE, answered_by="ann")
    service, _ = failing_runner(runner, {"t-1"}, pending=("q-1",))
    message = ResumeMessage(thread_id="t-1", question_id="q-1")
    assert service.run(message).status == "failed"
    service.run(message)

    # When the dispatcher reads the stream, twice over
    aws.dispatch()
    redeliver(aws)

    # Then one wait.resume_failed (one attempt: a graph's error is not retried) and one thread.failed
    found = events(aws)
    [resume_failed] = [e for e in found if e["type"] == "wait.resume_failed"]
    assert (resume_failed["attempts"], resume_failed["error"]) == (1, "Boom: model unavailable for t-1")
    [failed] = [e for e in found if e["type"] == "thread.failed"]
    assert failed["error"] == "Boom: model unavailable for t-1"
    assert [e["type"] for e in found].count("wait.answered") == 1


def test_a_resume_failing_every_attempt_publishes_one_resume_failed_with_its_attempts(
    aws: Aws, clock: FakeClock
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from test_service_runner import THROTTLED, failing_runner

    from wait_service.ledger import Ledger
    from wait_service.runs.inbox import ResumeMessage
    from wait_service.runs.runner import build_runner

    runner = build_runner(
        aws.settings,
        dynamodb=aws.dynamodb,
        sns=aws.sns,
        sqs=aws.sqs,
        checkpointer=InMemorySaver(),
        clock=clock,
    )
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)
    aws.raise_question("t-1", "q-1")
    ledger.record_answer("q-1", APPROVE, answered_by="ann")
    service, _ = failing_runner(runner, {"t-1"}, error=THROTTLED, pending=("q-1",))
    message = ResumeMessage(thread_id="t-1", question_id="q-1")
    # Every attempt is throttled; retries publish nothing, the last attempt records the failure
    for attempt in (1, 2, 3):
        with pytest.raises(ClientError):
            service.run(message, receive_count=attempt)

    aws.dispatch()

    found = events(aws)
    [resume_failed] = [e for e in found if e["type"] == "wait.resume_failed"]
    assert resume_failed["attempts"] == 3
    assert [e["type"] for e in found].count("thread.failed") == 1


def latest_run(aws: Aws, thread_id: str) -> str:
    item = aws.dynamodb.get_item(
        TableName=aws.resources.ledger_table, Key={"dedupe_key": {"S": f"thread:{thread_id}"}}
    )["Item"]
    return str(item["latest_run"]["S"])


def test_a_run_ending_with_a_later_run_queued_publishes_its_thread_done_once(aws: Aws, api: WaitApi) -> None:
    # Given a running run, and a second run accepted on the thread behind it
    first = start_run(aws, api, "t-1")
    api.runs.start("t-1", {"customer": "c-18", "amount": 5})
    second = latest_run(aws, "t-1")
    assert second != first
    # When the first run ends: the thread stays `queued` for the second
    ended = api.ledger.thread_done("t-1", json.dumps({"refund": "issued"}))
    assert ended.run_status == "queued"
    # and the second runs and ends
    api.ledger.thread_running("t-1", second)
    api.ledger.thread_done("t-1", json.dumps({"refund": "refused", "notes": "late"}))
    aws.dispatch()
    redeliver(aws)

    # Then each end is published once, under its own run id (the second's start publishes nothing)
    first_done, second_done = events(aws)
    assert (first_done["type"], first_done["dedupe_key"]) == ("thread.done", f"thread.done:t-1:{first}")
    assert first_done["output_bytes"] == len(json.dumps({"refund": "issued"}).encode())
    assert (second_done["type"], second_done["dedupe_key"]) == ("thread.done", f"thread.done:t-1:{second}")
    assert second_done["summary"] == json.dumps({"refund": "refused", "notes": "late"})


def test_a_failing_graph_with_a_later_run_queued_publishes_its_thread_failed_once(
    aws: Aws, api: WaitApi
) -> None:
    first = start_run(aws, api, "t-1")
    api.runs.start("t-1", {"customer": "c-18", "amount": 5})
    ended = api.ledger.thread_failed("t-1", "ValueError: boom")
    assert ended.run_status == "queued"
    aws.dispatch()
    redeliver(aws)

    [failed] = events(aws)
    assert (failed["type"], failed["run_id"], failed["error"], failed["dedupe_key"]) == (
        "thread.failed",
        first,
        "ValueError: boom",
        f"thread.failed:t-1:{first}",
    )


def test_a_redelivered_or_rewritten_run_end_yields_one_event_and_later_writes_none(
    aws: Aws, api: WaitApi
) -> None:
    # Given a run that failed with a later run queued behind it, its end written twice (a retried
    # message), and the later run starting
    first = start_run(aws, api, "t-1")
    api.runs.start("t-1", {"customer": "c-18", "amount": 5})
    api.ledger.thread_failed("t-1", "ValueError: boom")
    api.ledger.thread_failed("t-1", "ValueError: boom")
    api.ledger.thread_running("t-1", latest_run(aws, "t-1"))
    changes: list[LedgerChange] = []
    StreamReader(
        aws.streams,
        aws.resources.ledger_stream_arn,
        lambda event, _: changes.extend(LedgerChange.from_record(record) for record in event["Records"]),
    ).drain()

    # When every stream record is handled twice (a retried batch)
    keys = [event.dedupe_key for change in changes + changes for event in events_of(change)]

    # Then the run's end yields one event per handling, under one `dedupe_key`
    assert keys == [f"thread.failed:t-1:{first}"] * 2


def test_an_answer_with_numbers_no_float_holds_is_published_with_every_digit(aws: Aws, api: WaitApi) -> None:
    # Given an edit whose numbers only a Decimal holds (the api reads them so, and the ledger keeps
    # them); a dispatcher that cannot publish it would hold every later change of the stream
    from decimal import Decimal

    envelope = aws.raise_question("t-1", "q-1")
    answer = {
        "action": "approve",
        "args": {"amount": Decimal("98765432109876543210987.000000000001")},
    }
    api.replies.reply("q-1", answer, principal="ann", if_match=f'"{envelope.digest}"')

    # When the dispatcher reads the stream
    aws.dispatch()

    # Then wait.answered is on the outbox with the digits recorded, not a float's
    bodies = []
    while got := aws.sqs.receive_message(QueueUrl=aws.resources.outbox_url, MaxNumberOfMessages=10).get(
        "Messages", []
    ):
        bodies += [m["Body"] for m in got]
        for m in got:
            aws.sqs.delete_message(QueueUrl=aws.resources.outbox_url, ReceiptHandle=m["ReceiptHandle"])
    [body] = [b for b in bodies if '"wait.answered"' in b]
    assert '"amount":98765432109876543210987.000000000001' in body
    parsed = json.loads(body, parse_float=Decimal)
    assert parsed["answer"] == answer
    parse_event(json.loads(body))


def test_every_consumer_of_the_stream_takes_an_answer_only_a_decimal_holds(
    aws: Aws, api: WaitApi, tmp_path: Any
) -> None:
    # Given an answer with a number no float holds, and the dispatcher with every consumer it has
    # deployed (the outbox, the events, the archive, the analytics when its table is set)
    from decimal import Decimal

    envelope = aws.raise_question("t-1", "q-1")
    amount = Decimal("98765432109876543210987.000000000001")
    answer = {"action": "approve", "args": {"amount": amount}}
    api.replies.reply("q-1", answer, principal="ann", if_match=f'"{envelope.digest}"')
    settings = aws.settings.model_copy(update={"archive_dir": str(tmp_path)})
    service = build_ledger_stream(settings, dynamodb=aws.dynamodb, sqs=aws.sqs, sns=aws.sns)

    # When the stream is read, then no consumer fails on it ...
    StreamReader(
        aws.streams,
        aws.resources.ledger_stream_arn,
        lambda event, _: [service.process(record) for record in event["Records"]],
    ).drain()

    # ... the resume is on the inbox, and the archive holds the digits
    assert [m["question_id"] for m in aws.inbox_messages() if "question_id" in m] == ["q-1"]
    [line] = [
        json.loads(text, parse_float=Decimal)
        for path in tmp_path.rglob("*.jsonl")
        for text in path.read_text().splitlines()
    ]
    assert json.loads(line["answer"], parse_float=Decimal)["args"]["amount"] == amount
