"""Who may act on a question besides its policy's responders, and when: delegation, extension,
separation of duties.

- **Separation of duties** (policy ``requester_cannot_approve``): the principal who started the run
  that raised the question (``requested_by``, recorded by ``POST /threads/{id}/runs`` and carried to
  every question the run raises) may not answer it. IAM callers are compared by the user or role
  they act as, never by the session name they chose, so a second session of the same role is the
  same person.
- **Delegation** (``POST /questions/{id}/delegate``): a responder hands the question to another
  principal, who becomes a responder of this question only.
- **Extension** (``POST /questions/{id}/extend``): a responder moves the expiry later, within the
  policy's ``max_extension`` (seconds in total; none allowed when unset).

Each is one conditional write of the question (the commit): a hand-over or an extension racing an
answer, an expiry or another extension either lands on the open question as it was read, or loses
and is refused; nothing else is written. The expiry timer follows from the question itself: the
schedule set before an extension fires, finds the expiry moved and arms the moved one
(:mod:`wait_service.lifecycle.unanswered`), so the question keeps exactly one live timer.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from agent_wait import Policy
from agent_wait.errors import (
    AlreadyResponderError,
    DelegationInvalidError,
    ExtensionInvalidError,
    QuestionDecidedError,
    RequesterCannotApproveError,
    ResponderNotAllowedError,
)
from wait_service.answers.decisions import Decisions
from wait_service.answers.responders import admits, iam_identity
from wait_service.ledger import parse_time, utcnow
from wait_service.ledger.questions import MAX_HANDOVERS

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_wait.policy import EscalationRung
    from wait_service.ledger import Ledger, QuestionRecord

__all__ = [
    "AuthorityService",
    "RungAuthority",
    "authority_at",
    "check_requester",
    "current_authority",
    "delegates_of",
    "has_rung_authority",
    "identity_key",
    "may_answer",
    "not_a_responder",
    "rungs_of",
    "same_principal",
]

# An STS ARN (an assumed-role session, a federated user) ends in a name its caller chose.
_STS_ARN = re.compile(r"arn:aws[a-z-]*:sts::")
# A write that lost to another change of the still-open question is tried again on a fresh read
# this many times (each loss means somebody else's write landed: it cannot go on for long).
ATTEMPTS = 5


def same_principal(a: str, b: str) -> bool:
    """Whether two principals are the same person for separation of duties.

    IAM ARNs compare by the user or role they name (an assumed-role session by its role: the
    session name is the caller's choice); anything else compares exactly.

    Examples
    --------
    >>> same_principal("arn:aws:sts::123456789012:assumed-role/Ops/alice",
    ...                "arn:aws:sts::123456789012:assumed-role/Ops/bob")
    True
    >>> same_principal("arn:aws:iam::123456789012:role/Ops", "arn:aws:sts::123456789012:assumed-role/Ops/x")
    True
    >>> same_principal("alice", "Alice"), same_principal("slack:T1:U1", "slack:T1:U1")
    (False, True)
    """
    if a == b:
        return True
    left, right = iam_identity(a), iam_identity(b)
    if left is None or right is None:
        return False
    return (left.kind, left.partition, left.account, left.name) == (
        right.kind,
        right.partition,
        right.account,
        right.name,
    )


def identity_key(principal: str) -> str:
    """The one key per person a quorum counts: IAM ARNs by user or role, anything else as is.

    Examples
    --------
    >>> identity_key("arn:aws:sts::123456789012:assumed-role/Ops/alice")
    'iam:role:aws:123456789012:Ops'
    >>> identity_key("slack:T1:U9")
    'slack:T1:U9'
    """
    identity = iam_identity(principal)
    if identity is None:
        return principal
    return f"iam:{identity.kind}:{identity.partition}:{identity.account}:{identity.name}"


def quorum_summary(question: QuestionRecord) -> str | None:
    """Where a quorum question stands, as people read it; ``None`` when one answer decides.

    Examples
    --------
    >>> from types import SimpleNamespace as Q
    >>> quorum_summary(Q(policy={"approvals_required": 3}, approvers=("ann", "bob"), rejecters=()))
    '2 of 3 approvals'
    >>> quorum_summary(Q(policy={"approvals_required": 2, "rejections_required": 2},
    ...                  approvers=(), rejecters=("cy",)))
    '0 of 2 approvals, 1 of 2 rejections'
    >>> quorum_summary(Q(policy={}, approvers=(), rejecters=())) is None
    True
    """
    required = question.policy.get("approvals_required")
    if required is None:
        return None
    summary = f"{len(question.approvers)} of {int(required)} approvals"
    rejections_required = int(question.policy.get("rejections_required") or 1)
    if question.rejecters and rejections_required > 1:
        summary += f", {len(question.rejecters)} of {rejections_required} rejections"
    return summary


@dataclass(frozen=True)
class RungAuthority:
    """Who may answer a question on escalation rung ``number`` (0: not escalated).

    ``responders`` is the policy's own, joined (or, from a ``replace: true`` rung on, replaced)
    by each rung's up to ``number``; empty admits any authenticated caller. ``since`` is the last
    rung that replaced them (0: none): a delegation made before it no longer counts.
    """

    number: int
    route: str | None
    responders: tuple[str, ...]
    since: int = 0


def rungs_of(policy: Policy) -> list[EscalationRung]:
    """The policy's escalation ladder (empty when its expiry does not escalate)."""
    if policy.on_expiry is None or policy.on_expiry.action != "escalate":
        return []
    return list(policy.on_expiry.to)


def has_rung_authority(policy: Policy) -> bool:
    """Whether any rung of the ladder names its own responders (so who may answer depends on the rung).

    Examples
    --------
    >>> has_rung_authority(Policy(ttl=60, on_expiry={"action": "escalate", "to": ["managers"]}))
    False
    >>> has_rung_authority(Policy(ttl=60, on_expiry={"action": "escalate",
    ...                                              "to": [{"route": "leads", "responders": ["cy"]}]}))
    True
    """
    return any(rung.responders for rung in rungs_of(policy))


def authority_at(policy: Policy, number: int) -> RungAuthority:
    """Who may answer on rung ``number`` of the policy's ladder.

    Examples
    --------
    >>> ladder = {"action": "escalate", "to": [{"route": "leads", "responders": ["cy"]},
    ...                                        {"route": "vp", "responders": ["vi"], "replace": True}]}
    >>> policy = Policy(ttl=60, responders=["ann"], on_expiry=ladder)
    >>> [authority_at(policy, n).responders for n in (0, 1, 2)]
    [('ann',), ('ann', 'cy'), ('vi',)]
    >>> authority_at(policy, 2).route, authority_at(policy, 2).since
    ('vp', 2)
    """
    responders = list(policy.responders)
    since = 0
    route: str | None = None
    for index, rung in enumerate(rungs_of(policy)[:number], start=1):
        route = rung.route
        if not rung.responders:
            continue
        if rung.replace:
            responders, since = list(rung.responders), index
        elif responders:
            # An empty list admits anyone already: a rung's names add nothing to it.
            responders += [r for r in rung.responders if r not in responders]
    return RungAuthority(number, route, tuple(responders), since)


def current_authority(question: QuestionRecord, policy: Policy) -> RungAuthority:
    """Who may answer ``question`` on the rung it is on now."""
    return authority_at(policy, question.escalation)


def delegates_of(question: QuestionRecord, authority: RungAuthority) -> tuple[str, ...]:
    """The question's delegates who still count: all of them, unless a rung replaced the responders
    after they were handed the question (a delegation records the rung it was made on)."""
    if authority.since == 0:
        return question.delegates
    return tuple(
        sorted({str(d.get("to")) for d in question.delegations if int(d.get("rung") or 0) >= authority.since})
    )


def may_answer(question: QuestionRecord, policy: Policy, principal: str) -> bool:
    """Whether ``principal`` is a responder of ``question`` on its current rung, or a delegate."""
    authority = current_authority(question, policy)
    if admits(authority.responders, principal):
        return True
    return any(admits([delegate], principal) for delegate in delegates_of(question, authority))


def not_a_responder(
    question: QuestionRecord, policy: Policy, principal: str, message: str
) -> ResponderNotAllowedError:
    """The 403 refusing ``principal``, naming the rung whose responders were checked."""
    authority = current_authority(question, policy)
    if authority.number:
        message += f" (escalation rung {authority.number}, {authority.route})"
    return ResponderNotAllowedError(
        message,
        principal=principal,
        question_id=question.question_id,
        rung=authority.number,
        route=authority.route,
    )


def check_requester(question: QuestionRecord, policy: Policy, principal: str) -> None:
    """Refuse (403 ``requester_cannot_approve``) an answer from the run's starter when the policy says so.

    A question whose starter is unknown (its run was started by a message written by hand) is
    refused to everyone: the rule cannot be shown to hold, and the question still expires or can
    be revoked.
    """
    if not policy.requester_cannot_approve:
        return
    requester = question.requested_by
    if requester is None or same_principal(requester, principal):
        who = "nobody knows who started the run" if requester is None else "you started the run"
        raise RequesterCannotApproveError(
            f"{principal} may not answer this question: {who}, and its policy separates requester "
            "from approver (requester_cannot_approve)",
            principal=principal,
            question_id=question.question_id,
        )


class AuthorityService:
    """Delegates and extends questions on behalf of their responders.

    Parameters
    ----------
    ledger:
        The question ledger.
    clock:
        Current UTC time; injected by tests.

    Examples
    --------
    >>> service = AuthorityService(Ledger("ledger"))  # doctest: +SKIP
    >>> service.delegate("q-1", "bob", reason="on leave", principal="ann").delegates  # doctest: +SKIP
    ('bob',)
    """

    def __init__(self, ledger: Ledger, *, clock: Callable[[], datetime] = utcnow) -> None:
        self.ledger = ledger
        self._clock = clock
        self.decisions = Decisions(ledger, clock=clock)

    def delegate(self, question_id: str, to: str, *, reason: str, principal: str) -> QuestionRecord:
        """Make ``to`` a responder of this one question; returns the question as it stands.

        Raises
        ------
        QuestionNotFoundError
        ResponderNotAllowedError
            ``principal`` is not a responder of the question (403).
        DelegationInvalidError
            ``to`` is ``principal`` (or the same IAM user or role), an STS session ARN, or, under
            separation of duties, the run's starter (422, ``field`` ``to``).
        AlreadyResponderError
            ``to`` may answer already: named by the policy (or the policy names nobody, so anyone
            may), or delegated to before (409).
        QuestionDecidedError
            The question is decided (409).
        """
        to = to.strip()
        for _ in range(ATTEMPTS):
            question = self.ledger.get_question(question_id)
            policy = Policy.model_validate(question.policy)
            self._check_responder(question, policy, principal)
            question = self._open(self.decisions.close_if_due(question))
            lost = self._delegate_on_rung(question, policy, to, reason=reason, principal=principal)
            if lost is None:
                return self.ledger.get_question(question_id)
            # Moved up its ladder meanwhile: check the delegator against the new rung's responders.
        raise QuestionDecidedError(
            f"question {question_id} kept changing while it was being delegated: read it and try again",
            status="changing",
            question_id=question_id,
        )

    def _delegate_on_rung(
        self, question: QuestionRecord, policy: Policy, to: str, *, reason: str, principal: str
    ) -> QuestionRecord | None:
        """One delegation on the rung ``question`` is on: ``None`` when recorded, the question as it
        stands when it moved to another rung meanwhile; raises every refusal."""
        question_id = question.question_id
        if same_principal(to, principal) or admits([to], principal):
            raise DelegationInvalidError(
                "a question cannot be delegated to oneself", field="to", question_id=question_id
            )
        if _STS_ARN.match(to):
            raise DelegationInvalidError(
                "an STS session ARN admits nobody (its session name is the caller's choice): name the role",
                field="to",
                question_id=question_id,
            )
        if (
            policy.requester_cannot_approve
            and question.requested_by
            and same_principal(to, question.requested_by)
        ):
            raise DelegationInvalidError(
                f"{to} started the run and may not answer its question (requester_cannot_approve)",
                field="to",
                question_id=question_id,
            )
        if len(question.delegations) >= MAX_HANDOVERS:
            raise DelegationInvalidError(
                f"question {question_id} was delegated {MAX_HANDOVERS} times already: no more",
                field="to",
                question_id=question_id,
            )
        if may_answer(question, policy, to):
            raise AlreadyResponderError(
                f"{to} may answer this question already", principal=to, question_id=question_id
            )
        on_rung = question.escalation if has_rung_authority(policy) else None
        since = current_authority(question, policy).since
        lost = self.ledger.record_delegation(
            question_id, to, by=principal, reason=reason, rung=on_rung, since=since
        )
        if lost is None:
            return None
        self._open(lost)
        if on_rung is not None and lost.escalation != on_rung:
            return lost
        if len(lost.delegations) >= MAX_HANDOVERS:
            raise DelegationInvalidError(
                f"question {question_id} was delegated {MAX_HANDOVERS} times already: no more",
                field="to",
                question_id=question_id,
            )
        raise AlreadyResponderError(
            f"{to} may answer this question already", principal=to, question_id=question_id
        )

    def extend(
        self,
        question_id: str,
        *,
        reason: str,
        principal: str,
        by_seconds: int | None = None,
        until: datetime | None = None,
    ) -> QuestionRecord:
        """Move the question's expiry ``by_seconds`` later, or to ``until``; returns it as it stands.

        Raises
        ------
        QuestionNotFoundError
        ResponderNotAllowedError
            ``principal`` is not a responder of the question (403).
        ExtensionInvalidError
            The policy allows no extension, or not that much more (``max_extension``), the question
            never expires, or ``until`` is not later than the expiry (422, ``field`` names the
            request's field).
        QuestionDecidedError
            The question is decided, or its expiry has passed (409).
        """
        if (by_seconds is None) == (until is None):
            raise ValueError("give exactly one of by_seconds and until")
        field = "by_seconds" if by_seconds is not None else "until"
        for _ in range(ATTEMPTS):
            question = self.ledger.get_question(question_id)
            policy = Policy.model_validate(question.policy)
            self._check_responder(question, policy, principal)
            question = self._open(self.decisions.close_if_due(question))
            if question.expires_at is None:
                raise ExtensionInvalidError(
                    "this question never expires: there is no expiry to move",
                    field=field,
                    question_id=question_id,
                )
            current = parse_time(question.expires_at)
            if current <= self._clock():
                raise QuestionDecidedError(
                    f"question {question_id} is past its expiry ({question.expires_at}): "
                    "it can no longer be extended",
                    status=question.status,
                    question_id=question_id,
                )
            target = current + timedelta(seconds=by_seconds) if by_seconds is not None else until
            assert target is not None
            if target <= current:
                raise ExtensionInvalidError(
                    f"until must be later than the current expiry {question.expires_at}",
                    field=field,
                    question_id=question_id,
                )
            seconds = math.ceil((target - current).total_seconds())
            if policy.max_extension is None:
                raise ExtensionInvalidError(
                    "this question's policy allows no extension (max_extension is not set)",
                    field=field,
                    question_id=question_id,
                )
            if len(question.extensions) >= MAX_HANDOVERS:
                raise ExtensionInvalidError(
                    f"question {question_id} was extended {MAX_HANDOVERS} times already: no more",
                    field=field,
                    question_id=question_id,
                )
            room = policy.max_extension - question.extended_seconds
            if seconds > room:
                raise ExtensionInvalidError(
                    f"the policy allows {policy.max_extension} s of extension in total (max_extension); "
                    f"{question.extended_seconds} s are used, so at most {max(room, 0)} s more",
                    field=field,
                    question_id=question_id,
                )
            lost = self.ledger.record_extension(
                question_id,
                seen=question,
                until=target,
                seconds=seconds,
                max_total=policy.max_extension,
                by=principal,
                reason=reason,
            )
            if lost is None:
                return self.ledger.get_question(question_id)
            # Decided meanwhile (refused below), or still open with another expiry: read again.
            self._open(lost)
        raise QuestionDecidedError(
            f"question {question_id} kept changing while it was being extended: read it and try again",
            status="changing",
            question_id=question_id,
        )

    def _check_responder(self, question: QuestionRecord, policy: Policy, principal: str) -> None:
        if not may_answer(question, policy, principal):
            raise not_a_responder(
                question, policy, principal, f"{principal} is not a responder of this question"
            )

    @staticmethod
    def _open(question: QuestionRecord) -> QuestionRecord:
        if not question.is_open:
            raise QuestionDecidedError(
                f"question {question.question_id} is {question.status}: it can no longer be changed",
                status=question.status,
                standing_answer=question.answer,
                question_id=question.question_id,
            )
        return question
