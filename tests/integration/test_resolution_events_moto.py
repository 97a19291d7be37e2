"""Resolution events against the moto server: racing replies, and SNS filter policies.

moto serves one request at a time, so DynamoDB's conditional writes stay atomic as on AWS; each
racer is a reply service with its own clients, as separate Lambda invocations are.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import pytest

from agent_wait import Question, approval, build_envelope
from agent_wait.aws import DynamoDbAnnounce, SnsAnnounce
from agent_wait.errors import AgentWaitError
from agent_wait.events import parse_event
from wait_service.answers.replies import ReplyService
from wait_service.ledger import Ledger

if TYPE_CHECKING:
    from collections.abc import Callable

    from wait_service.resources import LocalResources

pytestmark = pytest.mark.integration

RACERS = 50
RESOLUTION = ("wait.answered", "wait.expired", "wait.revoked", "wait.resumed", "wait.resume_failed")


def drain(sqs: Any, url: str) -> list[tuple[dict[str, Any], dict[str, str]]]:
    found: list[tuple[dict[str, Any], dict[str, str]]] = []
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]).get(
        "Messages", []
    ):
        for message in got:
            attributes = {k: v["StringValue"] for k, v in (message.get("MessageAttributes") or {}).items()}
            found.append((json.loads(message["Body"]), attributes))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return found


def raise_question(resources: LocalResources, aws_client: Callable[[str], Any], question_id: str) -> Any:
    envelope = build_envelope(
        f"t-{question_id}",
        Question(
            question_id=question_id,
            question={"function": "issue_refund", "args": {"customer": "c-17", "amount": 40}},
            policy=approval(ttl=3600),
        ),
    )
    DynamoDbAnnounce(resources.ledger_table, client=aws_client("dynamodb")).deliver(envelope)
    return envelope


def test_fifty_racing_replies_publish_one_wait_answered(
    resources: LocalResources, aws_client: Callable[[str], Any], dispatch: Callable[..., int]
) -> None:
    # Given a parked question and fifty responders, each a reply service with its own clients
    envelope = raise_question(resources, aws_client, "q-race")
    services = [ReplyService(Ledger(resources.ledger_table, aws_client("dynamodb"))) for _ in range(RACERS)]
    barrier = threading.Barrier(RACERS)
    outcomes: list[Any] = [None] * RACERS

    def reply(index: int) -> None:
        barrier.wait()
        try:
            outcomes[index] = services[index].reply(
                "q-race",
                {"action": "approve", "args": {"amount": index + 1}},
                principal=f"responder-{index}",
                if_match=f'"{envelope.digest}"',
            )
        except AgentWaitError as exc:
            outcomes[index] = exc

    # When all fifty reply at once, and the dispatcher reads the stream (then again from its start,
    # as a retried batch would)
    threads = [threading.Thread(target=reply, args=(index,)) for index in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    winners = [i for i, outcome in enumerate(outcomes) if getattr(outcome, "created", False)]
    assert len(winners) == 1, outcomes
    dispatch()
    subscribed = drain(aws_client("sqs"), resources.subscriber_url)
    dispatch(sqs=aws_client("sqs"))

    # Then one wait.answered, the winner's, on the topic and on the outbox
    outbox = drain(aws_client("sqs"), resources.outbox_url)
    for sink in (subscribed, outbox):
        answered = [body for body, _ in sink if body["type"] == "wait.answered"]
        assert len(answered) == 1, sink
        parse_event(answered[0])
        assert answered[0]["answered_by"] == f"responder-{winners[0]}"
        assert answered[0]["answer"] == {"action": "approve", "args": {"amount": winners[0] + 1}}


def test_a_filter_policy_delivers_only_answered_events_to_its_queue(
    resources: LocalResources, aws_client: Callable[[str], Any], dispatch: Callable[..., int]
) -> None:
    # Given a subscriber queue subscribed with docs/events.md's filter policy (only wait.answered)
    sqs, sns = aws_client("sqs"), aws_client("sns")
    url = sqs.create_queue(QueueName=resources.ledger_table + "-answered-only")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(
        TopicArn=resources.topic_arn,
        Protocol="sqs",
        Endpoint=arn,
        Attributes={
            "RawMessageDelivery": "true",
            "FilterPolicyScope": "MessageAttributes",
            "FilterPolicy": json.dumps({"type": ["wait.answered"]}),
        },
    )

    # When a question is created, answered, and another revoked
    envelope = raise_question(resources, aws_client, "q-filter")
    SnsAnnounce(resources.topic_arn, client=sns).deliver(envelope)
    other = raise_question(resources, aws_client, "q-other")
    SnsAnnounce(resources.topic_arn, client=sns).deliver(other)
    replies = ReplyService(Ledger(resources.ledger_table, aws_client("dynamodb")))
    replies.reply("q-filter", {"action": "approve"}, principal="ann", if_match=f'"{envelope.digest}"')
    replies.revoke("q-other", "duplicate", principal="ops")
    dispatch()

    # Then the filtered queue holds the answered event only; the unfiltered subscriber saw all
    filtered = drain(sqs, url)
    assert [(body["type"], body["question_id"]) for body, _ in filtered] == [("wait.answered", "q-filter")]
    everything = {body["type"] for body, _ in drain(sqs, resources.subscriber_url)}
    assert {"wait.created", "wait.answered", "wait.revoked"} <= everything
