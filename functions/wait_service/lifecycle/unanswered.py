"""What happens to a question while nobody answers it: expiry, escalation, reminders.

Seed 002: "Nothing waiting on a human silently vanishes." A question with a ttl is decided by the
system when the ttl runs out (its ``on_expiry`` default, else a rejection), or moved one rung up its
escalation ladder; reminders go out at their offsets while it is open. Every step is a conditional
write in the ledger, so a timer that fires late, twice, or after an answer changes nothing, and
exactly one of reply, expiry and revocation decides a question; only that one resumes the thread.

:class:`~wait_service.answers.decisions.Decisions` (its own module: the api shares it, since a reply that
finds its question past due applies the expiry itself) decides; :class:`LifecycleService` adds the
announcers and timers the lifecycle function needs. No decision sends its resume from here: the
decision's ledger write is the commit, and the ledger's stream has the resume enqueued
(:mod:`wait_service.stream.ledger_stream`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

from aws_lambda_powertools.metrics import MetricUnit

from agent_wait import Envelope, exact_json
from agent_wait.aws.dynamodb import LEDGER_ENVELOPE_FIELDS, ledger_envelope
from agent_wait.errors import AnnounceError
from wait_service.answers.decisions import Decisions, Expire, on_expiry_action, route_of
from wait_service.ledger import Clock, Ledger, QuestionRecord, parse_time, utcnow
from wait_service.ledger.statuses import DECIDED
from wait_service.metric_names import QUESTIONS_ESCALATED, REMINDERS_SENT
from wait_service.observability import logger, metrics

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient

    from agent_wait import BaseAnnounce
    from wait_service.lifecycle.timers import TimerEvent, Timers
    from wait_service.settings import Settings

# What a timer did (for the log and the tests).
Outcome = Literal["unknown", "expired", "escalated", "reminded", "decided", "closed", "stale"]


class ThreadReplies(Protocol):
    """Where a question's own conversation is (``SlackAnnounce``): replies in its thread, and the
    question posted again in the channel of the escalation rung it reached."""

    def follow_up(self, question_id: str, text: str) -> None: ...

    def post_escalation(self, envelope: Envelope, channel: str) -> None: ...


def _compact(value: Any) -> str:
    return exact_json.dumps(value, separators=(", ", ": "), ensure_ascii=False)


class LifecycleService(Decisions):
    """Handles the timers of questions: expiry (and escalation) and reminders.

    Parameters
    ----------
    ledger:
        As for :class:`Decisions`.
    announce:
        Where ``wait.escalated`` and ``wait.reminder`` events go (the topic and the outbox; the
        ledger records the step itself).
    timers:
        Arms each question's next due timer as one fires (its next reminder, or its expiry on a
        new rung); ``None`` when the deployment has no scheduler.
    default_ttl:
        Seconds, for a ladder whose policy sets no ttl of its own.
    chat:
        Where each step is also told in the question's own thread (the Slack message it was
        posted as), best effort: a chat that fails never fails the timer.
    clock:
        Current UTC time; injected by tests.

    Examples
    --------
    >>> service = LifecycleService(ledger, announce, timers)  # doctest: +SKIP
    >>> service.handle(TimerEvent(question_id="q-1", timer="expire", n=0))  # doctest: +SKIP
    'expired'
    """

    def __init__(
        self,
        ledger: Ledger,
        announce: BaseAnnounce,
        timers: Timers | None = None,
        *,
        default_ttl: int | None = None,
        chat: ThreadReplies | None = None,
        clock: Clock = utcnow,
    ) -> None:
        super().__init__(ledger, clock=clock)
        self.announce = announce
        self.timers = timers
        self.default_ttl = default_ttl
        self.chat = chat

    def handle(self, event: TimerEvent) -> Outcome:
        """Act on one timer; returns what it did (for the log and the tests)."""
        question = self.ledger.find_question(event.question_id)
        if question is None:
            logger.warning("timer for an unknown question", extra={"question_id": event.question_id})
            return "unknown"
        if event.timer == "remind":
            return self.remind(question, event.n)
        if event.extension < len(question.extensions) and question.is_open:
            # Set before an extension moved the expiry: arm the moved one (a name of its own).
            self._arm_next(question)
            return "stale"
        return self.on_ttl(question, event.n)

    def on_ttl(self, question: QuestionRecord, rung: int) -> Outcome:
        """The ttl of ``rung`` ran out: escalate one rung, or decide the question by expiry."""
        if question.status in DECIDED:
            # Decided already; the decision's resume follows from the ledger's stream.
            return "decided"
        if question.escalation == rung + 1:
            # This timer moved the question already and failed after: announce and arm again.
            self._after_escalation(question)
            return "escalated"
        if question.escalation != rung:
            return "stale"
        action = on_expiry_action(question.policy, rung)
        if isinstance(action, Expire):
            decided = self.expire(question, action.answer, rung=rung)
            if decided.is_open:
                # An extension moved the expiry between the read and the write: its timer, not
                # this one, decides now; this one is firing its last, so the next is armed here.
                self._arm_next(decided)
                return "stale"
            if decided.status != "expired":
                return "decided"
            self._tell(
                question.question_id,
                f"Expired: nobody answered in time, so the system answered {_compact(decided.answer)}.",
            )
            return "expired"
        ttl = int(question.policy.get("ttl") or self.default_ttl or 0)
        if ttl <= 0:
            return "stale"
        expires_at = self._clock() + timedelta(seconds=ttl)
        if not self.ledger.record_escalation(
            question.question_id,
            rung=rung,
            route=action.route,
            expires_at=expires_at,
            seen=question.expires_at,
        ):
            current = self.ledger.find_question(question.question_id)
            if current is not None and current.is_open and current.escalation == rung:
                # Lost to an extension: the moved expiry's timer is armed (this one fires its last).
                self._arm_next(current)
            return "stale"
        metrics.add_metric(name=QUESTIONS_ESCALATED, unit=MetricUnit.Count, value=1)
        logger.info(
            "question escalated",
            extra={"question_id": question.question_id, "route": action.route, "escalation": action.number},
        )
        self._after_escalation(self.ledger.get_question(question.question_id))
        return "escalated"

    def _after_escalation(self, question: QuestionRecord) -> None:
        """Arm the question's next timer on its new rung, and announce the rung (both idempotent)."""
        if not question.is_open or question.expires_at is None:
            return
        self._arm_next(question)
        number = question.escalation
        rungs = (question.policy.get("on_expiry") or {}).get("to") or []
        rung = rungs[number - 1] if isinstance(rungs[number - 1], dict) else {}
        envelope = self._envelope(question).follow_up(
            "wait.escalated",
            number,
            route=route_of(rungs[number - 1]),
            expires_at=parse_time(question.expires_at),
            event_types=[str(t) for t in rung.get("event_types") or []],
        )
        self._announce(envelope)
        channel = rung.get("slack_channel")
        where = ""
        if channel:
            self._post_to_rung(envelope, str(channel))
            where = f" Posted in <#{channel}> for its responders."
        self._tell(
            question.question_id,
            f"Escalated to {envelope.route} (rung {number}): still waiting for an answer, "
            f"now until {question.expires_at}.{where}",
        )

    def _post_to_rung(self, envelope: Envelope, channel: str) -> None:
        """Post the question, with its buttons, in the channel of the rung it reached.

        This is the rung's announcement, not a courtesy: a failure fails the timer, which fires
        again (the message store skips a channel posted to already).
        """
        if self.chat is None:
            logger.warning(
                "the escalation rung names a Slack channel but the deployment has no Slack app",
                extra={"question_id": envelope.question_id, "channel": channel},
            )
            return
        try:
            self.chat.post_escalation(envelope, channel)
        except Exception as exc:
            raise AnnounceError(
                f"{envelope.type} of question {envelope.question_id} could not be posted in Slack "
                f"channel {channel}: {exc}",
                question_id=envelope.question_id,
                thread_id=envelope.thread_id,
            ) from exc

    def remind(self, question: QuestionRecord, number: int) -> Outcome:
        """Send reminder ``number`` of an open question (again, if an earlier send failed)."""
        if not question.is_open:
            return "closed"
        if number < 1 or number > len(question.policy.get("reminders") or []):
            return "stale"
        if self.timers is not None:
            from wait_service.lifecycle.timers import TimerEvent

            # The next timer first: a send that fails below is retried by this timer, and the
            # question keeps a timer whatever happens to this one.
            self._arm_next(
                question, fired=TimerEvent(question_id=question.question_id, timer="remind", n=number)
            )
        if self.ledger.record_reminder(question.question_id, number):
            metrics.add_metric(name=REMINDERS_SENT, unit=MetricUnit.Count, value=1)
        elif number not in question.reminders_sent:
            return "closed"  # decided between the read and the write
        self._announce(self._envelope(question).follow_up("wait.reminder", number))
        self._tell(question.question_id, f"Reminder {number}: this question is still waiting for an answer.")
        return "reminded"

    def _arm_next(self, question: QuestionRecord, *, fired: TimerEvent | None = None) -> None:
        """Arm the open question's next due timer (one live schedule per question, see timers)."""
        if self.timers is not None:
            self.timers.set(self.timers.for_question(question, fired=fired))

    def _tell(self, question_id: str, text: str) -> None:
        if self.chat is None:
            return
        try:
            self.chat.follow_up(question_id, text)
        except Exception:
            # The ledger, the topic and the outbox have the step: a chat is a courtesy.
            logger.warning("could not reply in the question's chat thread", exc_info=True)

    def _envelope(self, question: QuestionRecord) -> Envelope:
        return envelope_of(question)

    def _announce(self, envelope: Envelope) -> None:
        # A sink that failed makes the timer fail, so it fires again: the dedupe key makes the
        # second announcement harmless to every sink that took the first.
        if not self.announce.announce(envelope):
            raise AnnounceError(
                f"{envelope.type} of question {envelope.question_id} did not reach every sink",
                question_id=envelope.question_id,
                thread_id=envelope.thread_id,
            )


def build_lifecycle(
    settings: Settings,
    *,
    dynamodb: DynamoDBClient | None = None,
    sns: SNSClient | None = None,
    sqs: SQSClient | None = None,
    scheduler: EventBridgeSchedulerClient | None = None,
    clock: Clock = utcnow,
) -> LifecycleService:
    """The lifecycle service wired to the resources named by ``settings``.

    Examples
    --------
    >>> service = build_lifecycle(Settings.from_env(os.environ))  # doctest: +SKIP
    """
    from agent_wait import CompositeAnnounce
    from agent_wait.aws import SnsAnnounce, SqsAnnounce
    from wait_service.channels.slack import build_slack_announce
    from wait_service.lifecycle.timers import build_timers

    ledger = Ledger.from_settings(settings, dynamodb, clock=clock)
    timers = build_timers(settings, scheduler, clock=clock)
    return LifecycleService(
        ledger,
        # The ledger records each step itself; the events go to the topic and the outbox, and each
        # step is told in the Slack thread of the question's message when the deployment posts there.
        CompositeAnnounce(
            [
                SnsAnnounce(settings.require("topic_arn"), client=sns),
                SqsAnnounce(settings.require("outbox_url"), client=sqs),
            ]
        ),
        timers,
        default_ttl=settings.default_ttl,
        chat=build_slack_announce(settings, dynamodb=dynamodb),
        clock=clock,
    )


def envelope_of(question: QuestionRecord) -> Envelope:
    """The ``wait.created`` envelope ``question`` was announced with: the base of its follow-ups
    (:func:`agent_wait.aws.dynamodb.ledger_envelope`)."""
    try:
        # The record always names its question: the item's key, the id's fallback, is not needed.
        return ledger_envelope(
            {
                name: getattr(question, name)
                for name in LEDGER_ENVELOPE_FIELDS
                if name != "dedupe_key" and getattr(question, name) is not None
            }
        )
    except KeyError as exc:
        raise AnnounceError(
            f"question {question.question_id} has no stored envelope",
            question_id=question.question_id,
            thread_id=question.thread_id,
        ) from exc
