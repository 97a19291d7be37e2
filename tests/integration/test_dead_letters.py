"""``agent_wait_cli.dlq`` against moto: what a redrive sends where, and what it refuses."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from agent_wait_cli.dlq import DEDUPLICATION_WINDOW_SECONDS, DeadLetters, DlqError
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
