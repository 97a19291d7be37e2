"""Deciding a question: an answer, a quorum's votes, an expiry or a revocation.

Exactly one of them wins: each is a conditional move out of an open status
(:mod:`wait_service.ledger.statuses`), and the loser gets the question as it stood from its own
failed write (``ReturnValuesOnConditionCheckFailure``), so it needs no second read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from agent_wait.aws.dynamodb import to_attribute
from agent_wait.errors import QuestionNotFoundError
from wait_service.ledger.attributes import condition_failed, iso, question_key
from wait_service.ledger.questions import (
    EXPIRY_ACTOR,
    QuestionItems,
    QuestionRecord,
    _in_list,
    _on_rung,
    revoked_answer,
)
from wait_service.ledger.statuses import OPEN

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic import JsonValue


class QuestionDecisions(QuestionItems):
    """Records what decides a question; a part of :class:`~wait_service.ledger.QuestionStore`."""

    # -- deciding a question: exactly one of these wins -----------------------------------------

    def record_answer(
        self,
        question_id: str,
        answer: JsonValue,
        *,
        answered_by: str,
        reason: str | None = None,
        if_match: str | None = None,
        rung: int | None = None,
    ) -> QuestionRecord | None:
        """Move an open question to ``answered`` with a person's answer.

        ``rung`` (the escalation rung the responder was checked on) makes the write hold only while
        the question is still on it: an escalation landing first wins, and the answer is checked
        again against the new rung's responders.

        Returns ``None`` when this answer was recorded; when the conditional write lost (someone
        answered or closed it first), the question as it stood then, from the failed write itself
        (``ReturnValuesOnConditionCheckFailure``), so the loser needs no second read.
        """
        extra: dict[str, Any] = {"answer": answer, "answered_by": answered_by}
        if reason is not None:
            extra["reason"] = reason
        if if_match is not None:
            extra["if_match"] = if_match
        return self._decide(question_id, "answered", actor=answered_by, extra=extra, rung=rung)

    def record_vote(
        self,
        question_id: str,
        *,
        principal: str,
        vote: str,
        seen: int,
        voter: str | None = None,
        decide: JsonValue = None,
        reason: str | None = None,
        if_match: str | None = None,
        rung: int | None = None,
    ) -> QuestionRecord | None:
        """Count ``principal``'s ``vote`` (``approve`` or ``reject``) on an open quorum question.

        ``voter`` is the key the quorum counts the principal by (the same person in every session);
        the principal itself by default.

        The write holds only while the principal has not voted and the question holds ``seen``
        votes of this kind (what the caller read): two votes at once cannot both be counted as
        the same one. With ``decide`` (the vote that completes the quorum), the same write moves
        the question to ``answered`` with that answer, so exactly one vote decides it and the
        ledger's stream enqueues exactly one resume. ``rung``: as for :meth:`record_answer`.
        Returns ``None`` when counted, else the question as it stood.
        """
        now = self._clock()
        stamp = iso(now)
        entry: dict[str, Any] = {"principal": principal, "vote": vote, "at": stamp}
        if reason is not None:
            entry["reason"] = reason
        if if_match is not None:
            entry["if_match"] = if_match
        if decide is not None:
            extra: dict[str, Any] = {"answer": decide, "answered_by": principal, "answered_at": stamp}
            if reason is not None:
                extra["reason"] = reason
            if if_match is not None:
                extra["if_match"] = if_match
            request = self._move_request(
                question_id, "answered", actor=principal, extra=extra, now=now, rung=rung
            )
        else:
            values: dict[str, Any] = {
                ":now": {"S": stamp},
                ":empty": {"L": []},
                ":stage": to_attribute([{"stage": "voted", "at": stamp, "actor": principal, "detail": vote}]),
            }
            open_names = _in_list("o", OPEN, values)
            request = {
                "TableName": self.table_name,
                "Key": {"dedupe_key": {"S": question_key(question_id)}},
                "UpdateExpression": (
                    "SET updated_at = :now, lifecycle = list_append(if_not_exists(lifecycle, :empty), :stage)"
                ),
                "ConditionExpression": f"attribute_exists(dedupe_key) AND #s IN ({open_names})",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": values,
            }
        counted = "approvers" if vote == "approve" else "rejecters"
        request["ExpressionAttributeNames"].update(
            {"#votes": "votes", "#voters": "voters", "#counted": counted}
        )
        request["ExpressionAttributeValues"].update(
            {
                ":vote": to_attribute([entry]),
                ":voter": {"SS": [voter or principal]},
                ":principal": {"S": voter or principal},
                ":seen": {"N": str(seen)},
                ":none": {"L": []},
            }
        )
        request["UpdateExpression"] += (
            ", #votes = list_append(if_not_exists(#votes, :none), :vote) ADD #voters :voter, #counted :voter"
        )
        request["ConditionExpression"] += (
            " AND (attribute_not_exists(#voters) OR NOT contains(#voters, :principal))"
            + (" AND attribute_not_exists(#counted)" if seen == 0 else " AND size(#counted) = :seen")
        )
        if seen == 0:
            del request["ExpressionAttributeValues"][":seen"]
        if rung is not None and ":rung" not in request["ExpressionAttributeValues"]:
            request["ConditionExpression"] += _on_rung(
                rung, request["ExpressionAttributeNames"], request["ExpressionAttributeValues"]
            )
        return self._open_write(
            question_id, **{k: v for k, v in request.items() if k not in ("TableName", "Key")}
        )

    def record_expiry(
        self, question_id: str, answer: JsonValue, *, rung: int, expires_at: str | None = None
    ) -> QuestionRecord | None:
        """Expire an open question still on ladder ``rung``, answering it with ``answer``.

        The rung condition makes a late or repeated timer of an earlier rung change nothing;
        ``expires_at`` (the expiry the caller found due) makes an expiry lose to an extension that
        moved it meanwhile. Returns ``None`` when this expiry decided the question, else the
        question as it stood.
        """
        return self._decide(
            question_id,
            "expired",
            actor=EXPIRY_ACTOR,
            extra={"answer": answer, "answered_by": EXPIRY_ACTOR},
            rung=rung,
            expect={"expires_at": expires_at} if expires_at is not None else None,
        )

    def record_revocation(
        self, question_id: str, reason: str, *, revoked_by: str, rung: int | None = None
    ) -> QuestionRecord | None:
        """Revoke an open question; the thread will be resumed with :func:`revoked_answer`.

        ``rung``: as for :meth:`record_answer`. Returns ``None`` when this revocation decided the
        question, else the question as it stood.
        """
        return self._decide(
            question_id,
            "revoked",
            actor=revoked_by,
            extra={"answer": revoked_answer(reason), "answered_by": revoked_by, "reason": reason},
            detail=reason,
            rung=rung,
        )

    def _decide(
        self,
        question_id: str,
        to: str,
        *,
        actor: str,
        extra: dict[str, Any],
        detail: JsonValue = None,
        rung: int | None = None,
        expect: Mapping[str, str] | None = None,
    ) -> QuestionRecord | None:
        # One moment for the answer, its lifecycle stage and `updated_at`.
        now = self._clock()
        extra = extra | {"answered_at": iso(now)}
        try:
            self._move(
                question_id,
                to,
                actor=actor,
                extra=extra,
                detail=detail,
                rung=rung,
                raise_on_loss=True,
                now=now,
                expect=expect,
            )
        except ClientError as exc:
            if not condition_failed(exc):
                # Throttled or failed: nothing was decided, and the question may well exist.
                raise
            item = cast("Mapping[str, Any] | None", exc.response.get("Item"))
            if not item:
                raise QuestionNotFoundError(f"no question {question_id}", question_id=question_id) from exc
            return QuestionRecord.from_item(item)
        return None
