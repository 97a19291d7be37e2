"""Timers under EventBridge Scheduler's retries: every schedule carries a retry policy and the timers'
dead-letter queue, and a timer delivered twice (Scheduler retries an invocation it could not confirm)
decides, escalates or reminds once.

Seed 002: "Nothing waiting on a human silently vanishes."
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from agent_wait import OnExpiry, approval
from wait_service.ledger import Ledger
from wait_service.lifecycle.timers import TimerEvent, build_timers, schedule_name
from wait_service.lifecycle.unanswered import LifecycleService, build_lifecycle
from wait_service.observability import metrics
from wait_service.resources import TIMERS

if TYPE_CHECKING:
    from collections.abc import Iterator

    from service_events import Aws, FakeClock

TIMED_OUT = {"action": "reject", "reason": "nobody answered in time"}


@pytest.fixture(autouse=True)
def fresh_metrics() -> Iterator[None]:
    metrics.clear_metrics()
    yield
    metrics.clear_metrics()


def metric(name: str) -> float:
    return float(sum(metrics.metric_set.get(name, {}).get("Value", [])))


@pytest.fixture
def lifecycle(aws: Aws, clock: FakeClock) -> LifecycleService:
    return build_lifecycle(
        aws.settings, dynamodb=aws.dynamodb, sns=aws.sns, sqs=aws.sqs, scheduler=aws.scheduler, clock=clock
    )


def fire(lifecycle: LifecycleService, timer: str, n: int = 0) -> str:
    return lifecycle.handle(TimerEvent.model_validate({"question_id": "q-1", "timer": timer, "n": n}))


def resumes(aws: Aws) -> list[dict[str, Any]]:
    return [
        {k: m[k] for k in ("thread_id", "question_id")} for m in aws.inbox_messages() if "question_id" in m
    ]


def test_every_schedule_has_the_timers_dlq_and_a_retry_policy(aws: Aws, clock: FakeClock) -> None:
    # Given the deployment's timers (the schedule group and its DLQ, as the stack wires them)
    timers = build_timers(aws.settings, aws.scheduler, clock=clock)
    assert timers is not None
    envelope = aws.raise_question(policy=approval(ttl=60, reminders=[20]), now=clock.now)

    # When a question's timers are armed
    timers.set(timers.for_envelope(envelope))

    # Then its one live schedule (the next due timer: the reminder) retries for a day and then lands
    # in the timers DLQ, not nowhere
    group = aws.resources.schedule_group
    names = [s["Name"] for s in aws.scheduler.list_schedules(GroupName=group)["Schedules"]]
    assert names == [schedule_name("q-1", "remind", 1)]
    for name in names:
        target = aws.scheduler.get_schedule(Name=name, GroupName=group)["Target"]
        assert target["DeadLetterConfig"] == {"Arn": aws.resources.schedule_dlq_arn}
        assert target["RetryPolicy"] == {
            "MaximumRetryAttempts": TIMERS.retry_attempts,
            "MaximumEventAgeInSeconds": TIMERS.max_event_age_seconds,
        }
    # the DLQ exists beside the schedule group, as the stack creates it
    assert aws.resources.schedule_dlq_url is not None
    aws.sqs.get_queue_attributes(QueueUrl=aws.resources.schedule_dlq_url, AttributeNames=["QueueArn"])


def test_an_expiry_delivered_twice_decides_and_resumes_once(
    aws: Aws, lifecycle: LifecycleService, clock: FakeClock
) -> None:
    # Given an open question whose ttl ran out
    aws.raise_question(
        policy=approval(ttl=60, on_expiry=OnExpiry(action="default", answer=TIMED_OUT)), now=clock.now
    )
    clock.advance(60)

    # When Scheduler delivers its expiry timer, and retries the same invocation
    assert fire(lifecycle, "expire") == "expired"
    assert fire(lifecycle, "expire") == "decided"

    # Then the question was decided once, its thread resumed once, and counted once
    question = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock).get_question("q-1")
    assert (question.status, question.answer) == ("expired", TIMED_OUT)
    assert [entry["stage"] for entry in question.lifecycle].count("expired") == 1
    assert resumes(aws) == [{"thread_id": "t-1", "question_id": "q-1"}]
    assert metric("QuestionsExpired") == 1


def test_a_reminder_delivered_twice_is_recorded_once_and_announced_under_one_dedupe_key(
    aws: Aws, lifecycle: LifecycleService, clock: FakeClock
) -> None:
    # Given an open question whose first reminder is due
    aws.raise_question(policy=approval(ttl=600, reminders=[60]), now=clock.now)
    aws.outbox()
    clock.advance(60)

    # When Scheduler delivers the reminder twice
    assert fire(lifecycle, "remind", 1) == "reminded"
    # (a repeat announces again, in case the first invocation died between its write and its send)
    assert fire(lifecycle, "remind", 1) == "reminded"

    # Then the ledger and the metric count one reminder, and the outbox (deduplicated on the
    # envelope's dedupe_key, as every subscriber deduplicates) holds one wait.reminder
    question = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock).get_question("q-1")
    assert question.reminders_sent == (1,)
    assert [entry["stage"] for entry in question.lifecycle].count("reminded") == 1
    assert metric("RemindersSent") == 1
    reminders = [body for body in aws.outbox() if body.get("type") == "wait.reminder"]
    assert len(reminders) == 1
