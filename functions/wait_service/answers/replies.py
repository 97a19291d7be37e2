"""The reply logic: who may answer, what they answered, and whether it is the first answer.

Checks run cheapest and least stateful first — the question exists, the responder is allowed,
the reply is bound to the digest the responder saw, the answer fits the policy — and only then
does the conditional write decide between the first answer (recorded) and a later one
(idempotent repeat or conflict). That write is the commit: the resume follows from the ledger's
stream (the dispatcher in :mod:`wait_service.stream.ledger_stream` enqueues it for the change that
decided the question, and only for that one), so a losing reply can never resume the thread with
its answer, and a winner that dies right after its write still has its resume sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from aws_lambda_powertools.metrics import MetricUnit

from agent_wait import Policy, canonical_json
from agent_wait.errors import (
    AlreadyVotedError,
    AnswerConflictError,
    AnswerInvalidError,
    PreconditionFailedError,
    PreconditionRequiredError,
    QuestionClosedError,
)
from wait_service.answers.authority import (
    check_requester,
    has_rung_authority,
    identity_key,
    may_answer,
    not_a_responder,
    rungs_of,
)
from wait_service.answers.decisions import Decisions
from wait_service.answers.responders import admits
from wait_service.constants import RECORD_ATTRIBUTES
from wait_service.ledger import Ledger, QuestionRecord, normalize_json, utcnow
from wait_service.ledger.statuses import ANSWERED, phase_of
from wait_service.metric_names import QUESTIONS_REVOKED
from wait_service.observability import metrics

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from pydantic import JsonValue

ANONYMOUS = "anonymous"
# A reply that lost its write to an escalation is checked again on the new rung, this many times
# at most (a ladder is short, and each loss means the question moved one rung up).
RUNG_ATTEMPTS = 5
# What a reply is checked against: all of a question but its history and what only the runner,
# the dispatcher and the lifecycle function read. The reply is the api's busiest route; the
# attributes left out (the lifecycle above all, a list that grows with every move) are most of
# what a read of the question would otherwise parse and decode for nothing.
NOT_READ_BY_REPLIES = frozenset(
    {
        "lifecycle",
        "envelope",
        "source",
        "reply_url",
        "event_id",
        "receipt",
        "error",
        "reminders_sent",
        "resumed_at",
        "updated_at",
    }
)
REPLY_READS = tuple(name for name in RECORD_ATTRIBUTES if name not in NOT_READ_BY_REPLIES)


class _RungMoved(Exception):
    """The question moved up its ladder between the responder check and the write."""


def _rung_condition(question: QuestionRecord, policy: Policy) -> int | None:
    """The rung a write must find the question on: the one its responders were checked on, when
    the ladder's rungs name responders (else who may answer does not depend on the rung)."""
    return question.escalation if has_rung_authority(policy) else None


def _check_rung(lost: QuestionRecord | None, rung: int | None) -> None:
    if lost is not None and rung is not None and lost.is_open and lost.escalation != rung:
        raise _RungMoved


def counts_approval(question: QuestionRecord, policy: Policy, principal: str) -> bool:
    """Whether ``principal``'s approval counts toward the quorum: anyone's without ``approvals_from``;
    else those it names, and the responders the rungs the question reached named (escalating a
    quorum question hands the approval to them too).

    Examples
    --------
    >>> from types import SimpleNamespace as Q
    >>> policy = Policy(ttl=60, responders=["ann", "bob", "cy"], approvals_required=2, approvals_from=["ann"],
    ...                 on_expiry={"action": "escalate", "to": [{"route": "leads", "responders": ["lee"]}]})
    >>> [counts_approval(Q(escalation=n), policy, "lee") for n in (0, 1)]
    [False, True]
    """
    if not policy.approvals_from or admits(policy.approvals_from, principal):
        return True
    named = [r for rung in rungs_of(policy)[: question.escalation] for r in rung.responders or ()]
    return bool(named) and admits(named, principal)


# A quorum vote that lost its write to another vote is counted again on the question it lost to.
VOTE_ATTEMPTS = 10


@dataclass(frozen=True)
class ReplyOutcome:
    """``created`` is True for the reply whose answer (or quorum vote) was recorded (HTTP 202).

    ``status`` is ``voted`` for a quorum vote that did not decide the question.
    """

    question_id: str
    status: Literal["answered", "voted"]
    created: bool


def etag_for(digest: str) -> str:
    """The strong ETag of a question: its digest in double quotes.

    Examples
    --------
    >>> etag_for("abc")
    '"abc"'
    """
    return f'"{digest}"'


def if_match_matches(header: str, digest: str, *, strict: bool = True) -> bool:
    """Whether an ``If-Match`` value admits the question with ``digest``.

    ``strict`` (a binding policy): the value must be exactly the question's strong ETag. A binding
    reply names the one proposal it approves, so ``*`` (any version), a weak tag ``W/"..."``, an
    unquoted digest or a list of tags all fail. Otherwise HTTP's rules apply: ``*`` or a list
    holding the strong ETag.

    Examples
    --------
    >>> if_match_matches('"abc"', "abc"), if_match_matches(' "abc" ', "abc")
    (True, True)
    >>> [if_match_matches(h, "abc") for h in ("*", 'W/"abc"', "abc", '"x", "abc"')]
    [False, False, False, False]
    >>> [if_match_matches(h, "abc", strict=False) for h in ("*", '"x", "abc"', "abc")]
    [True, True, False]
    """
    if strict:
        return header.strip() == etag_for(digest)
    tags = [tag.strip() for tag in header.split(",")]
    return "*" in tags or etag_for(digest) in tags


def same_answer(a: JsonValue, b: JsonValue) -> bool:
    """Answers compare by canonical JSON after the ledger's number normalisation."""
    return canonical_json(normalize_json(a)) == canonical_json(normalize_json(b))


class ReplyService:
    """Records a person's answer to a question (or its revocation); the resume follows from the ledger.

    Parameters
    ----------
    ledger:
        The question ledger.
    clock:
        Current UTC time; injected by tests.

    Examples
    --------
    >>> service = ReplyService(Ledger("ledger"))  # doctest: +SKIP
    >>> service.reply("q-1", {"action": "approve"}, principal="ann", if_match='"<digest>"')  # doctest: +SKIP
    ReplyOutcome(question_id='q-1', status='answered', created=True)
    """

    def __init__(self, ledger: Ledger, *, clock: Callable[[], datetime] = utcnow) -> None:
        self.ledger = ledger
        self._clock = clock
        self.decisions = Decisions(ledger, clock=clock)

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
        for _ in range(RUNG_ATTEMPTS):
            try:
                return self._reply_on_rung(
                    self.ledger.get_question(question_id, reading=REPLY_READS),
                    answer,
                    principal=principal,
                    if_match=if_match,
                    reason=reason,
                )
            except _RungMoved:
                # Escalated between the read and the write: check the new rung's responders.
                continue
        raise AnswerConflictError(
            f"question {question_id} kept moving up its escalation ladder while it was answered: "
            "read it and answer again",
            standing_answer=None,
            question_id=question_id,
        )

    def _reply_on_rung(
        self,
        question: QuestionRecord,
        answer: JsonValue,
        *,
        principal: str,
        if_match: str | None,
        reason: str | None,
    ) -> ReplyOutcome:
        """One reply checked against the rung ``question`` is on; :class:`_RungMoved` if it moved."""
        question_id = question.question_id
        policy = Policy.model_validate(question.policy)
        self._check_responder(question, policy, principal)
        check_requester(question, policy, principal)
        self._check_binding(question, policy, if_match)
        try:
            policy.check_answer(answer, question=question.question)
        except AnswerInvalidError as exc:
            # The policy does not know which question it belongs to; the api's error names it.
            raise AnswerInvalidError(exc.message, field=exc.field, question_id=question_id) from exc
        question = self.decisions.close_if_due(question)
        if policy.approvals_required is not None:
            return self._vote(question, policy, answer, principal=principal, if_match=if_match, reason=reason)
        if not question.is_open:
            return _repeat(question, answer)
        rung = _rung_condition(question, policy)
        current = self.ledger.record_answer(
            question_id, answer, answered_by=principal, reason=reason, if_match=if_match, rung=rung
        )
        _check_rung(current, rung)
        if current is None:
            # Recorded: the ledger's stream has the resume enqueued (no send from here), and the
            # dispatcher counts the answer there, once (wait_service.stream.analytics).
            return ReplyOutcome(question_id, "answered", created=True)
        # Lost the conditional write: somebody answered or closed the question meanwhile; the
        # winner's write has its resume enqueued.
        return _repeat(current, answer)

    def revoke(self, question_id: str, reason: str, *, principal: str) -> QuestionRecord:
        """Withdraw an open question; the thread is resumed with a rejection naming ``reason``.

        Raises
        ------
        QuestionNotFoundError, ResponderNotAllowedError
        AnswerConflictError
            An answer (a person's, or an expiry's) decided it first; the standing answer is returned.
        QuestionClosedError
            It was revoked already.
        """
        for _ in range(RUNG_ATTEMPTS):
            question = self.ledger.get_question(question_id)
            policy = Policy.model_validate(question.policy)
            self._check_responder(question, policy, principal)
            question = self.decisions.close_if_due(question)
            if question.is_open:
                rung = _rung_condition(question, policy)
                lost = self.ledger.record_revocation(question_id, reason, revoked_by=principal, rung=rung)
                if lost is None:
                    # The revocation's resume (a rejection) follows from the ledger's stream.
                    revoked = self.ledger.get_question(question_id)
                    metrics.add_metric(name=QUESTIONS_REVOKED, unit=MetricUnit.Count, value=1)
                    return revoked
                if rung is not None and lost.is_open and lost.escalation != rung:
                    continue  # escalated meanwhile: check the new rung's responders
                question = lost
            break
        if phase_of(question.status) == "revoked":
            raise QuestionClosedError(
                f"question {question_id} was revoked already",
                status=question.status,
                standing_answer=question.answer,
                question_id=question_id,
            )
        raise AnswerConflictError(
            f"question {question_id} is {question.status}: its answer stands and can no longer be revoked",
            standing_answer=question.answer,
            question_id=question_id,
        )

    def _check_responder(self, question: QuestionRecord, policy: Policy, principal: str) -> None:
        # An empty list admits any caller the api authenticated (or `anonymous` on the local
        # stack: the api refuses a request without a principal from anywhere else); an IAM
        # role entry admits its sessions, never a session name (`wait_service.answers.responders`).
        # A principal a responder delegated the question to answers it too (`wait_service.answers.authority`).
        # On an escalation ladder whose rungs name responders, the current rung's count.
        if not may_answer(question, policy, principal):
            raise not_a_responder(question, policy, principal, f"{principal} may not answer this question")

    def _check_binding(self, question: QuestionRecord, policy: Policy, if_match: str | None) -> None:
        if if_match is None or not if_match.strip():
            if policy.bind:
                raise PreconditionRequiredError(
                    "this question binds the answer to what was asked: send its ETag as If-Match",
                    question_id=question.question_id,
                )
            return
        if not if_match_matches(if_match, question.digest, strict=policy.bind):
            # The current tag is not in the message: a client must read the question (and show it
            # to the person) again, not retry blindly with a tag it never displayed.
            raise PreconditionFailedError(
                "If-Match must be the question's ETag exactly as GET /questions/{id} returned it: "
                "the question changed since it was read, or the tag is not in that form",
                question_id=question.question_id,
            )

    def _vote(
        self,
        question: QuestionRecord,
        policy: Policy,
        answer: JsonValue,
        *,
        principal: str,
        if_match: str | None,
        reason: str | None,
    ) -> ReplyOutcome:
        """Count one vote of a quorum; the vote that completes it decides the question.

        Every vote is bound to the same digest (``_check_binding`` ran), approves the proposal as
        it is, and counts once per principal: a second vote is 409 ``already_voted``, a vote after
        the decision 409 ``answer_conflict`` (it was not counted).
        """
        question_id = question.question_id
        # An approval policy's answer is an object (`check_answer` ran).
        fields: Mapping[str, Any] = answer if isinstance(answer, Mapping) else {}
        vote = fields.get("action")
        if vote == "approve" and fields.get("args"):
            raise AnswerInvalidError(
                "a quorum approves the proposal as it is: approvals with different edits cannot be counted "
                "together (reject it, with a reason, to ask for a change)",
                field="answer.args",
                question_id=question_id,
            )
        if vote == "approve" and not counts_approval(question, policy, principal):
            raise not_a_responder(
                question,
                policy,
                principal,
                f"{principal}'s approval does not count toward this question's quorum (approvals_from)",
            )
        rung = _rung_condition(question, policy)
        for _ in range(VOTE_ATTEMPTS):
            voters = {identity_key(str(v.get("principal"))) for v in question.votes}
            if identity_key(principal) in voters:
                raise AlreadyVotedError(
                    f"{principal} voted on question {question_id} already: "
                    "a quorum counts one vote per principal",
                    principal=principal,
                    question_id=question_id,
                )
            if not question.is_open:
                raise AnswerConflictError(
                    f"question {question_id} was decided before this vote: it was not counted",
                    standing_answer=question.answer,
                    question_id=question_id,
                )
            if vote == "approve":
                seen, required = len(question.approvers), policy.approvals_required or 1
                decision: JsonValue = {"action": "approve"}
            else:
                seen, required = len(question.rejecters), policy.rejections_required or 1
                decision = answer
            decides = seen + 1 >= required
            lost = self.ledger.record_vote(
                question_id,
                principal=principal,
                voter=identity_key(principal),
                vote=str(vote),
                seen=seen,
                decide=decision if decides else None,
                reason=reason,
                if_match=if_match,
                rung=rung,
            )
            _check_rung(lost, rung)
            if lost is None:
                if decides:
                    return ReplyOutcome(question_id, "answered", created=True)
                return ReplyOutcome(question_id, "voted", created=True)
            # Another vote (or a decision) landed between the read and the write: count again.
            question = lost
        raise AnswerConflictError(
            f"question {question_id} kept changing while the vote was counted: read it and vote again",
            standing_answer=question.answer,
            question_id=question_id,
        )


def _repeat(question: QuestionRecord, answer: JsonValue) -> ReplyOutcome:
    """A reply to a decided question: 410 if the system closed it, else 200 or 409.

    200 means the resume is enqueued or certain to be: the decision is in the ledger, and the
    ledger's stream enqueues the resume of every recorded decision, whatever became of the
    request that wrote it.
    """
    if question.status not in ANSWERED:
        raise QuestionClosedError(
            f"question {question.question_id} is {question.status}"
            + (f" since {question.answered_at}" if question.answered_at else ""),
            status=question.status,
            standing_answer=question.answer,
            question_id=question.question_id,
        )
    if not same_answer(question.answer, answer):
        raise AnswerConflictError(
            f"question {question.question_id} was already answered: the first answer stands",
            standing_answer=question.answer,
            question_id=question.question_id,
        )
    return ReplyOutcome(question.question_id, "answered", created=False)
