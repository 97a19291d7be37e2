"""Write each question to the ledger table (see docs/internals.md, "Ledger")."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import boto3
from boto3.dynamodb.types import TypeSerializer
from botocore.exceptions import ClientError

from agent_wait import exact_json
from agent_wait.announce.base import BaseAnnounce
from agent_wait.envelope import Envelope, ReplyWith, canonical_json, dedupe_key_for, isoformat_z
from agent_wait.errors import QuestionCollisionError
from agent_wait.policy import Policy

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "LEDGER_ENVELOPE_FIELDS",
    "MAX_STATUS_SHARDS",
    "STATUS_SHARDS",
    "DynamoDbAnnounce",
    "ledger_envelope",
    "ledger_put",
    "question_id_of",
    "raised_stage",
    "read_policy",
    "status_shard",
    "stored_policy",
]

_serializer = TypeSerializer()

# Only the first publish of a question writes its item: a republish (redelivered start message,
# repeated async call) must not reset a question the receive path has moved, nor mix its
# attributes with the first publish's envelope.
_CONDITION = "attribute_not_exists(dedupe_key)"


def to_attribute(value: Any) -> dict[str, Any]:
    """A JSON value as a DynamoDB attribute value (low-level format).

    DynamoDB has no float type: the value goes through JSON so every number becomes a Decimal. A
    ``Decimal`` keeps its digits (boto3 refuses one DynamoDB would round: over 38 digits).

    Examples
    --------
    >>> to_attribute({"amount": 2.5, "exact": Decimal("10000.00000000000000001")})
    {'M': {'amount': {'N': '2.5'}, 'exact': {'N': '10000.00000000000000001'}}}
    """
    try:
        return _plain_attribute(value)
    except _NotPlain:
        pass
    plain = json.loads(exact_json.dumps(value), parse_float=Decimal)
    return dict(_serializer.serialize(plain))


# The largest integer DynamoDB's number context holds exactly (38 significant digits).
_MAX_EXACT_INT = 10**38


class _NotPlain(Exception):
    """A value the direct conversion leaves to the JSON round trip (floats, tuples, other types)."""


def _plain_attribute(value: Any) -> dict[str, Any]:
    """The attribute of a value made of str, int, Decimal, bool, None, str-keyed dicts and lists only.

    Gives what the JSON round trip gives for such values, without serializing them twice;
    anything else raises :class:`_NotPlain`.
    """
    kind = type(value)
    if kind is str:
        return {"S": value}
    if kind is bool:
        return {"BOOL": value}
    if value is None:
        return {"NULL": True}
    if kind is int and -_MAX_EXACT_INT < value < _MAX_EXACT_INT:
        return {"N": str(value)}
    if kind is Decimal:
        return dict(_serializer.serialize(value))
    if kind is dict:
        members = {}
        for key, member in value.items():
            if type(key) is not str:
                raise _NotPlain
            members[key] = _plain_attribute(member)
        return {"M": members}
    if kind is list:
        return {"L": [_plain_attribute(member) for member in value]}
    raise _NotPlain


# The ledger lists questions by status through an index keyed on `status_shard`, whose writes
# are spread over `shards` partitions per listing: one by default (a page is one Query); a
# deployment sets more for a higher rate of questions (the deployment's ledger says how many).
STATUS_SHARDS = 1
MAX_STATUS_SHARDS = 64


def status_shard(listing: str, question_id: str, shards: int = STATUS_SHARDS) -> str:
    """``<listing>#<n>``: the partition of the status index a question is listed in.

    ``n`` (0 to ``shards`` - 1) comes from the question id alone, so every move of a question
    stays in its own shard number and the shards fill evenly; and a question written under fewer
    shards is in one of the first shards of a higher count (``n`` below the old count). ``listing``
    is ``open`` while a person may answer (a raised question is open), else the status.

    Examples
    --------
    >>> status_shard("open", "q-1"), status_shard("open", "q-1", 16)
    ('open#0', 'open#10')
    """
    if not 1 <= shards <= MAX_STATUS_SHARDS:
        raise ValueError(f"shards={shards}: expected 1 to {MAX_STATUS_SHARDS}")
    number = int.from_bytes(hashlib.sha256(question_id.encode()).digest()[:4], "big") % shards
    return f"{listing}#{number}"


# A policy's top-level fields whose default is "none" (null or an empty list), with that default: the
# item leaves them out while they hold it (:func:`stored_policy`), :func:`read_policy` puts them back.
_POLICY_NONE_DEFAULTS: dict[str, Any] = {
    name: value for name, value in Policy().model_dump(mode="json").items() if value is None or value == []
}
# Every field of the model, in its order (a field left out of the JSON while at its default too).
_POLICY_FIELDS: tuple[str, ...] = tuple(Policy.model_fields)
# The actor of a question's first stage: the agent that raised it.
RAISED_ACTOR = "agent"


def question_id_of(dedupe_key: str) -> str:
    """The question id a ledger key (:func:`~agent_wait.envelope.dedupe_key_for`) names.

    Examples
    --------
    >>> question_id_of("wait.created:q1")
    'q1'
    """
    return dedupe_key.removeprefix(dedupe_key_for(""))


def stored_policy(policy: Policy) -> dict[str, Any]:
    """``policy`` as a question item stores it: its JSON without the top-level fields left at "none".

    Every move of a question rewrites its item, billed per KB: a question's policy usually sets a
    few fields of many. :func:`read_policy` gives the whole JSON back.

    Examples
    --------
    >>> from agent_wait.policy import approval
    >>> stored_policy(approval(ttl=60))
    {'kind': 'approval', 'ttl': 60, 'bind': True}
    >>> read_policy(stored_policy(approval(ttl=60))) == approval(ttl=60).model_dump(mode="json")
    True
    """
    return {
        name: value
        for name, value in policy.model_dump(mode="json").items()
        if not (name in _POLICY_NONE_DEFAULTS and value == _POLICY_NONE_DEFAULTS[name])
    }


def read_policy(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored policy (:func:`stored_policy`) as its whole JSON, in the model's field order
    whatever order the map was stored in (DynamoDB keeps none); a key the model does not have comes
    last. A policy stored whole (items written before, or by hand) keeps every key; an empty one
    stays empty.

    Examples
    --------
    >>> list(read_policy({"bind": True, "kind": "approval", "ttl": 60}).items())[::3]
    [('kind', 'approval'), ('ttl', 60), ('responders', [])]
    """
    if not stored:
        return {}
    whole: dict[str, Any] = {}
    for name in _POLICY_FIELDS:
        if name in stored:
            whole[name] = stored[name]
        elif name in _POLICY_NONE_DEFAULTS:
            whole[name] = [] if _POLICY_NONE_DEFAULTS[name] == [] else None  # a list of its own
    for name, value in stored.items():
        whole.setdefault(name, value)
    return whole


def raised_stage(created_at: str) -> dict[str, str]:
    """The first lifecycle stage of every question, which its item does not store: it is its
    ``created_at`` and the agent."""
    return {"stage": "raised", "at": created_at, "actor": RAISED_ACTOR}


def ledger_put(
    table_name: str,
    envelope: Envelope,
    *,
    extra: Mapping[str, Any] | None = None,
    shards: int = STATUS_SHARDS,
) -> dict[str, Any]:
    """The conditional ``PutItem`` request that records ``envelope`` in the ledger.

    The item is the question item of docs/internals.md: ``status = "raised"``, ``created_at`` =
    ``updated_at``, and the envelope's own fields (``question`` / ``policy`` / ``source``,
    ``digest``, the times...). Every move of the question rewrites its item, billed per KB, so the
    item holds little it can be read back without: no envelope JSON, only what the envelope adds to
    those fields (its ``event_id`` and ``reply_with.url`` as ``reply_url``), enough to rebuild it
    (:func:`ledger_envelope`); no ``lifecycle`` yet (its first stage is ``created_at`` and the
    agent, :func:`raised_stage`); and no policy field left at its "none" default
    (:func:`stored_policy`). Its ``question_id`` is kept, though its key holds it
    (:func:`question_id_of`, which readers fall back on): earlier versions read it. The write only happens
    while no item has the envelope's ``dedupe_key``. ``extra`` adds attributes the host records
    with the question (e.g. who started the run); it never replaces one of these. ``shards`` is the
    count of shards of the status listing (:func:`status_shard`).

    Examples
    --------
    >>> from agent_wait.envelope import Question, build_envelope
    >>> req = ledger_put("ledger", build_envelope("t1", Question(question_id="q1", question="hi")))
    >>> (req["Item"]["dedupe_key"], req["Item"]["status"], req["ConditionExpression"])
    ({'S': 'wait.created:q1'}, {'S': 'raised'}, 'attribute_not_exists(dedupe_key)')
    """
    created_at = isoformat_z(envelope.created_at)
    # No first lifecycle stage (raised_stage: `created_at` and the agent) and no policy field left
    # at "none" (stored_policy): both read back. The `question_id` stays although the key holds it
    # (question_id_of): a version before the readers that derive it could not read an item
    # without it, during a deployment's rollout or after a rollback.
    item = {
        "dedupe_key": envelope.dedupe_key,
        "kind": "question",
        "question_id": envelope.question_id,
        "thread_id": envelope.thread_id,
        "digest": envelope.digest,
        "question": envelope.question,
        "policy": stored_policy(envelope.policy),
        "source": envelope.source,
        "status": "raised",
        "status_shard": status_shard("open", envelope.question_id, shards),
        "created_at": created_at,
        "updated_at": created_at,
        "expires_at": None if envelope.expires_at is None else isoformat_z(envelope.expires_at),
        "event_id": envelope.event_id,
    }
    if envelope.reply_with.url is not None:
        item["reply_url"] = envelope.reply_with.url
    if envelope.policy_version is not None:
        # The policy store's version the question was raised under (its digest covers it).
        item["policy_version"] = envelope.policy_version
    item = {**(extra or {}), **item}
    return {
        "TableName": table_name,
        "Item": {key: to_attribute(value) for key, value in item.items()},
        "ConditionExpression": _CONDITION,
        # A refused write returns the item that stands, so a collision costs no second read.
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


# The question item's attributes :func:`ledger_envelope` rebuilds the envelope from.
LEDGER_ENVELOPE_FIELDS = (
    "dedupe_key",
    "envelope",
    "event_id",
    "question_id",
    "thread_id",
    "created_at",
    "expires_at",
    "raised_expires_at",
    "digest",
    "question",
    "policy",
    "source",
    "reply_url",
    "policy_version",
)


def ledger_envelope(values: Mapping[str, Any]) -> Envelope:
    """The envelope a question item was written from (:func:`ledger_put`), rebuilt from its fields.

    ``values`` holds the item's :data:`LEDGER_ENVELOPE_FIELDS` as plain values (numbers as ``int``,
    ``float`` or ``Decimal``; an absent or null attribute left out), its ``question_id`` or else
    its ``dedupe_key`` (the item holds the id in its key only). ``expires_at`` is the expiry
    the question was raised with: ``raised_expires_at`` once a write moved it. An item written with
    the envelope JSON in it (``envelope``, before items were slimmed) gives that JSON back.
    ``KeyError`` when the item holds neither.

    Examples
    --------
    >>> from agent_wait.envelope import Question, build_envelope
    >>> env = build_envelope("t1", Question(question_id="q1", question={"n": 2.5}), reply_url="https://x/{question_id}")
    >>> item = ledger_put("ledger", env)["Item"]
    >>> from boto3.dynamodb.types import TypeDeserializer
    >>> values = {name: TypeDeserializer().deserialize(value) for name, value in item.items()}
    >>> ledger_envelope(values) == env
    True
    """
    if values.get("envelope") is not None:
        return Envelope.model_validate_json(values["envelope"])
    expires_at = values.get("raised_expires_at") or values.get("expires_at")
    digest = str(values["digest"])
    version = values.get("policy_version")
    question_id = str(values.get("question_id") or question_id_of(str(values["dedupe_key"])))
    return Envelope(
        event_id=values["event_id"],
        dedupe_key=dedupe_key_for(question_id),
        question_id=question_id,
        thread_id=values["thread_id"],
        created_at=values["created_at"],
        expires_at=expires_at,
        digest=digest,
        # DynamoDB gives numbers back as Decimal; the envelope held JSON's floats and integers.
        question=_json_numbers(values.get("question")),
        policy=_json_numbers(values["policy"]),
        source=_json_numbers(values.get("source")),
        reply_with=ReplyWith(url=values.get("reply_url"), if_match=f'"{digest}"'),
        policy_version=None if version is None else int(version),
    )


def _json_numbers(value: Any) -> Any:
    """``value`` with each ``Decimal`` the ``int`` or ``float`` JSON would have read it as."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() and "." not in str(value) else float(value)
    if isinstance(value, dict):
        return {key: _json_numbers(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_numbers(item) for item in value]
    return value


class DynamoDbAnnounce(BaseAnnounce):
    """Record each question in the ledger table, keyed by ``dedupe_key``.

    The first publish creates the item with ``status = "raised"``, ``created_at`` and a
    one-entry ``lifecycle`` (a conditional ``PutItem``: the role needs ``dynamodb:PutItem``). A
    republish of the same question finds the item there and touches nothing: that counts as
    delivered, since the question is recorded.

    Parameters
    ----------
    table_name:
        The ledger table.
    client:
        A boto3 DynamoDB client; ``boto3.client("dynamodb")`` when ``None``.
    listing_shards:
        The shards of the ledger's status listing (:func:`status_shard`): the deployment's count.

    Examples
    --------
    >>> announce = DynamoDbAnnounce("agent-wait-ledger")  # doctest: +SKIP
    """

    def __init__(
        self,
        table_name: str,
        client: Any = None,
        *,
        name: str = "dynamodb",
        listing_shards: int = STATUS_SHARDS,
    ) -> None:
        self.table_name = table_name
        self.client = client if client is not None else boto3.client("dynamodb")
        self.name = name
        self.listing_shards = listing_shards

    def deliver(self, envelope: Envelope) -> None:
        self.record(envelope)

    def record(self, envelope: Envelope, *, extra: Mapping[str, Any] | None = None) -> None:
        """Deliver ``envelope`` with ``extra`` attributes on a new item (see :func:`ledger_put`)."""
        try:
            self.client.put_item(
                **ledger_put(self.table_name, envelope, extra=extra, shards=self.listing_shards)
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            item: dict[str, Any] = dict(exc.response.get("Item") or {})  # type: ignore[call-overload]
            stored = (item.get("digest") or {}).get("S")
            if stored is not None and stored not in (envelope.digest, _digest_without_id(envelope)):
                raise QuestionCollisionError(
                    f"question {envelope.question_id} is already in the ledger as a different question "
                    f"(digest {stored[:12]}…, not {envelope.digest[:12]}…)",
                    stored_digest=stored,
                    question_id=envelope.question_id,
                    thread_id=envelope.thread_id,
                ) from exc


def _digest_without_id(envelope: Envelope) -> str:
    """The digest an item recorded before digests bound the question id holds for this question.

    A question parked across the upgrade keeps its stored digest (its ETag, answerable as shown);
    a republish of it is the same question, not a collision.
    """
    payload = {"question": envelope.question, "policy": envelope.policy.model_dump(mode="json")}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()
