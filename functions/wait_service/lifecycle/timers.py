"""Timers of a question: EventBridge Scheduler ``at()`` schedules into the lifecycle handler.

A question has at most one live schedule: the one for its next due timer, among its expiry on the
current escalation rung and the reminders not yet sent. The runner arms it when the question is
raised; when it fires, the lifecycle handler arms the next one first (before it acts, so a step that
fails and is retried never leaves the question without a timer), and arming stops once the question
is decided. So a timer that cannot fire before the question is decided (a reminder due after the
ttl, a later reminder of a question answered early) never costs a schedule, and a decided question
costs one delete. Each schedule deletes itself after it fires (``ActionAfterCompletion: DELETE``).

At 1,000 questions a second with a ttl and two reminders, that is 1,000 creates and about 1,000
deletes a second (plus one create per timer that fires), and one live schedule per open question:
3.6 million at a one-hour ttl, instead of three per question.

A timer that fires late, twice, or after an answer changes nothing: the lifecycle handler acts
through conditional writes, and arms nothing for a decided question. Schedule names are derived from
the question id and the timer, so arming a timer twice is harmless (the second create is a
``ConflictException``) and deleting one needs no lookup. The one schedule a decision may leave
behind (armed by a timer firing at the very moment of the decision) fires once, finds the question
decided and deletes itself.

Every schedule carries the retry policy of ``wait_service.resources.TIMERS`` and names the
timers' dead-letter queue, so an invocation Scheduler cannot make is retried for a day and then kept
there, not dropped.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict, Field

from wait_service.clients import CLIENT_CONFIG
from wait_service.ledger.attributes import parse_time
from wait_service.resources import TIMERS

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable

    from mypy_boto3_scheduler import EventBridgeSchedulerClient

    from agent_wait import Envelope
    from wait_service.ledger import QuestionRecord
    from wait_service.settings import Settings

TimerKind = Literal["expire", "remind"]
# How far ahead a timer whose time has already passed is set (the next ones one second apart each,
# so they still fire in their order).
PAST_DUE_DELAY = timedelta(seconds=5)


class TimerEvent(BaseModel):
    """What a schedule delivers to the lifecycle handler.

    ``n`` is the escalation rung the expiry timer was set on (0 before any escalation), or the
    1-based number of the reminder. ``extension`` is how many extensions had moved the expiry when
    an expiry timer was set (left out while 0): a timer set before the latest extension is stale.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    question_id: str = Field(min_length=1)
    timer: TimerKind
    n: int = Field(ge=0)
    extension: int = Field(default=0, ge=0)


def schedule_name(question_id: str, timer: TimerKind, n: int, extension: int = 0) -> str:
    """A schedule name (at most 64 of ``[0-9A-Za-z-_.]``) unique to one timer of one question.

    An expiry moved by an extension gets a name of its own (``-x<extension>``), so it can be set
    while the schedule of the expiry it replaces is still firing.

    Examples
    --------
    >>> name = schedule_name("0b1f", "remind", 2)
    >>> name.startswith("remind-2-"), len(name) <= 64
    (True, True)
    >>> schedule_name("0b1f", "expire", 0, 3).startswith("expire-0-x3-")
    True
    """
    digest = hashlib.sha256(question_id.encode()).hexdigest()[:40]
    if extension:
        return f"{timer}-{n}-x{extension}-{digest}"
    return f"{timer}-{n}-{digest}"


def timer_name(event: TimerEvent) -> str:
    """The schedule name of ``event``'s timer."""
    return schedule_name(event.question_id, event.timer, event.n, event.extension)


def at_expression(moment: datetime) -> str:
    """Scheduler's one-shot expression, to the second, in UTC.

    Examples
    --------
    >>> at_expression(datetime(2026, 11, 30, 10, 0, 5, 900000, tzinfo=UTC))
    'at(2026-11-30T10:00:05)'
    """
    return f"at({moment.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S')})"


@dataclass(frozen=True)
class Timer:
    """One timer to set: which, and when it fires."""

    event: TimerEvent
    at: datetime


class Timers:
    """Creates and deletes a question's schedules in the stack's schedule group.

    Parameters
    ----------
    group:
        The schedule group (``AGENT_WAIT_SCHEDULE_GROUP``).
    target_arn:
        The lifecycle function the schedules invoke (``AGENT_WAIT_LIFECYCLE_ARN``).
    role_arn:
        The role EventBridge Scheduler assumes to invoke it (``AGENT_WAIT_SCHEDULER_ROLE_ARN``).
    client:
        A boto3 ``scheduler`` client; ``None`` creates the default one.
    dlq_arn:
        The standard SQS queue each schedule sends an invocation to once its retries are exhausted
        (``AGENT_WAIT_SCHEDULE_DLQ_ARN``).
    clock:
        Current UTC time; a timer whose time has passed (a republish re-arms a question's timers) is
        set a few seconds ahead instead, since a one-time schedule must lie in the future. Timers
        still to come keep their time.

    Examples
    --------
    >>> timers = Timers("agent-wait", lifecycle_arn, scheduler_role_arn)  # doctest: +SKIP
    >>> timers.set(timers.for_envelope(envelope))  # doctest: +SKIP
    """

    def __init__(
        self,
        group: str,
        target_arn: str,
        role_arn: str,
        client: EventBridgeSchedulerClient | None = None,
        *,
        dlq_arn: str | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if client is None:
            import boto3

            client = boto3.client("scheduler", config=CLIENT_CONFIG)
        self._clock = clock
        self.group = group
        self.target_arn = target_arn
        self.role_arn = role_arn
        self.dlq_arn = dlq_arn
        self._client = client

    def _target(self, event: TimerEvent) -> dict[str, Any]:
        target: dict[str, Any] = {
            "Arn": self.target_arn,
            "RoleArn": self.role_arn,
            "Input": event.model_dump_json(exclude_defaults=True),
            "RetryPolicy": TIMERS.retry_policy(),
        }
        if self.dlq_arn:
            target["DeadLetterConfig"] = {"Arn": self.dlq_arn}
        return target

    @staticmethod
    def for_envelope(envelope: Envelope) -> list[Timer]:
        """The timer to arm for a just-raised question: its next due one (none without a ttl or reminders)."""
        due = next_due(
            envelope.question_id,
            created_at=envelope.created_at,
            expires_at=envelope.expires_at,
            rung=0,
            reminders=envelope.policy.reminders,
        )
        return [due] if due is not None else []

    @staticmethod
    def for_question(question: QuestionRecord, *, fired: TimerEvent | None = None) -> list[Timer]:
        """The timer to arm next for an open question; ``fired`` (a reminder) counts as sent."""
        if not question.is_open or question.created_at is None:
            return []
        sent = set(question.reminders_sent)
        if fired is not None and fired.timer == "remind":
            sent.add(fired.n)
        due = next_due(
            question.question_id,
            created_at=parse_time(question.created_at),
            expires_at=None if question.expires_at is None else parse_time(question.expires_at),
            rung=question.escalation,
            reminders=question.policy.get("reminders") or [],
            sent=sent,
            extension=len(question.extensions),
        )
        return [due] if due is not None else []

    def set(self, timers: list[Timer]) -> None:
        """Create each timer's schedule; one that exists already is left as it is."""
        now = self._clock()
        late = 0
        for timer in timers:
            at = timer.at
            if at <= now:
                at = now + PAST_DUE_DELAY + timedelta(seconds=late)
                late += 1
            try:
                self._client.create_schedule(
                    Name=timer_name(timer.event),
                    GroupName=self.group,
                    ScheduleExpression=at_expression(at),
                    ScheduleExpressionTimezone="UTC",
                    FlexibleTimeWindow={"Mode": "OFF"},
                    ActionAfterCompletion="DELETE",
                    Target=self._target(timer.event),  # type: ignore[arg-type]
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ConflictException":
                    raise

    def cancel(self, question: QuestionRecord) -> None:
        """Delete the one schedule a decided question may still have (its next due timer); a
        missing one is fine."""
        if question.created_at is None:
            return
        due = next_due(
            question.question_id,
            created_at=parse_time(question.created_at),
            expires_at=None if question.expires_at is None else parse_time(question.expires_at),
            rung=question.escalation,
            reminders=question.policy.get("reminders") or [],
            sent=set(question.reminders_sent),
            extension=len(question.extensions),
        )
        names = [] if due is None else [timer_name(due.event)]
        for name in names:
            try:
                self._client.delete_schedule(Name=name, GroupName=self.group)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                    raise


def next_due(
    question_id: str,
    *,
    created_at: datetime,
    expires_at: datetime | None,
    rung: int,
    reminders: Iterable[Any],
    sent: Collection[int] = (),
    extension: int = 0,
) -> Timer | None:
    """The question's next due timer: its expiry on ``rung`` or the first reminder not ``sent``.

    Reminders are offsets in seconds from ``created_at``; at the same moment a reminder comes
    before the expiry, and reminders in their order.

    Examples
    --------
    >>> start = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    >>> due = next_due("q", created_at=start, expires_at=start + timedelta(hours=1), rung=0,
    ...                reminders=[600, 1800], sent={1})
    >>> (due.event.timer, due.event.n, due.at.minute)
    ('remind', 2, 30)
    >>> next_due("q", created_at=start, expires_at=None, rung=0, reminders=[]) is None
    True
    """
    candidates: list[tuple[datetime, int, Timer]] = []
    if expires_at is not None:
        expire = TimerEvent(question_id=question_id, timer="expire", n=rung, extension=extension)
        candidates.append((expires_at, 1, Timer(expire, expires_at)))
    for number, offset in enumerate(reminders, start=1):
        if number in sent:
            continue
        at = created_at + timedelta(seconds=float(offset))
        remind = TimerEvent(question_id=question_id, timer="remind", n=number)
        candidates.append((at, 0, Timer(remind, at)))
    if not candidates:
        return None
    return min(candidates, key=lambda c: (c[0], c[1], c[2].event.n))[2]


def build_timers(
    settings: Settings,
    client: EventBridgeSchedulerClient | None = None,
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Timers | None:
    """The deployment's timers, or ``None`` when it configures no schedule group."""
    if not settings.schedule_group:
        return None
    return Timers(
        settings.schedule_group,
        settings.require("lifecycle_arn"),
        settings.require("scheduler_role_arn"),
        client,
        dlq_arn=settings.schedule_dlq_arn,
        clock=clock,
    )


def parse_timer_event(event: Any) -> TimerEvent:
    """The timer a schedule delivered (its ``Input``, parsed by Lambda) or a JSON string of it."""
    if isinstance(event, str | bytes):
        event = json.loads(event)
    return TimerEvent.model_validate(event)
