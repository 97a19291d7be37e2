"""Event models, their committed JSON Schemas, and the filter attributes every event carries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from agent_wait.aws._attributes import message_attributes
from agent_wait.envelope import EVENT_TYPES, Question, build_envelope
from agent_wait.events import (
    RESOLUTION_TYPES,
    ThreadDone,
    ThreadFailed,
    WaitAnswered,
    WaitExpired,
    WaitResumed,
    WaitResumeFailed,
    WaitRevoked,
    event_schemas,
    parse_event,
)
from agent_wait.policy import approval

SCHEMAS = Path(__file__).resolve().parents[3] / "docs" / "events"
AT = "2026-11-30T10:00:00.000Z"
QUESTION = {
    "question_id": "q-1",
    "thread_id": "t-1",
    "at": AT,
    "function": "issue_refund",
    "policy_kind": "approval",
    "digest": "d" * 64,
}


def samples() -> list[Any]:
    envelope = build_envelope(
        "t-1",
        Question(
            question_id="q-1",
            question={"function": "issue_refund", "args": {"amount": 40}},
            policy=approval(ttl=60),
        ),
    )
    return [
        envelope,
        envelope.follow_up("wait.escalated", 1, route="managers"),
        envelope.follow_up("wait.reminder", 1),
        WaitAnswered.build(**QUESTION, answer={"action": "approve"}, answered_by="ann"),
        WaitExpired.build(
            **QUESTION, default_applied=False, answer={"action": "reject", "reason": "expired"}
        ),
        WaitRevoked.build(**QUESTION, reason="duplicate", revoked_by="ops"),
        WaitResumed.build(
            **QUESTION,
            status="resumed",
            receipt={"ran": True, "args": {"amount": 40}, "outcome": "returned", "at": AT},
        ),
        WaitResumeFailed.build(**QUESTION, status="resume_failed", error="ValueError: boom", attempts=5),
        ThreadDone.build(thread_id="t-1", run_id="r-1", at=AT, output_bytes=11, summary='{"ok":true}'),
        ThreadFailed.build(thread_id="t-1", run_id=None, at=AT, started_at=AT, error="boom"),
    ]


def test_every_event_type_has_its_committed_schema_equal_to_the_models() -> None:
    schemas = event_schemas()
    assert sorted(schemas) == sorted((*EVENT_TYPES, *RESOLUTION_TYPES))
    for type_, schema in schemas.items():
        path = SCHEMAS / f"{type_}.schema.json"
        assert path.exists(), (
            f"missing {path}: regenerate with agent_wait.events.write_schemas('docs/events')"
        )
        assert json.loads(path.read_text()) == schema, (
            f"{path} differs from the model: regenerate with agent_wait.events.write_schemas('docs/events')"
        )
        jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("event", samples(), ids=lambda e: e.type)
def test_each_event_validates_against_its_schema_and_round_trips(event: Any) -> None:
    wire = json.loads(event.to_json())
    schema = json.loads((SCHEMAS / f"{event.type}.schema.json").read_text())

    jsonschema.validate(wire, schema)
    assert parse_event(wire) == event
    # A missing field is refused by both the schema and the model
    broken = {k: v for k, v in wire.items() if k != "thread_id"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
    with pytest.raises(ValidationError):
        parse_event(broken)


def test_a_schema_refuses_another_types_event() -> None:
    answered = json.loads(WaitAnswered.build(**QUESTION, answer=1, answered_by="ann").to_json())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(answered, json.loads((SCHEMAS / "wait.revoked.schema.json").read_text()))


@pytest.mark.parametrize("event", samples(), ids=lambda e: e.type)
def test_every_event_carries_the_filter_attributes(event: Any) -> None:
    attributes = {k: v["StringValue"] for k, v in message_attributes(event).items()}

    assert {"type", "dedupe_key", "thread_id", "function", "status", "policy_kind"} <= set(attributes)
    assert attributes["type"] == event.type
    assert attributes["dedupe_key"] == event.dedupe_key
    assert ("route" in attributes) == (event.type == "wait.escalated")
    expected_function = "graph" if event.type.startswith("thread.") else "issue_refund"
    assert attributes["function"] == expected_function


def test_dedupe_keys_are_stable_and_event_ids_fresh() -> None:
    first = WaitAnswered.build(**QUESTION, answer=1, answered_by="ann")
    again = WaitAnswered.build(**QUESTION, answer=1, answered_by="ann")
    assert first.dedupe_key == again.dedupe_key == "wait.answered:q-1"
    assert first.event_id != again.event_id
    done = ThreadDone.build(thread_id="t-1", run_id="r-1", at=AT, output_bytes=0, summary="null")
    assert done.dedupe_key == "thread.done:t-1:r-1"


def test_a_bare_interrupt_names_its_function_interrupt() -> None:
    envelope = build_envelope("t-1", Question(question_id="q-1", question="Which colour?"))
    attributes = {k: v["StringValue"] for k, v in message_attributes(envelope).items()}
    assert (attributes["function"], attributes["status"], attributes["policy_kind"]) == (
        "interrupt",
        "raised",
        "text",
    )
