"""Authority over an open question: handing it to another responder, moving its expiry.

Each hand-over and each extension is a list entry on the question's item, bounded by
:data:`~wait_service.ledger.questions.MAX_HANDOVERS`; the write's own condition holds the bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_wait.aws.dynamodb import to_attribute
from wait_service.ledger.attributes import iso
from wait_service.ledger.questions import (
    KEEP_RAISED_EXPIRY,
    MAX_HANDOVERS,
    QuestionItems,
    QuestionRecord,
    _in_list,
    _on_rung,
)
from wait_service.ledger.statuses import OPEN

if TYPE_CHECKING:
    from datetime import datetime


class QuestionAuthority(QuestionItems):
    """Records delegations and extensions; a part of :class:`~wait_service.ledger.QuestionStore`."""

    def record_delegation(
        self,
        question_id: str,
        to: str,
        *,
        by: str,
        reason: str,
        rung: int | None = None,
        since: int = 0,
    ) -> QuestionRecord | None:
        """Make ``to`` a responder of this open question (a ``delegated`` stage names who and why).

        ``rung`` (the escalation rung the delegator was checked on, when the ladder's rungs name
        their own responders) is kept on the entry and makes the write hold only on that rung;
        ``since`` is the last rung on it that replaced the responders (and every delegate before).
        Returns ``None`` when recorded; else the question as it stood when the condition failed (it
        was decided meanwhile, moved to another rung, or ``to`` holds a delegation already), from the
        failed write itself.
        """
        now = iso(self._clock())
        entry: dict[str, Any] = {"to": to, "by": by, "reason": reason, "at": now}
        if rung:
            entry["rung"] = rung
        values: dict[str, Any] = {
            ":now": {"S": now},
            ":empty": {"L": []},
            ":stage": to_attribute([{"stage": "delegated", "at": now, "actor": by, "detail": entry}]),
            ":entry": to_attribute([entry]),
            ":to": {"S": to},
            ":tos": {"SS": [to]},
            ":cap": {"N": str(MAX_HANDOVERS)},
        }
        # Who holds a delegation: one set per span of rungs since a rung replaced the responders
        # (`since`), so a delegate dropped by such a rung may be handed the question again.
        names = {"#s": "status", "#dt": "delegated_to" if not since else f"delegated_to_{since}"}
        open_names = _in_list("o", OPEN, values)
        return self._open_write(
            question_id,
            UpdateExpression=(
                "SET updated_at = :now, lifecycle = list_append(if_not_exists(lifecycle, :empty), :stage),"
                " delegations = list_append(if_not_exists(delegations, :empty), :entry)"
                " ADD #dt :tos"
            ),
            ConditionExpression=(
                f"attribute_exists(dedupe_key) AND #s IN ({open_names})"
                " AND (attribute_not_exists(#dt) OR NOT contains(#dt, :to))"
                " AND (attribute_not_exists(delegations) OR size(delegations) < :cap)"
                + _on_rung(rung, names, values)
            ),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def record_extension(
        self,
        question_id: str,
        *,
        seen: QuestionRecord,
        until: datetime,
        seconds: int,
        max_total: int,
        by: str,
        reason: str,
    ) -> QuestionRecord | None:
        """Move the expiry of an open question from what ``seen`` holds to ``until``.

        The write holds only if the question is open, on the rung and with the expiry ``seen`` had,
        and if its extensions, ``seconds`` included, stay within ``max_total``: an extension and
        an expiry (or an escalation, or another extension) racing each other cannot both win.
        Returns ``None`` when recorded, else the question as it stood.
        """
        if seen.expires_at is None:
            raise ValueError("a question without an expiry has nothing to extend")
        now = iso(self._clock())
        new_expiry = iso(until)
        entry = {
            "from": seen.expires_at,
            "to": new_expiry,
            "seconds": seconds,
            "by": by,
            "reason": reason,
            "at": now,
        }
        values: dict[str, Any] = {
            ":now": {"S": now},
            ":empty": {"L": []},
            ":zero": {"N": "0"},
            ":stage": to_attribute([{"stage": "extended", "at": now, "actor": by, "detail": entry}]),
            ":entry": to_attribute([entry]),
            ":new": {"S": new_expiry},
            ":seen": {"S": seen.expires_at},
            ":add": {"N": str(seconds)},
            ":room": {"N": str(max_total - seconds)},
            ":rung": {"N": str(seen.escalation)},
            ":cap": {"N": str(MAX_HANDOVERS)},
        }
        open_names = _in_list("o", OPEN, values)
        rung = "(attribute_not_exists(#e) OR #e = :rung)" if seen.escalation == 0 else "#e = :rung"
        return self._open_write(
            question_id,
            UpdateExpression=(
                f"SET {KEEP_RAISED_EXPIRY}, updated_at = :now, expires_at = :new,"
                " lifecycle = list_append(if_not_exists(lifecycle, :empty), :stage),"
                " extensions = list_append(if_not_exists(extensions, :empty), :entry),"
                " extended_seconds = if_not_exists(extended_seconds, :zero) + :add"
            ),
            ConditionExpression=(
                f"attribute_exists(dedupe_key) AND #s IN ({open_names}) AND expires_at = :seen AND {rung}"
                " AND (attribute_not_exists(extended_seconds) OR extended_seconds <= :room)"
                " AND (attribute_not_exists(extensions) OR size(extensions) < :cap)"
            ),
            ExpressionAttributeNames={"#s": "status", "#e": "escalation"},
            ExpressionAttributeValues=values,
        )
