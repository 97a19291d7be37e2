"""``agent_wait_cli.dlq`` against moto: what a redrive sends where, and what it refuses."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from agent_wait_cli.dlq import DEDUPLICATION_WINDOW_SECONDS, DeadLetters, DlqError, LambdaInvoker
from agent_wait_cli.local.clock import destination_record
from wait_service.resources import LIFECYCLE_DLQ, OUTBOX, TIMERS, dead_letter_queues

if TYPE_CHECKING:
    from wait_service.resources import LocalResources

pytestmark = pytest.mark.integration


@dataclass
class Invocations:
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def invoke(self, function_name: str, payload: Any) -> None:
        self.calls.append((function_name, payload))


def prefix_of(resources: LocalResources) -> str:
    return resources.ledger_table.removesuffix("ledger")


def dead_letter(sqs: Any, url: str, dlq_url: str, body: str, group: str, dedup: str) -> None:
    """Send a message and receive it until the queue moves it to its DLQ (maxReceiveCount)."""
    sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group, MessageDeduplicationId=dedup)
    for _ in range(OUTBOX.max_receive_count + 1):
        for message in sqs.receive_message(QueueUrl=url, VisibilityTimeout=0).get("Messages", []):
            assert json.loads(message["Body"])


def test_every_dlq_of_the_specs_is_found_including_ones_added_later() -> None:
    names = {spec.name: spec for spec in dead_letter_queues()}
    assert {"inbox", "outbox", "lifecycle"} <= set(names)
    assert (names["inbox"].queue_name, names["inbox"].redrive, names["inbox"].source) == (
        "inbox-dlq.fifo",
        "queue",
        "inbox.fifo",
    )
    assert names["lifecycle"] == LIFECYCLE_DLQ
    # EventBridge Scheduler's dead-letter queue of the timers: its bodies are the lifecycle's input
    assert (names["timers"].queue_name, names["timers"].redrive, names["timers"].source) == (
        TIMERS.dlq_name,
        "scheduler-target",
        LIFECYCLE_DLQ.source,
    )


def test_a_fifo_message_goes_back_with_its_group_and_deduplication_id_in_order(
    resources: LocalResources, aws_client: Any
) -> None:
    sqs = aws_client("sqs")
    # Given three envelopes of two groups that failed every receive on the outbox
    for n, group in enumerate(["g-1", "g-2", "g-1"]):
        dead_letter(
            sqs,
            resources.outbox_url,
            resources.outbox_dlq_url,
            json.dumps({"n": n}),
            group,
            f"wait.created:{n}",
        )
    sent_at = [0.0]
    dlqs = DeadLetters(sqs, prefix_of(resources), Invocations(), now=lambda: sent_at[0])
    letters = dlqs.messages("outbox")
    assert [json.loads(letter.body)["n"] for letter in letters] == [0, 1, 2]
    sent_at[0] = max(letter.sent_at or 0 for letter in letters) + DEDUPLICATION_WINDOW_SECONDS + 1

    # When all are redriven
    outcomes = dlqs.redrive(None, name="outbox")

    # Then each is back on the outbox as it was, in its order, and the DLQ is empty
    assert [o.status for o in outcomes] == ["redriven"] * 3
    back = sqs.receive_message(QueueUrl=resources.outbox_url, MaxNumberOfMessages=10, AttributeNames=["All"])[
        "Messages"
    ]
    assert [
        (
            json.loads(m["Body"])["n"],
            m["Attributes"]["MessageGroupId"],
            m["Attributes"]["MessageDeduplicationId"],
        )
        for m in back
    ] == [(0, "g-1", "wait.created:0"), (1, "g-2", "wait.created:1"), (2, "g-1", "wait.created:2")]
    assert dlqs.messages() == []


def test_looking_leaves_every_message_where_it_was(resources: LocalResources, aws_client: Any) -> None:
    sqs = aws_client("sqs")
    dead_letter(sqs, resources.outbox_url, resources.outbox_dlq_url, '{"n": 1}', "g", "d-1")
    dlqs = DeadLetters(sqs, prefix_of(resources), Invocations())

    first = dlqs.messages()
    second = dlqs.messages()

    assert [letter.message_id for letter in first] == [letter.message_id for letter in second]
    assert len(first) == 1


def test_a_destination_record_is_invoked_again_on_the_stacks_own_function_only(
    resources: LocalResources, aws_client: Any
) -> None:
    sqs = aws_client("sqs")
    prefix = prefix_of(resources)
    arn = f"arn:aws:lambda:us-east-1:123456789012:function:{prefix}lifecycle"
    timer = {"question_id": "q-1", "timer": "expire", "n": 0}
    good = destination_record(timer, RuntimeError("ledger down"), arn, 3)
    # A record put there by someone else, naming another function, must not make us invoke it
    hostile = destination_record({"x": 1}, RuntimeError("no"), arn.replace("lifecycle", "admin"), 3)
    assert resources.lifecycle_dlq_url is not None
    for record in (good, hostile):
        sqs.send_message(QueueUrl=resources.lifecycle_dlq_url, MessageBody=json.dumps(record))
    invocations = Invocations()
    dlqs = DeadLetters(sqs, prefix, invocations)
    letters = dlqs.messages("lifecycle")
    assert [letter.error() for letter in letters] == ["RuntimeError: ledger down", "RuntimeError: no"]

    outcomes = dlqs.redrive(None, name="lifecycle")

    assert [(o.status, o.letter.work()) for o in outcomes] == [("redriven", timer), ("refused", {"x": 1})]
    assert "names function" in outcomes[1].detail
    assert invocations.calls == [(f"{prefix}lifecycle", timer)]
    assert [letter.work() for letter in dlqs.messages()] == [{"x": 1}]


def scheduler_dead_letter(code: str, message: str) -> dict[str, Any]:
    """The message attributes EventBridge Scheduler puts on a dead letter (besides the input)."""
    return {
        "ERROR_CODE": {"DataType": "String", "StringValue": code},
        "ERROR_MESSAGE": {"DataType": "String", "StringValue": message},
        "RETRY_ATTEMPTS": {"DataType": "String", "StringValue": "185"},
    }


def test_a_timer_scheduler_gave_up_on_is_invoked_again_with_its_input(
    resources: LocalResources, aws_client: Any
) -> None:
    sqs = aws_client("sqs")
    prefix = prefix_of(resources)
    # Given the timers' DLQ holding a timer's input Scheduler could not deliver, and a body that is none
    timer = {"question_id": "q-1", "timer": "expire", "n": 0}
    # (the stack creates it with its schedule group; these resources have no scheduler)
    dlq_url = resources.schedule_dlq_url or sqs.create_queue(QueueName=prefix + TIMERS.dlq_name)["QueueUrl"]
    sqs.send_message(
        QueueUrl=dlq_url,
        MessageBody=json.dumps(timer),
        MessageAttributes=scheduler_dead_letter("AWS.Lambda.TooManyRequestsException", "Rate exceeded"),
    )
    sqs.send_message(QueueUrl=dlq_url, MessageBody="not a timer")
    invocations = Invocations()
    dlqs = DeadLetters(sqs, prefix, invocations)
    letters = dlqs.messages("timers")
    assert [letter.error() for letter in letters] == [
        "AWS.Lambda.TooManyRequestsException: Rate exceeded",
        None,
    ]

    # When every message of the timers' DLQ is redriven
    outcomes = dlqs.redrive(None, name="timers")

    # Then the timer is the lifecycle function's input again (the stack's own function), and the
    # message that is no timer stays where it is
    assert [(o.status, o.letter.work()) for o in outcomes] == [
        ("redriven", timer),
        ("refused", "not a timer"),
    ]
    assert outcomes[0].detail == f"invoked {prefix}lifecycle"
    assert invocations.calls == [(f"{prefix}lifecycle", timer)]
    assert [letter.work() for letter in dlqs.messages()] == ["not a timer"]


def test_an_id_in_no_dlq_is_refused_and_nothing_moves(resources: LocalResources, aws_client: Any) -> None:
    sqs = aws_client("sqs")
    dead_letter(sqs, resources.outbox_url, resources.outbox_dlq_url, '{"n": 1}', "g", "d-2")
    dlqs = DeadLetters(sqs, prefix_of(resources), Invocations(), now=lambda: 1e12)

    with pytest.raises(DlqError, match="no message nope in any dead-letter queue"):
        dlqs.redrive(["nope"])

    assert len(dlqs.messages()) == 1


# -- the ledger stream's DLQ: the batch read back from the stream, handed to the dispatcher ----------


@dataclass
class Dispatcher:
    """Lambda's ``Invoke`` of the stack's dispatcher, in process: the payload's JSON into the
    handler's ``handle`` with the consumers the function builds; a raise is a ``FunctionError``."""

    handle: Any
    service: Any
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def invoke(self, FunctionName: str, InvocationType: str, Payload: bytes) -> dict[str, Any]:  # noqa: N803
        import io

        assert InvocationType == "RequestResponse"
        event = json.loads(Payload)
        self.calls.append((FunctionName, event))
        try:
            answer = self.handle(event, None, self.service)
        except Exception as exc:
            error = {"errorType": type(exc).__name__, "errorMessage": str(exc)}
            return {
                "StatusCode": 200,
                "FunctionError": "Unhandled",
                "Payload": io.BytesIO(json.dumps(error).encode()),
            }
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer).encode())}


def failed_stream_batch(resources: LocalResources, aws_client: Any) -> dict[str, Any]:
    """A question answered, then the dispatcher failing on its stream records every attempt: the
    on-failure record of that real batch lands in the ledger stream's DLQ. Returns the batch info."""
    from agent_wait import Question, approval, build_envelope
    from agent_wait.aws import DynamoDbAnnounce
    from agent_wait_cli.local.streams import StreamReader
    from wait_service.answers.replies import ReplyService
    from wait_service.ledger import Ledger

    envelope = build_envelope(
        "t-stream", Question(question_id="q-stream", question={"ask": "refund?"}, policy=approval(ttl=3600))
    )
    DynamoDbAnnounce(resources.ledger_table, client=aws_client("dynamodb")).deliver(envelope)
    ReplyService(Ledger(resources.ledger_table, aws_client("dynamodb"))).reply(
        "q-stream", {"action": "approve"}, principal="ops", if_match=f'"{envelope.digest}"'
    )

    def inbox_down(event: Any, context: Any) -> Any:
        raise RuntimeError("inbox unreachable")

    assert resources.ledger_stream_arn is not None and resources.stream_dlq_url is not None
    reader = StreamReader(
        aws_client("dynamodbstreams"),
        resources.ledger_stream_arn,
        inbox_down,
        batch_size=100,
        max_retry_attempts=0,
        sqs=aws_client("sqs"),
        dlq_url=resources.stream_dlq_url,
    )
    reader.drain()
    [message] = aws_client("sqs").receive_message(QueueUrl=resources.stream_dlq_url, VisibilityTimeout=0)[
        "Messages"
    ]
    info: dict[str, Any] = json.loads(message["Body"])["DDBStreamBatchInfo"]
    return info


def stream_dead_letters(resources: LocalResources, aws_client: Any) -> tuple[DeadLetters, Dispatcher]:
    from pathlib import Path

    from agent_wait_cli.local.runtime import load_handler
    from wait_service.settings import Settings
    from wait_service.stream.dispatcher import build_ledger_stream

    handle = load_handler(
        Path(__file__).parents[2] / "functions" / "dispatcher" / "handler.py",
        "agent_wait_test_dispatcher_handler",
        "handle",
    )
    service = build_ledger_stream(
        Settings.from_env(resources.env()),
        dynamodb=aws_client("dynamodb"),
        sqs=aws_client("sqs"),
        sns=aws_client("sns"),
    )
    dispatcher = Dispatcher(handle, service)
    dlqs = DeadLetters(
        aws_client("sqs"),
        prefix_of(resources),
        Invocations(),
        streams=aws_client("dynamodbstreams"),
        batch_invoker=LambdaInvoker(dispatcher),
    )
    return dlqs, dispatcher


def inbox_bodies(sqs: Any, url: str) -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = []
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        for message in got:
            bodies.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return bodies


def test_a_failed_stream_batch_is_read_back_and_its_resume_reaches_the_inbox(
    resources: LocalResources, aws_client: Any
) -> None:
    # Given an answered question whose stream batch the dispatcher failed on every retry
    info = failed_stream_batch(resources, aws_client)
    sqs = aws_client("sqs")
    assert inbox_bodies(sqs, resources.inbox_url) == []
    dlqs, dispatcher = stream_dead_letters(resources, aws_client)

    # When the ledger stream's DLQ is redriven
    outcomes = dlqs.redrive(None, name="ledger-stream")

    # Then the stack's dispatcher got the batch's records, in the event Lambda's mapping builds
    assert [(o.status, o.detail) for o in outcomes] == [
        ("redriven", f"invoked {prefix_of(resources)}dispatcher")
    ]
    [(function, event)] = dispatcher.calls
    assert function == prefix_of(resources) + "dispatcher"
    numbers = [r["dynamodb"]["SequenceNumber"] for r in event["Records"]]
    assert (numbers[0], numbers[-1], len(numbers)) == (
        info["startSequenceNumber"],
        info["endSequenceNumber"],
        info["batchSize"],
    )
    assert {(r["eventSourceARN"], r["awsRegion"]) for r in event["Records"]} == {
        (resources.ledger_stream_arn, "us-east-1")
    }
    # the resume is on the inbox, and the message is gone from the DLQ
    assert [(b["thread_id"], b["question_id"]) for b in inbox_bodies(sqs, resources.inbox_url)] == [
        ("t-stream", "q-stream")
    ]
    assert dlqs.messages("ledger-stream") == []


@pytest.mark.parametrize("fault", ["trimmed", "expired"])
def test_a_batch_the_stream_no_longer_has_is_refused_in_one_line_and_kept(
    resources: LocalResources, aws_client: Any, fault: str
) -> None:
    from botocore.exceptions import ClientError

    failed_stream_batch(resources, aws_client)
    dlqs, dispatcher = stream_dead_letters(resources, aws_client)
    assert dlqs.streams is not None
    # DynamoDB Streams' answer past the 24 hours (moto never trims)
    code = {"trimmed": "TrimmedDataAccessException", "expired": "ExpiredIteratorException"}[fault]
    operation = "GetShardIterator" if fault == "trimmed" else "GetRecords"

    def refuse(**_: Any) -> None:
        raise ClientError({"Error": {"Code": code, "Message": "beyond the trim horizon"}}, operation)

    dlqs.streams.meta.events.register(f"before-call.dynamodbstreams.{operation}", refuse)

    outcomes = dlqs.redrive(None, name="ledger-stream")

    [outcome] = outcomes
    assert outcome.status == "refused"
    assert "no longer has records" in outcome.detail and "\n" not in outcome.detail
    assert dispatcher.calls == []
    assert [letter.message_id for letter in dlqs.messages("ledger-stream")] == [outcome.letter.message_id]
    assert inbox_bodies(aws_client("sqs"), resources.inbox_url) == []


@pytest.mark.parametrize("failing", ["every-record", "the-decision"])
def test_a_batch_the_dispatcher_fails_again_stays_in_the_dlq(
    resources: LocalResources, aws_client: Any, failing: str
) -> None:
    from wait_service.stream.ledger_stream import LedgerChange, LedgerStream

    info = failed_stream_batch(resources, aws_client)
    dlqs, dispatcher = stream_dead_letters(resources, aws_client)

    class Down:
        def handle(self, change: LedgerChange) -> None:
            if failing == "every-record" or change.decided:
                raise RuntimeError("inbox still down")

    dispatcher.service = LedgerStream([Down()])

    [outcome] = dlqs.redrive(None, name="ledger-stream")

    records = dispatcher.calls[0][1]["Records"]
    assert records[0]["dynamodb"]["SequenceNumber"] == info["startSequenceNumber"]
    assert outcome.status == "refused", outcome.detail
    assert "\n" not in outcome.detail
    if failing == "every-record":
        # the handler raised: Lambda's FunctionError, its message's first line
        assert outcome.detail.startswith(
            f"{prefix_of(resources)}dispatcher failed (Unhandled): BatchProcessingError: All records failed"
        )
    else:
        # a partial batch response naming the decision's record
        decided = [r["dynamodb"]["SequenceNumber"] for r in records if r["eventName"] == "MODIFY"]
        assert (
            outcome.detail == f"{prefix_of(resources)}dispatcher failed again on records {decided[-1]}: kept"
        )
    assert len(dlqs.messages("ledger-stream")) == 1


def test_a_record_naming_another_stream_is_not_read(resources: LocalResources, aws_client: Any) -> None:
    info = failed_stream_batch(resources, aws_client)
    assert resources.stream_dlq_url is not None
    sqs = aws_client("sqs")
    [old] = sqs.receive_message(QueueUrl=resources.stream_dlq_url)["Messages"]
    sqs.delete_message(QueueUrl=resources.stream_dlq_url, ReceiptHandle=old["ReceiptHandle"])
    other = str(info["streamArn"]).replace(f"table/{resources.ledger_table}", "table/payroll")
    sqs.send_message(
        QueueUrl=resources.stream_dlq_url,
        MessageBody=json.dumps({"DDBStreamBatchInfo": {**info, "streamArn": other}}),
    )
    dlqs, dispatcher = stream_dead_letters(resources, aws_client)

    [outcome] = dlqs.redrive(None, name="ledger-stream")

    assert outcome.status == "refused" and "not read" in outcome.detail
    assert dispatcher.calls == []


def test_the_local_stack_refuses_a_stream_batch_in_one_line(
    resources: LocalResources, aws_client: Any
) -> None:
    failed_stream_batch(resources, aws_client)
    dlqs = DeadLetters(aws_client("sqs"), prefix_of(resources), Invocations())

    [outcome] = dlqs.redrive(None, name="ledger-stream")

    assert outcome.status == "refused" and "agent-wait local" in outcome.detail
    assert len(dlqs.messages("ledger-stream")) == 1
