"""Resolution events: how a wait ends, and how the run it paused ends, as published envelopes.

Beside ``wait.created`` (and its follow-ups ``wait.escalated`` and ``wait.reminder``,
:class:`agent_wait.envelope.Envelope`), a deployment publishes one event per end of a question or
run, under the same identity rules: a fresh ULID ``event_id`` per publish, and a ``dedupe_key``
stable for what it reports, so that a subscriber (and a FIFO queue) drops a repeat:

| type | reports | ``dedupe_key`` |
|---|---|---|
| ``wait.answered`` | a person's answer was recorded | ``wait.answered:<question_id>`` |
| ``wait.expired`` | the ttl ran out (the default answer, or a rejection) | ``wait.expired:<question_id>`` |
| ``wait.revoked`` | the question was withdrawn | ``wait.revoked:<question_id>`` |
| ``wait.resumed`` | the thread ran on with the answer (the call's receipt) | ``wait.resumed:<question_id>`` |
| ``wait.resume_failed`` | every attempt to resume failed | ``wait.resume_failed:<question_id>`` |
| ``thread.done`` | a run ended with an output | ``thread.done:<thread_id>:<run_id>`` |
| ``thread.failed`` | a run ended with an error | ``thread.failed:<thread_id>:<run_id>`` |

Every event (these and the envelope) names ``function``, ``status`` and ``policy_kind`` so that
:func:`agent_wait.aws._attributes.message_attributes` can give subscribers SNS filter attributes.

Examples
--------
>>> event = WaitRevoked.build(
...     question_id="q1", thread_id="t1", function="issue_refund", policy_kind="approval",
...     digest="d" * 64, reason="duplicate", revoked_by="ops@example.com",
...     at="2026-11-30T10:00:00Z",
... )
>>> (event.type, event.dedupe_key, event.status)
('wait.revoked', 'wait.revoked:q1', 'revoked')
>>> WaitRevoked.model_validate_json(event.to_json()) == event
True
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, TypeAdapter, WithJsonSchema
from ulid import ULID

from agent_wait import exact_json

__all__ = [
    "RESOLUTION_TYPES",
    "ResolutionEvent",
    "ResolutionType",
    "ThreadDone",
    "ThreadFailed",
    "WaitAnswered",
    "WaitExpired",
    "WaitResumeFailed",
    "WaitResumed",
    "WaitRevoked",
    "event_schemas",
    "parse_event",
    "write_schemas",
]

ResolutionType = Literal[
    "wait.answered",
    "wait.expired",
    "wait.revoked",
    "wait.resumed",
    "wait.resume_failed",
    "thread.done",
    "thread.failed",
]
# `function` and `policy_kind` of a thread's events: a run is the graph's, under no policy.
THREAD_FUNCTION = "graph"
THREAD_POLICY_KIND = "none"
# The longest `summary` of a run's output a `thread.done` event carries.
SUMMARY_CHARS = 200


# People's data (an answer, a call's arguments) as the ledger holds it: a number may be a Decimal
# (`10000.00000000000000001`), which the event carries with every digit; any JSON value in the schema.
ExactJsonValue = Annotated[Any, PlainSerializer(exact_json.marked, when_used="json"), WithJsonSchema({})]


class _Event(BaseModel):
    """Fields every resolution event carries."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_type: ClassVar[str]

    event_id: str = Field(description="a fresh ULID per publish")
    dedupe_key: str = Field(description="stable for what the event reports: deduplicate on it")
    thread_id: str
    occurred_at: str = Field(description="when the ledger recorded the change (ISO-8601, UTC)")
    function: str = Field(description="the waiting function's name; `graph` on thread events")
    status: str = Field(description="the question's status (or the run's) the event reports")
    policy_kind: str = Field(description="the question policy's kind; `none` on thread events")

    def to_json(self) -> str:
        """The event as compact JSON (the wire form), every number with the digits recorded."""
        return exact_json.restore(self.model_dump_json())


class _QuestionEvent(_Event):
    question_id: str
    digest: str = Field(description="the digest of the question and policy that was decided")

    @classmethod
    def _ids(cls, question_id: str) -> dict[str, str]:
        return {"event_id": str(ULID()), "dedupe_key": f"{cls.event_type}:{question_id}"}


class WaitAnswered(_QuestionEvent):
    """``wait.answered``: a person's answer was recorded (the first one; later ones lost)."""

    event_type: ClassVar[str] = "wait.answered"
    type: Literal["wait.answered"] = "wait.answered"
    status: Literal["answered"] = "answered"
    answer: ExactJsonValue
    answered_by: str | None
    reason: str | None = None

    @classmethod
    def build(cls, *, question_id: str, at: str, **fields: Any) -> Self:
        return cls(**cls._ids(question_id), question_id=question_id, occurred_at=at, **fields)


class WaitExpired(_QuestionEvent):
    """``wait.expired``: nobody answered in time; ``default_applied`` says whether the policy's
    default answer was recorded (``answer``), or a rejection."""

    event_type: ClassVar[str] = "wait.expired"
    type: Literal["wait.expired"] = "wait.expired"
    status: Literal["expired"] = "expired"
    default_applied: bool
    answer: ExactJsonValue = Field(description="the answer the thread is resumed with")

    @classmethod
    def build(cls, *, question_id: str, at: str, **fields: Any) -> Self:
        return cls(**cls._ids(question_id), question_id=question_id, occurred_at=at, **fields)


class WaitRevoked(_QuestionEvent):
    """``wait.revoked``: withdrawn before anyone answered."""

    event_type: ClassVar[str] = "wait.revoked"
    type: Literal["wait.revoked"] = "wait.revoked"
    status: Literal["revoked"] = "revoked"
    reason: str
    revoked_by: str

    @classmethod
    def build(cls, *, question_id: str, at: str, **fields: Any) -> Self:
        return cls(**cls._ids(question_id), question_id=question_id, occurred_at=at, **fields)


class ResumeReceipt(BaseModel):
    """What the resumed call reported (:class:`agent_wait.receipts.Receipt`, published form)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ran: bool
    args: dict[str, ExactJsonValue] | None = None
    outcome: Literal["returned", "raised"] | None = None
    error: str | None = None
    at: str | None = None


class WaitResumed(_QuestionEvent):
    """``wait.resumed``: the thread ran on with the answer; ``receipt`` is ``None`` when the call
    reported none (a bare ``interrupt()``, or a call whose report came after the resume)."""

    event_type: ClassVar[str] = "wait.resumed"
    type: Literal["wait.resumed"] = "wait.resumed"
    receipt: ResumeReceipt | None

    @classmethod
    def build(cls, *, question_id: str, at: str, **fields: Any) -> Self:
        return cls(**cls._ids(question_id), question_id=question_id, occurred_at=at, **fields)


class WaitResumeFailed(_QuestionEvent):
    """``wait.resume_failed``: resuming the thread failed for good (``attempts`` made)."""

    event_type: ClassVar[str] = "wait.resume_failed"
    type: Literal["wait.resume_failed"] = "wait.resume_failed"
    error: str
    attempts: int | None = Field(default=None, ge=1)

    @classmethod
    def build(cls, *, question_id: str, at: str, **fields: Any) -> Self:
        return cls(**cls._ids(question_id), question_id=question_id, occurred_at=at, **fields)


class _ThreadEvent(_Event):
    run_id: str | None = Field(description="the run that ended (`null` for a run started without one)")
    function: Literal["graph"] = "graph"
    policy_kind: Literal["none"] = "none"

    @classmethod
    def build(cls, *, thread_id: str, run_id: str | None, at: str, **fields: Any) -> Self:
        # A thread's runs end one after the other: the run id (or its start) names the end.
        started_at = fields.pop("started_at", None)
        run = run_id if run_id is not None else f"started:{started_at or at}"
        return cls(
            event_id=str(ULID()),
            dedupe_key=f"{cls.event_type}:{thread_id}:{run}",
            thread_id=thread_id,
            run_id=run_id,
            occurred_at=at,
            **fields,
        )


class ThreadDone(_ThreadEvent):
    """``thread.done``: a run ended with an output (``output_bytes`` of JSON, a ``summary``)."""

    event_type: ClassVar[str] = "thread.done"
    type: Literal["thread.done"] = "thread.done"
    status: Literal["done"] = "done"
    output_bytes: int = Field(ge=0)
    summary: str = Field(description=f"the output's JSON, cut to {SUMMARY_CHARS} characters")

    @staticmethod
    def summarize(output_json: str) -> str:
        """The first :data:`SUMMARY_CHARS` characters of the output, with ``…`` when cut.

        Examples
        --------
        >>> ThreadDone.summarize('{"ok":true}')
        '{"ok":true}'
        >>> len(ThreadDone.summarize("x" * 500))
        201
        """
        return output_json if len(output_json) <= SUMMARY_CHARS else output_json[:SUMMARY_CHARS] + "…"


class ThreadFailed(_ThreadEvent):
    """``thread.failed``: a run ended with an error (the graph raised, or every attempt failed)."""

    event_type: ClassVar[str] = "thread.failed"
    type: Literal["thread.failed"] = "thread.failed"
    status: Literal["failed"] = "failed"
    error: str


ResolutionEvent = Annotated[
    WaitAnswered | WaitExpired | WaitRevoked | WaitResumed | WaitResumeFailed | ThreadDone | ThreadFailed,
    Field(discriminator="type"),
]
RESOLUTION_MODELS: dict[str, type[_Event]] = {
    model.event_type: model
    for model in (
        WaitAnswered,
        WaitExpired,
        WaitRevoked,
        WaitResumed,
        WaitResumeFailed,
        ThreadDone,
        ThreadFailed,
    )
}
RESOLUTION_TYPES: tuple[str, ...] = tuple(RESOLUTION_MODELS)
_ADAPTER: TypeAdapter[Any] = TypeAdapter(ResolutionEvent)


def parse_event(data: Any) -> Any:
    """Validate a published event of any type (a dict or JSON text) against its model.

    Raises pydantic's ``ValidationError`` when it does not match the schema of its ``type``.

    Examples
    --------
    >>> parse_event({"type": "thread.failed", "event_id": "e", "dedupe_key": "k", "thread_id": "t",
    ...     "occurred_at": "2026-11-30T10:00:00Z", "run_id": "r", "error": "boom"}).error
    'boom'
    """
    from agent_wait.envelope import EVENT_TYPES, Envelope

    raw = json.loads(data) if isinstance(data, str | bytes) else data
    if isinstance(raw, dict) and raw.get("type") in EVENT_TYPES:
        return Envelope.model_validate(raw)
    return _ADAPTER.validate_python(raw)


def event_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of every event type, by type (``docs/events/<type>.schema.json`` in the
    repository holds each, and a test checks they are equal)."""
    from agent_wait.envelope import EVENT_TYPES, Envelope

    schemas: dict[str, dict[str, Any]] = {}
    for type_ in EVENT_TYPES:
        schema = Envelope.model_json_schema(mode="serialization")
        schema["properties"]["type"] = {"const": type_, "title": "Type", "type": "string"}
        schema["title"] = type_
        schemas[type_] = schema
    for name, model in RESOLUTION_MODELS.items():
        schema = model.model_json_schema(mode="serialization")
        schema["title"] = name
        schemas[name] = schema
    for schema in schemas.values():
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schemas


def write_schemas(directory: str) -> list[str]:
    """Write ``<type>.schema.json`` for every event type into ``directory``; returns the paths.

    The repository keeps them in ``docs/events/``:
    ``python -c "from agent_wait.events import write_schemas; write_schemas('docs/events')"``.
    """
    from pathlib import Path

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for type_, schema in event_schemas().items():
        path = folder / f"{type_}.schema.json"
        path.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")
        written.append(str(path))
    return written
