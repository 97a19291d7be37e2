"""Envelope fields, identity rules and digest stability."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from agent_wait import (
    Envelope,
    Policy,
    Question,
    approval,
    async_question_id,
    build_envelope,
    canonical_json,
    dedupe_key_for,
    digest_of,
    free_text,
)
from agent_wait.policy import DEFAULT_BARE_POLICY

NOW = datetime(2026, 11, 30, 10, 0, 0, 123456, tzinfo=UTC)
QUESTION = {"function": "issue_refund", "args": {"customer": "c-17", "amount": 40}}


def _envelope(**kwargs: object) -> Envelope:
    question = Question(question_id="q-1", question=QUESTION, policy=approval(ttl=86400))
    return build_envelope("thread-1", question, now=NOW, **kwargs)  # type: ignore[arg-type]


def test_canonical_json_sorts_keys_and_drops_spaces() -> None:
    """canonical_json = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)."""
    assert canonical_json({"b": [1, {"d": 1, "c": 2}], "a": "é"}) == '{"a":"é","b":[1,{"c":2,"d":1}]}'


def test_digest_is_sha256_of_canonical_question_id_question_and_policy() -> None:
    """ "digest: sha256 of the canonical JSON (sorted keys, no spaces) of the question and its policy",
    and of the question's identity: "the digest binds the question's identity as well as its content"."""
    policy = approval(ttl=60)
    expected = hashlib.sha256(
        json.dumps(
            {"question_id": "q-1", "question": QUESTION, "policy": policy.model_dump(mode="json")},
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
    ).hexdigest()
    assert digest_of(QUESTION, policy, question_id="q-1") == expected


def test_digest_is_stable_across_key_order_and_instances() -> None:
    reordered = {"args": {"amount": 40, "customer": "c-17"}, "function": "issue_refund"}
    assert digest_of(QUESTION, Policy(ttl=60), question_id="q-1") == digest_of(
        reordered, approval(ttl=60), question_id="q-1"
    )


def test_two_identical_proposals_on_two_questions_have_two_digests() -> None:
    """The same call on two threads: a tag read on one question never approves the other."""
    on_one = build_envelope("t-1", Question(question_id="q-1", question=QUESTION, policy=approval()))
    on_two = build_envelope("t-2", Question(question_id="q-2", question=QUESTION, policy=approval()))
    assert on_one.digest != on_two.digest
    assert on_one.reply_with.if_match != on_two.reply_with.if_match


def test_digest_needs_the_question_id() -> None:
    # The two-argument form of before would silently compute a digest that binds no question.
    with pytest.raises(TypeError):
        digest_of(QUESTION, approval())  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("question", "policy"),
    [
        ({"function": "issue_refund", "args": {"customer": "c-17", "amount": 41}}, approval(ttl=60)),
        (QUESTION, approval(ttl=61)),
        (QUESTION, approval(ttl=60, bind=False)),
        (QUESTION, free_text(ttl=60)),
    ],
)
def test_digest_changes_with_the_proposal_or_the_policy(question: object, policy: Policy) -> None:
    assert digest_of(question, policy, question_id="q-1") != digest_of(
        QUESTION, approval(ttl=60), question_id="q-1"
    )


def test_identity_helpers() -> None:
    """dedupe_key = "wait.created:<question_id>"; async question_id = sha256(thread|function|args)."""
    assert dedupe_key_for("abc") == "wait.created:abc"
    raw = 'thread-1|issue_refund|{"amount":40,"customer":"c-17"}'
    assert async_question_id("thread-1", "issue_refund", {"customer": "c-17", "amount": 40}) == (
        hashlib.sha256(raw.encode()).hexdigest()
    )


def test_envelope_fields() -> None:
    env = _envelope(reply_url="https://api/questions/{question_id}/reply")
    assert env.type == "wait.created"
    assert env.dedupe_key == "wait.created:q-1"
    assert (env.question_id, env.thread_id) == ("q-1", "thread-1")
    assert env.created_at == NOW.replace(microsecond=0)
    assert env.expires_at == env.created_at + timedelta(days=1)
    assert env.digest == digest_of(QUESTION, approval(ttl=86400), question_id="q-1")
    assert env.reply_with.model_dump() == {
        "method": "POST",
        "url": "https://api/questions/q-1/reply",
        "if_match": f'"{env.digest}"',
    }
    assert len(env.event_id) == 26  # a ULID


def test_event_id_is_new_per_publish_and_dedupe_key_is_not() -> None:
    first, again = _envelope(), _envelope()
    assert first.event_id != again.event_id
    assert first.dedupe_key == again.dedupe_key and first.digest == again.digest


def test_wire_form_is_compact_json_with_z_timestamps() -> None:
    env = _envelope()
    wire = env.to_json()
    assert ": " not in wire and ", " not in wire
    body = json.loads(wire)
    assert list(body) == [
        "type",
        "event_id",
        "dedupe_key",
        "question_id",
        "thread_id",
        "created_at",
        "expires_at",
        "digest",
        "question",
        "policy",
        "source",
        "reply_with",
    ]
    assert body["created_at"] == "2026-11-30T10:00:00Z"
    assert body["expires_at"] == "2026-12-01T10:00:00Z"
    assert body["reply_with"]["url"] is None
    assert Envelope.model_validate_json(wire) == env


def test_default_ttl_applies_only_without_a_policy_ttl() -> None:
    bare = Question(question_id="q", question="hi")
    assert build_envelope("t", bare, now=NOW).expires_at is None
    assert build_envelope("t", bare, now=NOW, default_ttl=60).expires_at == NOW.replace(
        microsecond=0
    ) + timedelta(seconds=60)
    assert _envelope(default_ttl=5).expires_at == NOW.replace(microsecond=0) + timedelta(days=1)


def test_timestamps_are_normalised_to_utc_and_must_be_aware() -> None:
    cet = timezone(timedelta(hours=1))
    env = build_envelope(
        "t", Question(question_id="q", question="hi"), now=datetime(2026, 1, 1, 11, tzinfo=cet)
    )
    assert env.to_json().count('"2026-01-01T10:00:00Z"') == 1
    with pytest.raises(ValidationError):
        env.model_copy(update={}).model_validate({**env.model_dump(), "created_at": datetime(2026, 1, 1)})


def test_envelope_is_frozen() -> None:
    with pytest.raises(ValidationError):
        _envelope().thread_id = "other"  # type: ignore[misc]


def test_a_question_without_a_policy_shares_the_bare_interrupt_policy() -> None:
    """One definition of the bare policy: Question's default is DEFAULT_BARE_POLICY itself."""
    assert Question(question_id="q", question="hi").policy is DEFAULT_BARE_POLICY
