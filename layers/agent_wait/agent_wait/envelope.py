"""The envelope (``wait.created``) and the identity rules around it.

| field | value |
|---|---|
| ``question_id`` | ``Interrupt.id`` (interrupt mode) or :func:`async_question_id` (async mode) |
| ``event_id`` | a fresh ULID per publish |
| ``dedupe_key`` | ``wait.created:<question_id>`` (:func:`dedupe_key_for`) |
| ``digest`` | :func:`digest_of` the question id, the question, its policy (and version); ``If-Match`` |

While a question waits, follow-up events of the same question (:meth:`Envelope.follow_up`) carry
the same ``question_id`` and ``digest`` under another ``type``: ``wait.escalated`` (``route``,
``escalation``) and ``wait.reminder`` (``reminder``), each deduplicated on
``<type>:<question_id>:<n>``.

Examples
--------
>>> from datetime import datetime, timezone
>>> from agent_wait.envelope import Question, build_envelope
>>> from agent_wait.policy import approval
>>> q = Question(question_id="q1", question={"function": "f", "args": {}}, policy=approval(ttl=60))
>>> env = build_envelope("t1", q, now=datetime(2026, 11, 30, 10, tzinfo=timezone.utc))
>>> (env.dedupe_key, env.expires_at.isoformat())
('wait.created:q1', '2026-11-30T10:01:00+00:00')
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_serializer, field_validator
from ulid import ULID

from agent_wait import exact_json
from agent_wait.policy import DEFAULT_BARE_POLICY, Policy

__all__ = [
    "EVENT_TYPE",
    "EVENT_TYPES",
    "EventType",
    "Envelope",
    "Question",
    "ReplyWith",
    "async_question_id",
    "build_envelope",
    "canonical_json",
    "dedupe_key_for",
    "digest_of",
    "isoformat_z",
]

EVENT_TYPE = "wait.created"
EventType = Literal["wait.created", "wait.escalated", "wait.reminder"]
EVENT_TYPES: tuple[EventType, ...] = ("wait.created", "wait.escalated", "wait.reminder")
# Fields only follow-up events carry; a `wait.created` envelope's JSON leaves them out.
_FOLLOW_UP_FIELDS = ("route", "escalation", "event_types", "reminder")
# Left out of the JSON when unset, so a question raised under its code's policy alone is shown
# (and digested) exactly as before policy stores existed.
_OPTIONAL_FIELDS = (*_FOLLOW_UP_FIELDS, "policy_version")


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no spaces: the form every hash in agent-wait is taken over.

    A ``Decimal`` is written as the number it holds, with all its digits.

    Examples
    --------
    >>> canonical_json({"b": 1, "a": [1, "é"]})
    '{"a":[1,"é"],"b":1}'
    """
    return exact_json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest_of(question: Any, policy: Policy, *, question_id: str, policy_version: int | None = None) -> str:
    """sha256 hex of the canonical JSON of ``{"question_id", "question", "policy"}``.

    The digest is the question's ETag: a binding reply echoes it as ``If-Match``, so an answer
    can only approve the exact proposal and policy it was shown, and only on the question it was
    shown on: two identical proposals (the same call on two threads) have two digests, so a tag
    read on one never approves the other.

    ``policy_version`` (the version of a policy store's override the question was raised under)
    joins the payload only when given: a question raised under its code's policy alone keeps the
    digest it always had.

    Examples
    --------
    >>> call = {"function": "f", "args": {}}
    >>> len(digest_of(call, Policy(), question_id="q1"))
    64
    >>> digest_of(call, Policy(), question_id="q1") == digest_of(call, Policy(), question_id="q2")
    False
    >>> versioned = digest_of(call, Policy(), question_id="q1", policy_version=1)
    >>> digest_of(call, Policy(), question_id="q1") == versioned
    False
    """
    payload: dict[str, Any] = {
        "question_id": question_id,
        "question": question,
        "policy": policy.model_dump(mode="json"),
    }
    if policy_version is not None:
        payload["policy_version"] = policy_version
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def dedupe_key_for(question_id: str) -> str:
    """``wait.created:<question_id>``: FIFO deduplication id, ledger key and webhook header.

    Examples
    --------
    >>> dedupe_key_for("abc")
    'wait.created:abc'
    """
    return f"{EVENT_TYPE}:{question_id}"


def async_question_id(thread_id: str, function: str, args: Any) -> str:
    """The question id of an async-mode wait: ``sha256(thread | function | canonical args)``.

    ``function`` is the function's ``__qualname__`` (``Refunds.issue``), so two methods of the
    same name on different classes do not share an id. The same call with the same arguments on
    the same thread gets the same id, so a repeated call republishes under the same dedupe key
    instead of asking twice.

    Examples
    --------
    >>> async_question_id("t1", "f", {"a": 1}) == async_question_id("t1", "f", {"a": 1})
    True
    """
    raw = f"{thread_id}|{function}|{canonical_json(args)}"
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def isoformat_z(value: datetime) -> str:
    """ISO-8601 in UTC with a ``Z`` suffix, as on the wire.

    Examples
    --------
    >>> isoformat_z(datetime(2026, 11, 30, 10, tzinfo=UTC))
    '2026-11-30T10:00:00Z'
    """
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


class ReplyWith(BaseModel):
    """How to answer: the method, the URL (or ``None`` when the host gave no template) and the
    ``If-Match`` value to echo (the quoted digest).

    Examples
    --------
    >>> ReplyWith(url=None, if_match='"abc"').method
    'POST'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: Literal["POST"] = "POST"
    url: str | None = None
    if_match: str


class Question(BaseModel):
    """One question as the framework surfaced it, before it becomes an envelope.

    Examples
    --------
    >>> Question(question_id="q1", question="Which colour?").policy.kind
    'text'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    question_id: str = Field(min_length=1)
    question: JsonValue
    policy: Policy = Field(default_factory=lambda: DEFAULT_BARE_POLICY)
    source: dict[str, JsonValue] | None = None
    # The version of the policy store's override ``policy`` was merged with; None: the code's own.
    policy_version: int | None = Field(default=None, ge=1)


class Envelope(BaseModel):
    """The ``wait.created`` event: everything a consumer needs to show and answer a question.

    The same shape, with ``type`` ``wait.escalated`` or ``wait.reminder``, announces what happens
    to the question while it waits (see :meth:`follow_up`).

    Examples
    --------
    >>> from datetime import datetime, timezone
    >>> env = build_envelope(
    ...     "t1", Question(question_id="q1", question="hi"), now=datetime(2026, 1, 1, tzinfo=timezone.utc)
    ... )
    >>> Envelope.model_validate_json(env.to_json()) == env
    True
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: EventType = "wait.created"
    event_id: str
    dedupe_key: str
    question_id: str
    thread_id: str
    created_at: datetime
    expires_at: datetime | None
    digest: str
    question: JsonValue
    policy: Policy
    source: dict[str, JsonValue] | None
    reply_with: ReplyWith
    # `wait.escalated`: the route of the rung the question moved to, and its 1-based number.
    route: str | None = None
    escalation: int | None = Field(default=None, ge=1)
    # `wait.escalated`: the rung's own event types, which the event is published as too (the SNS
    # and SQS `type` attribute lists them after `wait.escalated`), for subscribers of that rung only.
    event_types: list[str] | None = None
    # `wait.reminder`: the 1-based number of the reminder.
    reminder: int | None = Field(default=None, ge=1)
    # The version of the policy store's override the question was raised under (absent: none).
    policy_version: int | None = Field(default=None, ge=1)

    @field_validator("created_at", "expires_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("timestamps must be timezone-aware")
        return value.astimezone(UTC)

    @field_serializer("created_at", "expires_at")
    def _serialize_time(self, value: datetime | None) -> str | None:
        return None if value is None else isoformat_z(value)

    def to_json(self) -> str:
        """The envelope as compact JSON (the wire form).

        Examples
        --------
        >>> from datetime import datetime, timezone
        >>> env = build_envelope(
        ...     "t1", Question(question_id="q1", question="hi"), now=datetime(2026, 1, 1, tzinfo=timezone.utc)
        ... )
        >>> '"created_at":"2026-01-01T00:00:00Z"' in env.to_json()
        True
        """
        absent = {name for name in _OPTIONAL_FIELDS if getattr(self, name) is None}
        return self.model_dump_json(exclude=absent)

    def follow_up(
        self,
        type: Literal["wait.escalated", "wait.reminder"],
        number: int,
        *,
        route: str | None = None,
        expires_at: datetime | None = None,
        event_types: list[str] | None = None,
    ) -> Envelope:
        """The ``wait.escalated`` / ``wait.reminder`` event number ``number`` of this question.

        Same question, digest and ``reply_with`` (the question stays answerable with the same
        ``If-Match``); a fresh ``event_id``; ``dedupe_key = "<type>:<question_id>:<number>"``.

        Examples
        --------
        >>> from datetime import datetime, timezone
        >>> env = build_envelope(
        ...     "t1", Question(question_id="q1", question="hi"), now=datetime(2026, 1, 1, tzinfo=timezone.utc)
        ... )
        >>> up = env.follow_up("wait.escalated", 1, route="managers")
        >>> (up.type, up.dedupe_key, up.route, up.escalation, up.digest == env.digest)
        ('wait.escalated', 'wait.escalated:q1:1', 'managers', 1, True)
        """
        changes: dict[str, Any] = {
            "type": type,
            "event_id": str(ULID()),
            "dedupe_key": f"{type}:{self.question_id}:{number}",
            "expires_at": expires_at if expires_at is not None else self.expires_at,
        }
        if type == "wait.escalated":
            changes |= {"route": route, "escalation": number, "event_types": event_types or None}
        else:
            changes |= {"reminder": number}
        return self.model_validate(self.model_dump() | changes)


def build_envelope(
    thread_id: str,
    question: Question,
    *,
    reply_url: str | None = None,
    default_ttl: int | None = None,
    now: datetime | None = None,
) -> Envelope:
    """Build the envelope of ``question`` on ``thread_id``.

    ``expires_at`` is ``created_at`` plus the policy's ttl (or ``default_ttl`` when the policy has
    none); ``created_at`` is kept to whole seconds so the ledger's sort keys compare as strings.

    Examples
    --------
    >>> from datetime import datetime, timezone
    >>> env = build_envelope(
    ...     "t1",
    ...     Question(question_id="q1", question="hi"),
    ...     reply_url="https://x/questions/{question_id}/reply",
    ...     now=datetime(2026, 1, 1, tzinfo=timezone.utc),
    ... )
    >>> env.reply_with.url
    'https://x/questions/q1/reply'
    """
    created_at = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    ttl = question.policy.ttl if question.policy.ttl is not None else default_ttl
    digest = digest_of(
        question.question,
        question.policy,
        question_id=question.question_id,
        policy_version=question.policy_version,
    )
    return Envelope(
        event_id=str(ULID()),
        dedupe_key=dedupe_key_for(question.question_id),
        question_id=question.question_id,
        thread_id=thread_id,
        created_at=created_at,
        expires_at=created_at + timedelta(seconds=ttl) if ttl else None,
        digest=digest,
        question=question.question,
        policy=question.policy,
        policy_version=question.policy_version,
        source=question.source,
        reply_with=ReplyWith(
            url=reply_url.replace("{question_id}", question.question_id) if reply_url else None,
            if_match=f'"{digest}"',
        ),
    )
