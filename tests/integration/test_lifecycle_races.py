"""Exactly one of reply, expiry and revocation decides a question, and only it resumes the thread.

Races through real boto3 over HTTP against the moto server on 127.0.0.1, which serves one request
at a time so DynamoDB's conditional writes stay atomic as on AWS. Each racer is a service with its
own clients, as separate Lambda invocations are; the services are called directly (not through
the REST resolver, whose request state is per process), released together by a barrier.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from sends import watch_sends

from agent_wait import CompositeAnnounce, OnExpiry, Question, approval, build_envelope
from agent_wait.aws import DynamoDbAnnounce, SnsAnnounce, SqsAnnounce
from agent_wait.errors import AgentWaitError
from wait_service.answers.replies import ReplyService
from wait_service.ledger import Ledger
from wait_service.lifecycle.timers import TimerEvent
from wait_service.lifecycle.unanswered import LifecycleService

if TYPE_CHECKING:
    from collections.abc import Callable

    from wait_service.resources import LocalResources

pytestmark = pytest.mark.integration

RAISED = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
# Just before the ttl runs out: the reply is in time, the timer has fired (timers fire early only
# if the clocks disagree, which is exactly the case worth racing).
NOW = RAISED + timedelta(seconds=59)
ROUNDS = 10


class Sends:
    """Counts the sends naming one question on every client it watches (FIFO deduplication would
    hide a second)."""

    def __init__(self, question_id: str, inbox_url: str) -> None:
        self.question_id = question_id
        # The resume goes to the inbox; the resolution events to the outbox are not resumes.
        self.inbox_url = inbox_url
        self.count = 0
        self._lock = threading.Lock()

    def watch(self, sqs: Any) -> Any:
        return watch_sends(sqs, self.inbox_url, self._sent)

    def _sent(self, body: dict[str, Any]) -> None:
        if body.get("question_id") != self.question_id:
            return
        with self._lock:
            self.count += 1


def racers(
    resources: LocalResources, aws_client: Callable[[str], Any]
) -> tuple[ReplyService, ReplyService, LifecycleService]:
    def ledger() -> Ledger:
        return Ledger(resources.ledger_table, aws_client("dynamodb"), clock=lambda: NOW)

    announce = CompositeAnnounce(
        [
            SnsAnnounce(resources.topic_arn, client=aws_client("sns")),
            SqsAnnounce(resources.outbox_url, client=aws_client("sqs")),
        ]
    )
    return (
        ReplyService(ledger(), clock=lambda: NOW),
        ReplyService(ledger(), clock=lambda: NOW),
        LifecycleService(ledger(), announce, clock=lambda: NOW),
    )


def race_once(
    resources: LocalResources,
    aws_client: Callable[[str], Any],
    dispatch: Callable[..., int],
    question_id: str,
    on_expiry: OnExpiry | None,
) -> str:
    """Raise one question, let reply, revoke and expiry act on it at once; returns the winner."""
    # Given a parked question with a ttl, and three racers with their own clients
    dynamodb = aws_client("dynamodb")
    envelope = build_envelope(
        f"t-{question_id}",
        Question(
            question_id=question_id,
            question={"function": "issue_refund", "args": {"customer": "c-17", "amount": 40}},
            policy=approval(ttl=60, on_expiry=on_expiry),
        ),
        now=RAISED,
    )
    DynamoDbAnnounce(resources.ledger_table, client=dynamodb).deliver(envelope)
    sends = Sends(question_id, resources.inbox_url)
    replier, revoker, lifecycle = racers(resources, aws_client)
    barrier = threading.Barrier(3)
    outcomes: dict[str, Any] = {}
    acts: dict[str, Callable[[], Any]] = {
        "reply": lambda: replier.reply(
            question_id,
            {"action": "reject", "reason": "no"},
            principal="ann",
            if_match=f'"{envelope.digest}"',
        ),
        "revoke": lambda: revoker.revoke(question_id, "withdrawn", principal="bob"),
        "expiry": lambda: lifecycle.handle(TimerEvent(question_id=question_id, timer="expire", n=0)),
    }

    def race(name: str) -> None:
        barrier.wait()
        try:
            outcomes[name] = acts[name]()
        except AgentWaitError as exc:
            outcomes[name] = exc

    # When all three act at once
    threads = [threading.Thread(target=race, args=(name,)) for name in acts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    # Then exactly one won, its decision is the one recorded, and one resume was sent
    won = {
        "reply": getattr(outcomes["reply"], "created", False),
        "revoke": getattr(outcomes["revoke"], "status", None) == "revoked",
        "expiry": outcomes["expiry"] == "expired",
    }
    assert sum(won.values()) == 1, outcomes
    [winner] = [name for name, ok in won.items() if ok]
    standing = Ledger(resources.ledger_table, dynamodb).get_question(question_id)
    assert standing.status == {"reply": "answered", "revoke": "revoked", "expiry": "expired"}[winner]
    # The ledger's stream holds the one decision: the dispatcher sends one resume for it
    dispatch(sqs=sends.watch(aws_client("sqs")))
    assert sends.count == 1, (winner, sends.count)
    return winner


@pytest.mark.parametrize("on_expiry", [None, OnExpiry(action="default", answer={"action": "approve"})])
def test_reply_expiry_and_revoke_at_the_same_instant_make_one_winner_and_one_resume(
    resources: LocalResources,
    aws_client: Callable[[str], Any],
    dispatch: Callable[..., int],
    on_expiry: OnExpiry | None,
) -> None:
    winners = [race_once(resources, aws_client, dispatch, f"q-race-{n}", on_expiry) for n in range(ROUNDS)]

    assert len(winners) == ROUNDS
