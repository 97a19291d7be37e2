"""Deciding a question because its time ran out: the part of the lifecycle the api shares.

Seed 002: exactly one of reply, expiry and revocation decides a question. The lifecycle function
applies an expiry when its timer fires; a reply that finds its question already past due applies
it itself (:meth:`Decisions.close_if_due`) rather than answering a question that is over. Either
way the decision is one conditional ledger write, and the ledger's stream enqueues its resume.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from wait_service.ledger import EXPIRED_ANSWER, Clock, Ledger, QuestionRecord, utcnow
from wait_service.metric_names import QUESTIONS_EXPIRED
from wait_service.observability import logger, metrics

if TYPE_CHECKING:
    from pydantic import JsonValue

__all__ = ["Decisions", "Escalate", "Expire", "on_expiry_action", "route_of"]


@dataclass(frozen=True)
class Escalate:
    """Move the question to rung ``number`` (1-based), routed to ``route``."""

    number: int
    route: str


@dataclass(frozen=True)
class Expire:
    """Decide the question with ``answer``."""

    answer: JsonValue


def on_expiry_action(policy: dict[str, Any], rung: int) -> Escalate | Expire:
    """What the ttl running out on ladder ``rung`` (0: not escalated) does to a question.

    Examples
    --------
    >>> ladder = {"on_expiry": {"action": "escalate", "to": ["managers", "directors"], "answer": None}}
    >>> on_expiry_action(ladder, 0), on_expiry_action(ladder, 1)
    (Escalate(number=1, route='managers'), Escalate(number=2, route='directors'))
    >>> on_expiry_action({"on_expiry": {"action": "escalate", "to": [{"route": "leads", "replace": True,
    ...                                 "responders": ["cy"]}]}}, 0)
    Escalate(number=1, route='leads')
    >>> on_expiry_action(ladder, 2)
    Expire(answer={'action': 'reject', 'reason': 'expired'})
    >>> on_expiry_action({"on_expiry": {"action": "default", "answer": {"action": "approve"}}}, 0)
    Expire(answer={'action': 'approve'})
    """
    on_expiry = policy.get("on_expiry") or {}
    default = on_expiry.get("answer")
    if on_expiry.get("action") == "escalate":
        routes = list(on_expiry.get("to") or [])
        if rung < len(routes):
            return Escalate(rung + 1, route_of(routes[rung]))
    return Expire(default if default is not None else dict(EXPIRED_ANSWER))


def route_of(rung: Any) -> str:
    """The route of a ladder entry as a policy's JSON holds it: a plain string, or a rung object.

    Examples
    --------
    >>> route_of("managers"), route_of({"route": "directors", "responders": ["cy"]})
    ('managers', 'directors')
    """
    return str(rung.get("route")) if isinstance(rung, dict) else str(rung)


class Decisions:
    """Decides questions by expiry; the ledger's stream enqueues the resume of each decision.

    Parameters
    ----------
    ledger:
        Where decisions are recorded.
    clock:
        Current UTC time; injected by tests.
    """

    def __init__(self, ledger: Ledger, *, clock: Clock = utcnow) -> None:
        self.ledger = ledger
        self._clock = clock

    def expire(self, question: QuestionRecord, answer: JsonValue, *, rung: int) -> QuestionRecord:
        """Decide ``question`` with ``answer`` because its ttl ran out on ``rung``; returns it as it stands.

        The winner counts the expiry (its resume follows from the ledger's stream); a loser
        changes nothing.
        """
        lost = self.ledger.record_expiry(
            question.question_id, answer, rung=rung, expires_at=question.expires_at
        )
        if lost is not None:
            return lost
        metrics.add_metric(name=QUESTIONS_EXPIRED, unit=MetricUnit.Count, value=1)
        logger.info("question expired", extra={"question_id": question.question_id, "rung": rung})
        return self.ledger.get_question(question.question_id)

    def close_if_due(self, question: QuestionRecord) -> QuestionRecord:
        """The question as it stands once an expiry that is due (but whose timer has not fired) applies.

        Only a final expiry applies here: a question due to move up its ladder stays answerable
        until the lifecycle function moves it, since escalating keeps it answerable anyway.
        """
        if not question.is_open or not question.expired_at(self._clock()):
            return question
        action = on_expiry_action(question.policy, question.escalation)
        if isinstance(action, Escalate):
            return question
        return self.expire(question, action.answer, rung=question.escalation)
