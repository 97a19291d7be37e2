"""Question items: written first by the library's ``DynamoDbAnnounce``, then moved only from here.

Every move is a conditional write on the current ``status``, with the allowed statuses read from
:mod:`wait_service.ledger.statuses`, so two racing writers can never both win: exactly one of a reply,
an expiry and a revocation decides a question, and only that writer resumes the thread.
Every move appends a ``{stage, at, actor, detail?}`` entry to the question's ``lifecycle``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from agent_wait.aws.dynamodb import to_attribute
from agent_wait.errors import QuestionNotFoundError
from wait_service.ledger.attributes import (
    condition_failed,
    from_attribute,
    from_item,
    iso,
    parse_time,
    question_key,
)
from wait_service.ledger.shards import shard_of
from wait_service.ledger.statuses import CLOSED, OPEN, allowed_from
from wait_service.ledger.table import LedgerTable

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from datetime import datetime

    from pydantic import JsonValue

# Who records the answers nobody gave.
EXPIRY_ACTOR = "system:expiry"
# The answer a thread is resumed with when its question expires without a default.
EXPIRED_ANSWER: dict[str, str] = {"action": "reject", "reason": "expired"}
# The most delegations, and the most extensions, one question records: each is a list entry on
# the question's item, which DynamoDB holds to 400 KB.
MAX_HANDOVERS = 20
# A question item's attributes holding people's data, read with their numbers exact.
EXACT_FIELDS = ("question", "answer", "receipt")

# Set first by a write that moves `expires_at`: the expiry the question was raised with stays on
# the item (its envelope's `expires_at`, which its reminders carry), written once, by the same
# write, so no crash can leave the expiry moved and the raised one lost.
KEEP_RAISED_EXPIRY = "raised_expires_at = if_not_exists(raised_expires_at, expires_at)"


def revoked_answer(reason: str) -> dict[str, str]:
    """The answer a thread is resumed with when its question is revoked.

    Examples
    --------
    >>> revoked_answer("duplicate request")
    {'action': 'reject', 'reason': 'revoked: duplicate request'}
    """
    return {"action": "reject", "reason": f"revoked: {reason}"}


@dataclass(frozen=True)
class QuestionRecord:
    """A question item as read from the ledger."""

    question_id: str
    thread_id: str
    status: str
    digest: str
    question: JsonValue
    policy: dict[str, Any]
    source: dict[str, Any] | None
    created_at: str | None
    expires_at: str | None
    updated_at: str | None
    lifecycle: list[dict[str, Any]]
    answer: JsonValue = None
    answered_by: str | None = None
    answered_at: str | None = None
    reason: str | None = None
    resume_enqueued_at: str | None = None
    resumed_at: str | None = None
    # The rung of its escalation ladder the question is on (0: not escalated).
    escalation: int = 0
    # The 1-based numbers of the reminders already sent.
    reminders_sent: tuple[int, ...] = ()
    error: str | None = None
    # The envelope JSON as first published, on items written before the item held only what the
    # envelope adds to its fields (event_id, reply_url): the base of its follow-up events.
    envelope: str | None = None
    event_id: str | None = None
    reply_url: str | None = None
    # The expiry the question was raised with, kept by the first write that moves `expires_at`.
    raised_expires_at: str | None = None
    # The If-Match the responder sent with the answer (the tag they bound it to).
    if_match: str | None = None
    # What the resumed call reported: {"ran", "args", "outcome", "error"?, "at"}.
    receipt: dict[str, Any] | None = None
    # The version of the policy store's override the question was raised under (None: the code's policy).
    policy_version: int | None = None
    # The principal who started the run that raised the question (separation of duties).
    requested_by: str | None = None
    # Principals a responder handed the question to (this question only), and each hand-over:
    # {"to", "by", "reason", "at"}.
    delegates: tuple[str, ...] = ()
    delegations: tuple[dict[str, Any], ...] = ()
    # Each move of the expiry: {"from", "to", "seconds", "by", "reason", "at"}; their total seconds.
    extensions: tuple[dict[str, Any], ...] = ()
    extended_seconds: int = 0
    # A quorum's votes, in order ({"principal", "vote", "reason"?, "if_match"?, "at"}), and who
    # approved and who rejected (one vote per principal).
    votes: tuple[dict[str, Any], ...] = ()
    approvers: tuple[str, ...] = ()
    rejecters: tuple[str, ...] = ()

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> QuestionRecord:
        data = from_item(item)
        # What was proposed, answered and run keeps the digits sent (Decimal, never float).
        for name in EXACT_FIELDS:
            if name in item:
                data[name] = from_attribute(item[name], exact=True)
        return cls(
            question_id=str(data["question_id"]),
            thread_id=str(data.get("thread_id", "")),
            status=str(data.get("status", "raised")),
            digest=str(data.get("digest", "")),
            question=data.get("question"),
            policy=dict(data.get("policy") or {}),
            source=data.get("source"),
            created_at=data.get("created_at"),
            expires_at=data.get("expires_at"),
            updated_at=data.get("updated_at"),
            lifecycle=list(data.get("lifecycle") or []),
            answer=data.get("answer"),
            answered_by=data.get("answered_by"),
            answered_at=data.get("answered_at"),
            reason=data.get("reason"),
            resume_enqueued_at=data.get("resume_enqueued_at"),
            resumed_at=data.get("resumed_at"),
            escalation=int(data.get("escalation") or 0),
            reminders_sent=tuple(sorted(int(n) for n in data.get("reminders_sent") or ())),
            error=data.get("error"),
            envelope=data.get("envelope"),
            event_id=data.get("event_id"),
            reply_url=data.get("reply_url"),
            raised_expires_at=data.get("raised_expires_at"),
            if_match=data.get("if_match"),
            receipt=data.get("receipt"),
            policy_version=None if data.get("policy_version") is None else int(data["policy_version"]),
            requested_by=data.get("requested_by"),
            delegates=tuple(sorted(str(p) for p in data.get("delegated_to") or ())),
            delegations=tuple(dict(d) for d in data.get("delegations") or ()),
            extensions=tuple(dict(e) for e in data.get("extensions") or ()),
            extended_seconds=int(data.get("extended_seconds") or 0),
            votes=tuple(dict(v) for v in data.get("votes") or ()),
            approvers=tuple(sorted(str(p) for p in data.get("approvers") or ())),
            rejecters=tuple(sorted(str(p) for p in data.get("rejecters") or ())),
        )

    @property
    def is_open(self) -> bool:
        """Whether a person may still answer it."""
        return self.status in OPEN

    def expired_at(self, now: datetime) -> bool:
        """True when the question has an expiry and it has passed at ``now``."""
        return self.expires_at is not None and parse_time(self.expires_at) <= now


class QuestionStore(LedgerTable):
    """Reads and moves question items; a part of :class:`~wait_service.ledger.Ledger`."""

    def get_question(self, question_id: str) -> QuestionRecord:
        """The question, read consistently; :class:`QuestionNotFoundError` when there is none."""
        item = self._get(question_key(question_id))
        if item is None or from_attribute(item.get("kind", {"S": "question"})) != "question":
            raise QuestionNotFoundError(f"no question {question_id}", question_id=question_id)
        return QuestionRecord.from_item(item)

    def find_question(self, question_id: str) -> QuestionRecord | None:
        try:
            return self.get_question(question_id)
        except QuestionNotFoundError:
            return None

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

    def _open_write(self, question_id: str, **request: Any) -> QuestionRecord | None:
        """One conditional ``UpdateItem`` of an open question: ``None`` when it held, else the item."""
        try:
            self._client.update_item(
                TableName=self.table_name,
                Key={"dedupe_key": {"S": question_key(question_id)}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **request,
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            item = cast("Mapping[str, Any] | None", exc.response.get("Item"))
            if not item:
                raise QuestionNotFoundError(f"no question {question_id}", question_id=question_id) from exc
            return QuestionRecord.from_item(item)
        return None

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

    def mark_resume_enqueued(self, question_id: str) -> None:
        """Note that the resume message for the recorded answer reached the inbox."""
        self._client.update_item(
            TableName=self.table_name,
            Key={"dedupe_key": {"S": question_key(question_id)}},
            UpdateExpression="SET resume_enqueued_at = :now",
            ConditionExpression="attribute_exists(dedupe_key)",
            ExpressionAttributeValues={":now": {"S": iso(self._clock())}},
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

    def _stage_after_close(
        self,
        question_id: str,
        stage: str,
        *,
        actor: str,
        extra: Mapping[str, Any] | None = None,
        first: Mapping[str, Any] | None = None,
    ) -> bool:
        """Append ``stage`` to a closed question once (``resumed_at`` is set by ``resumed`` only)."""
        return self._update_if(
            **self._stage_request(question_id, stage, actor=actor, extra=extra, first=first)
        )

    def _stage_request(
        self,
        question_id: str,
        stage: str,
        *,
        actor: str,
        extra: Mapping[str, Any] | None = None,
        first: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        now = self._clock()
        stamp = iso(now)
        names = {"#s": "status"}
        values: dict[str, Any] = {
            ":now": {"S": stamp},
            ":empty": {"L": []},
            ":stage": to_attribute([{"stage": stage, "at": stamp, "actor": actor}]),
            ":ttl": {"N": str(int((now + self._ttl).timestamp()))},
        }
        sets = ["updated_at = :now", "lifecycle = list_append(if_not_exists(lifecycle, :empty), :stage)"]
        if stage == "resumed":
            sets += ["resumed_at = :now", "expires_ttl = :ttl"]
        for index, (name, value) in enumerate((extra or {}).items()):
            names[f"#x{index}"] = name
            values[f":x{index}"] = to_attribute(value)
            sets.append(f"#x{index} = :x{index}")
        _keep_first(first, names, values, sets)
        closed = _in_list("c", CLOSED, values)
        return {
            "TableName": self.table_name,
            "Key": {"dedupe_key": {"S": question_key(question_id)}},
            "UpdateExpression": "SET " + ", ".join(sets),
            "ConditionExpression": f"#s IN ({closed}) AND attribute_not_exists(resumed_at)",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def _move(
        self,
        question_id: str,
        to: str,
        *,
        actor: str,
        extra: Mapping[str, Any] | None = None,
        detail: JsonValue = None,
        details: list[JsonValue] | None = None,
        rung: int | None = None,
        ends: bool = False,
        raise_on_loss: bool = False,
        first: Mapping[str, Any] | None = None,
        now: datetime | None = None,
        expect: Mapping[str, str] | None = None,
    ) -> bool:
        """Conditionally move a question to ``to`` from a status the status table allows.

        ``False`` (or, with ``raise_on_loss``, the ``ConditionalCheckFailedException`` carrying the
        old item) when it is not in one of them, or not on ladder ``rung`` when one is given.
        ``now`` is the moment stamped on the move (the clock's, by default).
        """
        request = self._move_request(
            question_id,
            to,
            actor=actor,
            extra=extra,
            detail=detail,
            details=details,
            rung=rung,
            ends=ends,
            first=first,
            now=now,
            expect=expect,
        )
        try:
            self._client.update_item(
                **request, ReturnValuesOnConditionCheckFailure="ALL_OLD" if raise_on_loss else "NONE"
            )
        except ClientError as exc:
            if condition_failed(exc) and not raise_on_loss:
                return False
            raise
        return True

    def _move_request(
        self,
        question_id: str,
        to: str,
        *,
        actor: str,
        extra: Mapping[str, Any] | None = None,
        detail: JsonValue = None,
        details: list[JsonValue] | None = None,
        rung: int | None = None,
        ends: bool = False,
        first: Mapping[str, Any] | None = None,
        now: datetime | None = None,
        expect: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """The conditional ``UpdateItem`` of :meth:`_move`, as a request not yet sent.

        ``expect`` adds ``name = value`` conditions (string attributes the caller read);
        a move that sets ``expires_at`` keeps the raised one (:data:`KEEP_RAISED_EXPIRY`).
        """
        now = self._clock() if now is None else now
        stamp = iso(now)

        def stage(detail: JsonValue) -> dict[str, Any]:
            entry: dict[str, Any] = {"stage": to, "at": stamp, "actor": actor}
            if detail is not None:
                entry["detail"] = detail
            return entry

        names = {"#s": "status"}
        values: dict[str, Any] = {
            ":to": {"S": to},
            # The question moves to its own shard of the new status's listing (ledger.paging).
            ":shard": {"S": shard_of(to, question_id, self.listing_shards)},
            ":now": {"S": stamp},
            ":empty": {"L": []},
            ":stage": to_attribute([stage(d) for d in (details if details is not None else [detail])]),
        }
        sets = [KEEP_RAISED_EXPIRY] if "expires_at" in (extra or {}) else []
        sets += [
            "#s = :to",
            "status_shard = :shard",
            "updated_at = :now",
            "lifecycle = list_append(if_not_exists(lifecycle, :empty), :stage)",
        ]
        for index, (name, value) in enumerate((extra or {}).items()):
            names[f"#x{index}"] = name
            values[f":x{index}"] = to_attribute(value)
            sets.append(f"#x{index} = :x{index}")
        _keep_first(first, names, values, sets)
        if ends or to in CLOSED:
            values[":ttl"] = {"N": str(int((now + self._ttl).timestamp()))}
            sets.append("expires_ttl = :ttl")
        condition = f"attribute_exists(dedupe_key) AND #s IN ({_in_list('f', allowed_from(to), values)})"
        if rung is not None:
            names["#e"] = "escalation"
            values[":rung"] = {"N": str(rung)}
            condition += " AND (attribute_not_exists(#e) OR #e = :rung)" if rung == 0 else " AND #e = :rung"
        for index, (name, value) in enumerate((expect or {}).items()):
            names[f"#w{index}"] = name
            values[f":w{index}"] = {"S": value}
            condition += f" AND #w{index} = :w{index}"
        return {
            "TableName": self.table_name,
            "Key": {"dedupe_key": {"S": question_key(question_id)}},
            "UpdateExpression": "SET " + ", ".join(sets),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }


def _on_rung(rung: int | None, names: dict[str, str], values: dict[str, Any]) -> str:
    """`` AND`` the question is on escalation ``rung`` (nothing when ``rung`` is ``None``)."""
    if rung is None:
        return ""
    names["#e"] = "escalation"
    values[":rung"] = {"N": str(rung)}
    return " AND (attribute_not_exists(#e) OR #e = :rung)" if rung == 0 else " AND #e = :rung"


def _keep_first(
    first: Mapping[str, Any] | None, names: dict[str, str], values: dict[str, Any], sets: list[str]
) -> None:
    """Add ``SET name = if_not_exists(name, value)`` for each of ``first``: a value already there stands."""
    for index, (name, value) in enumerate((first or {}).items()):
        names[f"#k{index}"] = name
        values[f":k{index}"] = to_attribute(value)
        sets.append(f"#k{index} = if_not_exists(#k{index}, :k{index})")


def _in_list(prefix: str, statuses: Iterable[str], values: dict[str, Any]) -> str:
    """Add one placeholder per status to ``values``; returns them joined for an ``IN (...)``."""
    placeholders, attributes = _placeholders(prefix, tuple(statuses))
    values.update((name, {"S": status}) for name, status in attributes)
    return placeholders


@cache
def _placeholders(prefix: str, statuses: tuple[str, ...]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``(":f0, :f1", ((":f0", status0), (":f1", status1)))``: built once per list of statuses."""
    names = tuple(f":{prefix}{index}" for index in range(len(statuses)))
    return ", ".join(names), tuple(zip(names, statuses, strict=True))
