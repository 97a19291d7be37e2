"""A host's override of a question's policy (a policy store): applied before the envelope is built,
recorded as ``policy_version`` and covered by the digest; absent, nothing changes."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agent_wait import InMemoryAnnounce, approval, make_publish_interrupts, make_wait
from agent_wait.envelope import Envelope, Question, build_envelope, canonical_json, digest_of
from agent_wait.hosting import AsyncHost, hosting_async_waits
from agent_wait.policy import Policy

if TYPE_CHECKING:
    from conftest import ScriptedFramework

NOW = datetime(2026, 12, 1, 10, tzinfo=UTC)
CALL = {"function": "issue_refund", "args": {"amount": 40}}


def override(question: Question) -> Question:
    policy = Policy.model_validate(question.policy.model_dump() | {"ttl": 60, "responders": ["ann"]})
    return question.model_copy(update={"policy": policy, "policy_version": 3})


def test_without_a_version_the_digest_and_the_wire_form_are_todays() -> None:
    """The digest of a question raised under its code's policy stays exactly what it was."""
    policy = approval(ttl=3600)
    env = build_envelope("t", Question(question_id="q1", question=CALL, policy=policy), now=NOW)
    payload = {"question_id": "q1", "question": CALL, "policy": policy.model_dump(mode="json")}
    assert env.digest == hashlib.sha256(canonical_json(payload).encode()).hexdigest()
    assert env.policy_version is None
    assert "policy_version" not in json.loads(env.to_json())


def test_the_version_is_recorded_and_covered_by_the_digest() -> None:
    policy = approval(ttl=3600)
    env = build_envelope(
        "t", Question(question_id="q1", question=CALL, policy=policy, policy_version=3), now=NOW
    )
    assert env.policy_version == 3 and json.loads(env.to_json())["policy_version"] == 3
    assert env.digest == digest_of(CALL, policy, question_id="q1", policy_version=3)
    assert env.digest != digest_of(CALL, policy, question_id="q1")
    assert env.digest != digest_of(CALL, policy, question_id="q1", policy_version=4)
    # The wire form reads back whole, and a follow-up event keeps the version
    assert Envelope.model_validate_json(env.to_json()) == env
    assert env.follow_up("wait.reminder", 1).policy_version == 3


def _parked(framework: ScriptedFramework) -> Any:
    @make_wait(framework)(approval(ttl=3600))
    def issue_refund(amount: int) -> None: ...

    try:
        issue_refund(40)
    except framework.Parked as parked:
        return parked.value
    raise AssertionError("the call did not park")


def test_publish_interrupts_applies_the_hosts_override(framework: ScriptedFramework) -> None:
    sink = InMemoryAnnounce()
    publish = make_publish_interrupts(framework)
    [env] = publish([("iid-1", _parked(framework))], "t", sink, now=NOW, override=override)
    assert (env.policy.ttl, env.policy.responders, env.policy_version) == (60, ["ann"], 3)
    assert env.digest == digest_of(env.question, env.policy, question_id="iid-1", policy_version=3)
    assert sink.envelopes == [env]
    # Without one, the code's policy as it was
    [plain] = publish([("iid-1", _parked(framework))], "t", None, now=NOW)
    assert (plain.policy.ttl, plain.policy_version) == (3600, None)


def test_an_async_question_gets_the_hosts_override(framework: ScriptedFramework) -> None:
    sink = InMemoryAnnounce()

    @make_wait(framework)(approval(ttl=3600), mode="async")
    def issue_refund(amount: int) -> None: ...

    with hosting_async_waits(AsyncHost(announce=sink, now=lambda: NOW, override=override)):
        issue_refund(40)
    [env] = sink.envelopes
    assert (env.policy.ttl, env.policy_version) == (60, 3)
