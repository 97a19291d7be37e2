"""A hand-over racing an answer, and an extension racing the expiry: one consistent outcome each.

Races through real boto3 over HTTP against the moto server on 127.0.0.1, which serves one request
at a time so DynamoDB's conditional writes stay atomic as on AWS. Each racer is a service with its
own clients, as separate Lambda invocations are, released together by a barrier.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from sends import watch_sends

from agent_wait import CompositeAnnounce, Question, approval, build_envelope
from agent_wait.aws import DynamoDbAnnounce, SnsAnnounce, SqsAnnounce
from agent_wait.errors import AgentWaitError, QuestionDecidedError, ResponderNotAllowedError
from wait_service.answers.authority import AuthorityService
from wait_service.answers.replies import ReplyService
from wait_service.ledger import Ledger
from wait_service.lifecycle.timers import TimerEvent, Timers, schedule_name
from wait_service.lifecycle.unanswered import LifecycleService

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_wait import Envelope, Policy
    from wait_service.resources import LocalResources

pytestmark = pytest.mark.integration

RAISED = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
ROUNDS = 10
ANN, BOB = "ann", "bob"


def race(acts: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run every act at once (released by one barrier); each one's result or the error it raised."""
    barrier = threading.Barrier(len(acts))
    outcomes: dict[str, Any] = {}

    def run(name: str) -> None:
        barrier.wait()
        try:
            outcomes[name] = acts[name]()
        except AgentWaitError as exc:
            outcomes[name] = exc

    threads = [threading.Thread(target=run, args=(name,)) for name in acts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert set(outcomes) == set(acts), outcomes
    return outcomes


def raise_question(resources: LocalResources, dynamodb: Any, question_id: str, policy: Policy) -> Envelope:
    envelope = build_envelope(
        f"t-{question_id}",
        Question(
            question_id=question_id,
            question={"function": "issue_refund", "args": {"customer": "c-17", "amount": 40}},
            policy=policy,
        ),
        now=RAISED,
    )
    DynamoDbAnnounce(resources.ledger_table, client=dynamodb).deliver(envelope)
    return envelope


class Resumes:
    """Counts the resumes the ledger's stream enqueues, per question (FIFO deduplication aside).

    One watched client for the whole test: the dispatcher reads each stream record once.
    """

    def __init__(
        self, resources: LocalResources, aws_client: Callable[[str], Any], dispatch: Callable[..., int]
    ):
        self.inbox_url = resources.inbox_url
        self.dispatch = dispatch
        self.sent: Counter[str] = Counter()
        self.sqs = aws_client("sqs")
        watch_sends(self.sqs, self.inbox_url, self._sent)

    def _sent(self, body: dict[str, Any]) -> None:
        question_id = body.get("question_id")
        if question_id:
            self.sent[question_id] += 1

    def of(self, question_id: str) -> int:
        self.dispatch(sqs=self.sqs)
        return self.sent[question_id]


def test_a_delegation_racing_the_answers_leaves_one_answer_and_a_consistent_history(
    resources: LocalResources, aws_client: Callable[[str], Any], dispatch: Callable[..., int]
) -> None:
    dynamodb = aws_client("dynamodb")
    resumes = Resumes(resources, aws_client, dispatch)
    for n in range(ROUNDS):
        # Given a question only ann may answer
        question_id = f"q-delegate-{n}"
        envelope = raise_question(resources, dynamodb, question_id, approval(responders=[ANN]))
        tag = f'"{envelope.digest}"'

        def ledger() -> Ledger:
            return Ledger(resources.ledger_table, aws_client("dynamodb"), clock=lambda: RAISED)

        # When ann hands it to bob while ann approves it and bob rejects it, all at once
        outcomes = race(
            {
                "delegate": lambda: AuthorityService(ledger()).delegate(
                    question_id,  # noqa: B023 - each round waits for its threads
                    BOB,
                    reason="on leave",
                    principal=ANN,
                ),
                "ann": lambda: ReplyService(ledger()).reply(
                    question_id,  # noqa: B023
                    {"action": "approve"},
                    principal=ANN,
                    if_match=tag,  # noqa: B023
                ),
                "bob": lambda: ReplyService(ledger()).reply(
                    question_id,  # noqa: B023
                    {"action": "reject", "reason": "no"},
                    principal=BOB,
                    if_match=tag,  # noqa: B023
                ),
            }
        )

        # Then exactly one answer stands, and the history says what happened in the order it did
        standing = Ledger(resources.ledger_table, dynamodb).get_question(question_id)
        created = [who for who in ("ann", "bob") if getattr(outcomes[who], "created", False)]
        assert len(created) == 1, outcomes
        assert standing.status == "answered"
        assert standing.answered_by == {"ann": ANN, "bob": BOB}[created[0]]
        history = [s["stage"] for s in standing.lifecycle]
        delegated = not isinstance(outcomes["delegate"], AgentWaitError)
        if delegated:
            # the hand-over landed while the question was open: before the answer
            assert history == ["raised", "delegated", "answered"], history
            assert standing.delegates == (BOB,)
        else:
            assert isinstance(outcomes["delegate"], QuestionDecidedError), outcomes
            assert history == ["raised", "answered"], history
            assert standing.delegates == ()
        # bob's answer counts only if the hand-over came first; refused, it recorded nothing
        if created == ["bob"]:
            assert delegated
        elif isinstance(outcomes["bob"], ResponderNotAllowedError):
            assert standing.answered_by == ANN
        # and the one decision has one resume
        assert resumes.of(question_id) == 1


def test_an_extension_racing_the_expiry_makes_one_outcome_and_keeps_a_timer(
    resources: LocalResources, aws_client: Callable[[str], Any], dispatch: Callable[..., int]
) -> None:
    dynamodb = aws_client("dynamodb")
    resumes = Resumes(resources, aws_client, dispatch)
    scheduler = aws_client("scheduler")
    group = resources.ledger_table + "-timers"
    scheduler.create_schedule_group(Name=group)
    due = RAISED + timedelta(seconds=60)

    def timers(now: datetime) -> Timers:
        return Timers(
            group,
            "arn:aws:lambda:us-east-1:123456789012:function:lifecycle",
            "arn:aws:iam::123456789012:role/scheduler",
            aws_client("scheduler"),
            clock=lambda: now,
        )

    def lifecycle(now: datetime) -> LifecycleService:
        announce = CompositeAnnounce(
            [
                SnsAnnounce(resources.topic_arn, client=aws_client("sns")),
                SqsAnnounce(resources.outbox_url, client=aws_client("sqs")),
            ]
        )
        ledger = Ledger(resources.ledger_table, aws_client("dynamodb"), clock=lambda: now)
        return LifecycleService(ledger, announce, timers(now), clock=lambda: now)

    def schedules() -> set[str]:
        return {s["Name"] for s in scheduler.list_schedules(GroupName=group).get("Schedules", [])}

    outcomes_seen: set[str] = set()
    for n in range(ROUNDS):
        # Given a question whose expiry is due, its one live timer armed for it
        question_id = f"q-extend-{n}"
        envelope = raise_question(resources, dynamodb, question_id, approval(ttl=60, max_extension=120))
        timers(RAISED).set(Timers.for_envelope(envelope))
        first = schedule_name(question_id, "expire", 0)
        assert first in schedules()
        # (the schedule deletes itself once it has fired: the test plays that part)
        scheduler.delete_schedule(Name=first, GroupName=group)

        # When the timer fires at the expiry while a responder, a second earlier, extends it
        extender = AuthorityService(
            Ledger(resources.ledger_table, aws_client("dynamodb"), clock=lambda: due - timedelta(seconds=1)),
            clock=lambda: due - timedelta(seconds=1),
        )
        outcomes = race(
            {
                "expiry": lambda: lifecycle(due).handle(
                    TimerEvent(question_id=question_id, timer="expire", n=0)  # noqa: B023
                ),
                "extend": lambda: extender.extend(  # noqa: B023
                    question_id,  # noqa: B023
                    by_seconds=60,
                    reason="finance is late",
                    principal=ANN,
                ),
            }
        )

        # Then either the expiry decided it and the extension was refused ...
        standing = Ledger(resources.ledger_table, dynamodb).get_question(question_id)
        history = [s["stage"] for s in standing.lifecycle]
        if outcomes["expiry"] == "expired":
            outcomes_seen.add("expired")
            assert isinstance(outcomes["extend"], QuestionDecidedError), outcomes
            assert (standing.status, history) == ("expired", ["raised", "expired"])
            assert resumes.of(question_id) == 1
            continue
        # ... or the extension moved it, the expiry decided nothing, and the moved expiry's timer is armed
        outcomes_seen.add("extended")
        assert outcomes["expiry"] == "stale", outcomes
        assert not isinstance(outcomes["extend"], AgentWaitError), outcomes
        assert standing.is_open and history == ["raised", "extended"], history
        assert standing.expires_at is not None and standing.expires_at.startswith("2026-11-30T10:02:00")
        moved = schedule_name(question_id, "expire", 0, 1)
        assert moved in schedules()
        assert resumes.of(question_id) == 0
        # and that timer, at the new expiry, decides it
        scheduler.delete_schedule(Name=moved, GroupName=group)
        later = due + timedelta(seconds=60)
        fired = TimerEvent(question_id=question_id, timer="expire", n=0, extension=1)
        assert lifecycle(later).handle(fired) == "expired"
        assert resumes.of(question_id) == 1
    assert outcomes_seen  # (which side wins each round is up to the scheduler of threads)


def test_concurrent_votes_make_one_decision_and_one_resume(
    resources: LocalResources, aws_client: Callable[[str], Any], dispatch: Callable[..., int]
) -> None:
    dynamodb = aws_client("dynamodb")
    resumes = Resumes(resources, aws_client, dispatch)
    voters = ["ann", "bob", "carol"]
    for n in range(ROUNDS):
        # Given a question two of three must approve
        question_id = f"q-quorum-{n}"
        envelope = raise_question(
            resources, dynamodb, question_id, approval(responders=voters, approvals_required=2)
        )
        tag = f'"{envelope.digest}"'

        def vote(principal: str) -> Callable[[], Any]:
            ledger = Ledger(resources.ledger_table, aws_client("dynamodb"), clock=lambda: RAISED)
            return lambda: ReplyService(ledger).reply(
                question_id,  # noqa: B023
                {"action": "approve"},
                principal=principal,
                if_match=tag,  # noqa: B023
            )

        # When all three approve at once
        outcomes = race({principal: vote(principal) for principal in voters})

        # Then two votes were counted, exactly one of them decided, and the third was refused
        statuses = sorted(getattr(o, "status", type(o).__name__) for o in outcomes.values())
        assert statuses == ["AnswerConflictError", "answered", "voted"], outcomes
        standing = Ledger(resources.ledger_table, dynamodb).get_question(question_id)
        assert standing.status == "answered" and standing.answer == {"action": "approve"}
        assert len(standing.approvers) == 2 and len(standing.votes) == 2
        assert [s["stage"] for s in standing.lifecycle] == ["raised", "voted", "answered"]
        assert resumes.of(question_id) == 1
