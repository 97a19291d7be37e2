"""The reply logic: who may answer, what they answered, and whether it is the first answer.

Checks run cheapest and least stateful first — the question exists, the responder is allowed,
the reply is bound to the digest the responder saw, the answer fits the policy — and only then
does the conditional write decide between the first answer (recorded, resume enqueued) and a
later one (idempotent repeat or conflict). The resume is enqueued after the write, never
before, so a losing reply can never resume the thread with its answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Literal

from aws_lambda_powertools.metrics import MetricUnit

from agent_wait import Policy, canonical_json
from agent_wait.errors import (
    AnswerConflictError,
    AnswerInvalidError,
    PreconditionFailedError,
    PreconditionRequiredError,
    QuestionClosedError,
    ResponderNotAllowedError,
)
from wait_service.ledger import ANSWERED, CLOSED, Ledger, QuestionRecord, normalize_json, parse_time, utcnow
from wait_service.metric_names import QUESTIONS_ANSWERED, QUESTIONS_EXPIRED, TIME_TO_ANSWER
from wait_service.observability import metrics
from wait_service.resources import API_TIMEOUT_SECONDS

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from pydantic import JsonValue

    from wait_service.inbox import Inbox

ANONYMOUS = "anonymous"
# How long the reply that recorded an answer may still be on its way to enqueueing the resume:
# no api invocation outlives its Lambda timeout. Only an answer standing longer than this without
# `resume_enqueued_at` was left by a reply that died, and is safe to recover.
RESUME_LEASE = timedelta(seconds=API_TIMEOUT_SECONDS + 1)


@dataclass(frozen=True)
class ReplyOutcome:
    """``created`` is True for the reply whose answer was recorded (HTTP 202)."""

    question_id: str
    status: Literal["answered"]
    created: bool


def etag_for(digest: str) -> str:
    """The strong ETag of a question: its digest in double quotes.

    Examples
    --------
    >>> etag_for("abc")
    '"abc"'
    """
    return f'"{digest}"'


def if_match_matches(header: str, digest: str) -> bool:
    """Whether an ``If-Match`` value names ``digest``.

    Quoted or bare, weak (``W/``) or strong, one tag or a comma-separated list; ``*`` matches
    any current question.

    Examples
    --------
    >>> if_match_matches('W/"abc"', "abc"), if_match_matches('"x", abc', "abc"), if_match_matches("x", "abc")
    (True, True, False)
    """
    for tag in header.split(","):
        tag = tag.strip()
        if tag == "*":
            return True
        if tag[:2] in ("W/", "w/"):
            tag = tag[2:].strip()
        if tag.strip('"') == digest:
            return True
    return False


def same_answer(a: JsonValue, b: JsonValue) -> bool:
    """Answers compare by canonical JSON after the ledger's number normalisation."""
    return canonical_json(normalize_json(a)) == canonical_json(normalize_json(b))


class ReplyService:
    """Records a human's answer to a question and enqueues the resume of its thread.

    Parameters
    ----------
    ledger:
        The question ledger.
    inbox:
        Where the resume message goes.
    clock:
        Current UTC time; injected by tests.

    Examples
    --------
    >>> service = ReplyService(Ledger("ledger"), Inbox(url))  # doctest: +SKIP
    >>> service.reply("q-1", {"action": "approve"}, principal="ann", if_match='"<digest>"')  # doctest: +SKIP
    ReplyOutcome(question_id='q-1', status='answered', created=True)
    """

    def __init__(self, ledger: Ledger, inbox: Inbox, *, clock: Callable[[], datetime] = utcnow) -> None:
        self.ledger = ledger
        self.inbox = inbox
        self._clock = clock

    def reply(
        self,
        question_id: str,
        answer: JsonValue,
        *,
        principal: str,
        if_match: str | None = None,
        reason: str | None = None,
    ) -> ReplyOutcome:
        """Apply one reply; raises an ``agent_wait.errors`` error for every refusal.

        Raises
        ------
        QuestionNotFoundError, ResponderNotAllowedError, PreconditionRequiredError,
        PreconditionFailedError, AnswerInvalidError, QuestionClosedError, AnswerConflictError
        """
        question = self.ledger.get_question(question_id)
        policy = Policy.model_validate(question.policy)
        self._check_responder(question, policy, principal)
        self._check_binding(question, policy, if_match)
        try:
            policy.check_answer(answer, question=question.question)
        except AnswerInvalidError as exc:
            # The policy does not know which question it belongs to; the api's error names it.
            raise AnswerInvalidError(exc.message, field=exc.field, question_id=question_id) from exc
        if question.status in ANSWERED:
            return self._repeat(question, answer)
        self._check_open(question)
        current = self.ledger.record_answer(question_id, answer, answered_by=principal, reason=reason)
        if current is None:
            self.inbox.resume(question.thread_id, question_id, answer)
            self.ledger.mark_resume_enqueued(question_id)
            self._count_answer(question)
            return ReplyOutcome(question_id, "answered", created=True)
        # Lost the conditional write: somebody answered or closed the question meanwhile. The
        # winner is enqueueing the resume right now; only a reply that finds an answer standing
        # from before (first read, above) recovers a resume that was never enqueued.
        if current.status in ANSWERED:
            return self._repeat(current, answer, recover=False)
        self._check_open(current)
        raise QuestionClosedError(
            f"question {question_id} is {current.status}", status=current.status, question_id=question_id
        )

    def _check_responder(self, question: QuestionRecord, policy: Policy, principal: str) -> None:
        # An empty list admits any caller the api authenticated (or `anonymous` on the local
        # stack: the api refuses a request without a principal from anywhere else).
        if policy.responders and principal not in policy.responders:
            raise ResponderNotAllowedError(
                f"{principal} may not answer this question",
                principal=principal,
                question_id=question.question_id,
            )

    def _check_binding(self, question: QuestionRecord, policy: Policy, if_match: str | None) -> None:
        if if_match is None or not if_match.strip():
            if policy.bind:
                raise PreconditionRequiredError(
                    "this question binds the answer to what was asked: send its ETag as If-Match",
                    question_id=question.question_id,
                )
            return
        if not if_match_matches(if_match, question.digest):
            raise PreconditionFailedError(
                "If-Match does not match the question's digest: the question changed since it was read",
                question_id=question.question_id,
            )

    def _check_open(self, question: QuestionRecord) -> None:
        if question.status in CLOSED:
            raise QuestionClosedError(
                f"question {question.question_id} is {question.status}",
                status=question.status,
                question_id=question.question_id,
            )
        if question.expired_at(self._clock()):
            # Close it here too: the expiry schedule may not have fired yet.
            if self.ledger.mark_expired(question.question_id, actor="api"):
                metrics.add_metric(name=QUESTIONS_EXPIRED, unit=MetricUnit.Count, value=1)
            raise QuestionClosedError(
                f"question {question.question_id} expired at {question.expires_at}",
                status="expired",
                question_id=question.question_id,
            )

    def _count_answer(self, question: QuestionRecord) -> None:
        metrics.add_metric(name=QUESTIONS_ANSWERED, unit=MetricUnit.Count, value=1)
        if question.created_at:
            waited = self._clock() - parse_time(question.created_at)
            metrics.add_metric(
                name=TIME_TO_ANSWER, unit=MetricUnit.Milliseconds, value=waited.total_seconds() * 1000
            )

    def _resume_abandoned(self, question: QuestionRecord) -> bool:
        """An answer recorded without its resume by a reply that can no longer be running.

        A repeat that reads the question between the winner's write and its enqueue must not send
        too: the winner is about to, and a second send is exactly the duplicate the first-answer
        rule promises never to make.
        """
        if question.status != "answered" or question.resume_enqueued_at is not None:
            return False
        if question.answered_at is None:
            return True
        return self._clock() - parse_time(question.answered_at) > RESUME_LEASE

    def _repeat(self, question: QuestionRecord, answer: JsonValue, *, recover: bool = True) -> ReplyOutcome:
        if not same_answer(question.answer, answer):
            raise AnswerConflictError(
                f"question {question.question_id} was already answered: the first answer stands",
                standing_answer=question.answer,
                question_id=question.question_id,
            )
        if recover and self._resume_abandoned(question):
            # The first reply recorded the answer but died before it enqueued the resume (a crash
            # or a timeout). Enqueueing now is safe: the FIFO deduplication id `resume:<id>` turns
            # even an unlikely concurrent send into one message.
            self.inbox.resume(question.thread_id, question.question_id, question.answer)
            self.ledger.mark_resume_enqueued(question.question_id)
        return ReplyOutcome(question.question_id, "answered", created=False)
