"""Question items: written first by the library's ``DynamoDbAnnounce``, then moved only by the ledger.

Every move is a conditional write on the current ``status``, with the allowed statuses read from
:mod:`wait_service.ledger.statuses`, so two racing writers can never both win: exactly one of a reply,
an expiry and a revocation decides a question, and only that writer resumes the thread.
Every move appends a ``{stage, at, actor, detail?}`` entry to the question's ``lifecycle``. A move
with several details (delivered: one per sink) is stored as one entry with their list,
``{stage, at, actor, details}``, and read back as one entry per detail (:func:`lifecycle_entries`):
the stage, time and actor are written once, which keeps a parked question's item under the 1 KB a
write unit covers.

This module holds the question as read (:class:`QuestionRecord`) and the writes every move is made
of (:class:`QuestionItems`); the moves themselves are grouped by what they do:
:mod:`.question_decisions` (answers, votes, expiries, revocations), :mod:`.question_moves`
(delivered, reminded, escalated, resumed) and :mod:`.question_authority` (delegations,
extensions). :class:`~wait_service.ledger.QuestionStore` is all three.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from agent_wait.aws.dynamodb import question_id_of, raised_stage, read_policy, to_attribute
from agent_wait.errors import QuestionNotFoundError
from wait_service.ledger.attributes import (
    condition_failed,
    from_attribute,
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


# The names of wait_service.constants.RECORD_ATTRIBUTES that are DynamoDB reserved words: an
# expression names them through a placeholder (a test checks this against DynamoDB's list).
RESERVED_ATTRIBUTES = frozenset({"status", "source", "error"})


def lifecycle_entries(stored: Any, created_at: str | None = None) -> list[dict[str, Any]]:
    """A stored ``lifecycle`` as read: an entry holding ``details`` becomes one entry per detail,
    and the first stage, ``raised``, which the library's item leaves out, comes first again
    (:func:`~agent_wait.aws.dynamodb.raised_stage`, from ``created_at``; items written before hold it).

    >>> stored = [{"stage": "delivered", "at": "t", "actor": "runner", "details": ["sns", "sqs"]}]
    >>> [(e["stage"], e["actor"], e.get("detail")) for e in lifecycle_entries(stored, "t0")]
    [('raised', 'agent', None), ('delivered', 'runner', 'sns'), ('delivered', 'runner', 'sqs')]
    """
    entries: list[dict[str, Any]] = []
    for entry in stored or ():
        if isinstance(entry, dict) and isinstance(entry.get("details"), list) and entry["details"]:
            shared = {key: value for key, value in entry.items() if key != "details"}
            entries += [{**shared, "detail": detail} for detail in entry["details"]]
        else:
            entries.append(entry)
    first = entries[0] if entries else None
    if created_at is not None and not (isinstance(first, dict) and first.get("stage") == "raised"):
        entries.insert(0, raised_stage(created_at))
    return entries


@cache
def projection(attributes: tuple[str, ...]) -> dict[str, Any]:
    """The ``GetItem`` parameters that read only ``attributes`` (and ``kind``, and ``created_at``
    with the ``lifecycle``: its first stage is read back from it) of a question item.

    A reserved word goes through a placeholder (``#status``); the others are named as they are,
    which keeps the request small.

    Examples
    --------
    >>> projection(("status", "answer"))["ProjectionExpression"]
    '#status, answer, kind'
    >>> projection(("status", "answer"))["ExpressionAttributeNames"]
    {'#status': 'status'}
    """
    # With the lifecycle, its first stage's time (the raised stage is read back from it).
    implied = ("created_at",) if "lifecycle" in attributes else ()
    wanted = dict.fromkeys((*attributes, *implied, "kind"))
    parts = [f"#{name}" if name in RESERVED_ATTRIBUTES else name for name in wanted]
    names = {f"#{name}": name for name in attributes if name in RESERVED_ATTRIBUTES}
    request: dict[str, Any] = {"ProjectionExpression": ", ".join(parts)}
    if names:  # DynamoDB refuses an empty map
        request["ExpressionAttributeNames"] = names
    return request


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
    def from_item(cls, item: Mapping[str, Any], *, lifecycle_read: bool = True) -> QuestionRecord:
        """The record of a question item. ``lifecycle_read=False``: the item is a partial read that
        left the lifecycle out, whose stages (even the first, read back from ``created_at``) are
        then not shown."""
        # What was proposed, answered and run keeps the digits sent (Decimal, never float); each
        # attribute is read once.
        data = {name: from_attribute(value, exact=name in EXACT_FIELDS) for name, value in item.items()}
        return cls(
            # An item may hold the id in its key only (a later version may stop writing it).
            question_id=str(data.get("question_id") or question_id_of(str(data["dedupe_key"]))),
            thread_id=str(data.get("thread_id", "")),
            status=str(data.get("status", "raised")),
            digest=str(data.get("digest", "")),
            question=data.get("question"),
            policy=read_policy(data.get("policy") or {}),
            source=data.get("source"),
            created_at=data.get("created_at"),
            expires_at=data.get("expires_at"),
            updated_at=data.get("updated_at"),
            lifecycle=lifecycle_entries(data.get("lifecycle"), data.get("created_at"))
            if lifecycle_read
            else [],
            answer=data.get("answer"),
            answered_by=data.get("answered_by"),
            answered_at=data.get("answered_at"),
            reason=data.get("reason"),
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


class QuestionItems(LedgerTable):
    """Reads a question item and writes its moves: what every part of :class:`QuestionStore` shares.

    Every move goes through :meth:`_move_request` (a status move) or :meth:`_stage_request` (a stage
    on a closed question); a write that returns the question when it loses, through
    :meth:`_open_write`.
    """

    def get_question(self, question_id: str, *, reading: tuple[str, ...] | None = None) -> QuestionRecord:
        """The question, read consistently; :class:`QuestionNotFoundError` when there is none.

        ``reading`` (names from ``wait_service.constants.RECORD_ATTRIBUTES``) reads only those attributes: the
        record's other fields hold their defaults, so it suits a caller that reads no other. The
        read costs the same units (DynamoDB bills the whole item); what it saves is the bytes to
        parse and decode.
        """
        item = self._get(question_key(question_id), **(projection(reading) if reading else {}))
        if item is None or from_attribute(item.get("kind", {"S": "question"})) != "question":
            raise QuestionNotFoundError(f"no question {question_id}", question_id=question_id)
        # The id asked for stands in where the item holds it in its key only (a partial read does
        # not read the key back).
        return QuestionRecord.from_item(
            item if "question_id" in item else {**item, "question_id": {"S": question_id}},
            lifecycle_read=reading is None or "lifecycle" in reading,
        )

    def find_question(self, question_id: str) -> QuestionRecord | None:
        try:
            return self.get_question(question_id)
        except QuestionNotFoundError:
            return None

    # -- the writes every move is made of ------------------------------------------------------

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

        entry: dict[str, Any] = {"stage": to, "at": stamp, "actor": actor}
        if details is not None and len(details) > 1:
            entry["details"] = details  # one entry for all of them (lifecycle_entries reads it back)
        elif (details[0] if details else detail) is not None:
            entry["detail"] = details[0] if details else detail

        names = {"#s": "status"}
        values: dict[str, Any] = {
            ":to": {"S": to},
            # The question moves to its own shard of the new status's listing (ledger.paging).
            ":shard": {"S": shard_of(to, question_id, self.listing_shards)},
            ":now": {"S": stamp},
            ":empty": {"L": []},
            ":stage": to_attribute([entry]),
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
