"""A question's lifecycle moves besides its decision: delivered, reminded, escalated, resumed.

Each is a conditional write on the question's ``status`` (or, once it is closed, on its not being
resumed yet): a repeated timer or a redelivered message changes nothing the second time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_wait.aws.dynamodb import to_attribute
from wait_service.ledger.attributes import iso, question_key
from wait_service.ledger.questions import EXPIRY_ACTOR, QuestionItems, QuestionRecord, _in_list
from wait_service.ledger.statuses import CLOSED, OPEN

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from datetime import datetime

    from pydantic import JsonValue


class QuestionMoves(QuestionItems):
    """Moves a question along its lifecycle; a part of :class:`~wait_service.ledger.QuestionStore`."""

    # -- while it is open --------------------------------------------------------------------

    def record_escalation(
        self, question_id: str, *, rung: int, route: str, expires_at: datetime, seen: str | None = None
    ) -> bool:
        """Move an open question from ladder ``rung`` to ``rung + 1`` (``route``), with a new expiry.

        ``seen`` (the expiry found due) makes it lose to an extension that moved the expiry meanwhile.
        """
        return self._move(
            question_id,
            "escalated",
            actor=EXPIRY_ACTOR,
            extra={"escalation": rung + 1, "expires_at": iso(expires_at)},
            detail=route,
            rung=rung,
            expect={"expires_at": seen} if seen is not None else None,
        )

    def record_reminder(self, question_id: str, number: int) -> bool:
        """Note reminder ``number`` (1-based) of an open question; ``False`` if closed or already sent."""
        now = iso(self._clock())
        names = {"#s": "status", "#r": "reminders_sent"}
        values: dict[str, Any] = {
            ":now": {"S": now},
            ":empty": {"L": []},
            ":stage": to_attribute(
                [{"stage": "reminded", "at": now, "actor": EXPIRY_ACTOR, "detail": number}]
            ),
            ":n": {"N": str(number)},
            ":ns": {"NS": [str(number)]},
        }
        open_names = _in_list("o", OPEN, values)
        return self._update_if(
            TableName=self.table_name,
            Key={"dedupe_key": {"S": question_key(question_id)}},
            UpdateExpression=(
                "SET updated_at = :now, lifecycle = list_append(if_not_exists(lifecycle, :empty), :stage)"
                " ADD #r :ns"
            ),
            ConditionExpression=(
                f"attribute_exists(dedupe_key) AND #s IN ({open_names})"
                " AND (attribute_not_exists(#r) OR NOT contains(#r, :n))"
            ),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def mark_delivered(self, question_id: str, sinks: Iterable[str] = (), *, actor: str = "runner") -> bool:
        """``raised → delivered`` once every sink took the envelope; one lifecycle entry per sink."""
        return self._update_if(**self.delivered_write(question_id, sinks, actor=actor))

    def delivered_write(
        self, question_id: str, sinks: Iterable[str] = (), *, actor: str = "runner"
    ) -> dict[str, Any]:
        """The conditional ``UpdateItem`` of :meth:`mark_delivered`, as a request not yet sent.

        The runner sends it in the same transaction as the write recording the thread parked
        (:meth:`Ledger.parked`): one round trip instead of two.
        """
        details: list[JsonValue] = list(sinks) or [None]
        return self._move_request(question_id, "delivered", actor=actor, details=details)

    # -- after it was decided ----------------------------------------------------------------

    def record_receipt(self, question_id: str, receipt: Mapping[str, Any]) -> bool:
        """Keep what the resumed call reported; the first receipt stands (``False`` if one does)."""
        return self._update_if(
            TableName=self.table_name,
            Key={"dedupe_key": {"S": question_key(question_id)}},
            UpdateExpression="SET receipt = :receipt",
            ConditionExpression="attribute_exists(dedupe_key) AND attribute_not_exists(receipt)",
            ExpressionAttributeValues={":receipt": to_attribute(dict(receipt))},
        )

    def mark_resumed(
        self, question: QuestionRecord, *, actor: str = "runner", receipt: Mapping[str, Any] | None = None
    ) -> bool:
        """The thread ran on with the question's answer.

        A person's answer moves ``answered → resumed`` (also after a DLQ redrive, from
        ``resume_failed``); an expired or revoked question keeps its status and gains a
        ``resumed`` stage. ``False`` when it was already recorded (a duplicate resume): nothing
        is written then, ``receipt`` included. ``receipt`` (what the resumed call reported) is
        kept in the same write, as :meth:`record_receipt` keeps it: the first receipt stands.
        """
        return self._update_if(**self.resumed_write(question, actor=actor, receipt=receipt))

    def resumed_write(
        self, question: QuestionRecord, *, actor: str = "runner", receipt: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The conditional ``UpdateItem`` of :meth:`mark_resumed`, as a request not yet sent.

        Its parameters are also those of an ``Update`` in ``TransactWriteItems``: the runner sends
        it with the write recording the run's end (:meth:`Ledger.resumed_and_ended`).
        """
        first = {"receipt": dict(receipt)} if receipt is not None else None
        if question.status in CLOSED:
            return self._stage_request(question.question_id, "resumed", actor=actor, first=first)
        return self._move_request(question.question_id, "resumed", actor=actor, ends=True, first=first)

    def mark_resume_failed(
        self, question: QuestionRecord, error: str, *, actor: str = "runner", attempts: int | None = None
    ) -> bool:
        """The last attempt to resume the thread with the question's answer failed.

        ``attempts`` (how many were made) is kept as ``resume_attempts`` for the
        ``wait.resume_failed`` event.
        """
        extra: dict[str, Any] = {"error": error}
        if attempts is not None:
            extra["resume_attempts"] = attempts
        if question.status in CLOSED:
            return self._stage_after_close(question.question_id, "resume_failed", actor=actor, extra=extra)
        return self._move(question.question_id, "resume_failed", actor=actor, extra=extra)
