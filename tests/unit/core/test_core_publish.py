"""``publish_interrupts``: one envelope per interrupt, announced; sinks never fail the caller."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from unittest.mock import ANY

from agent_wait import InMemoryAnnounce, Policy, approval, edit, make_publish_interrupts, make_wait
from agent_wait.announce import BaseAnnounce

if TYPE_CHECKING:
    import pytest
    from conftest import ScriptedFramework

NOW = datetime(2026, 11, 30, 10, tzinfo=UTC)


def _parked_value(framework: ScriptedFramework, policy: Policy) -> Any:
    @make_wait(framework)(policy)
    def issue_refund(customer: str, amount: int) -> None: ...

    try:
        issue_refund("c-17", 40)
    except framework.Parked as parked:
        return parked.value
    raise AssertionError("the call did not park")


def test_a_wait_value_unpacks_to_question_policy_and_source(framework: ScriptedFramework) -> None:
    """ "a @wait call → one envelope, that policy" (seed 000, Two interrupt shapes)."""
    policy = edit(ttl=120)
    value = _parked_value(framework, policy)
    sink = InMemoryAnnounce()

    envelopes = make_publish_interrupts(framework)([("iid-1", value)], "thread-1", sink, now=NOW)

    [env] = envelopes
    assert env.question_id == "iid-1" and env.thread_id == "thread-1"
    assert env.question == {
        "function": "issue_refund",
        "args": {"customer": "c-17", "amount": 40},
        "args_schema": ANY,
    }
    assert env.policy == policy
    assert env.source is not None and str(env.source["function"]).endswith("issue_refund")
    assert env.expires_at == NOW + timedelta(seconds=120)
    assert sink.envelopes == envelopes


def test_a_bare_interrupt_gets_the_default_policy(framework: ScriptedFramework) -> None:
    """ "A bare interrupt(value) is published with Policy(kind="text", bind=False)" (library-api.md)."""
    [env] = make_publish_interrupts(framework)([("iid-2", {"ask": "Which colour?"})], "t", None)
    assert env.question == {"ask": "Which colour?"}
    assert env.policy == Policy(kind="text", bind=False)
    assert env.source is None and env.expires_at is None


def test_an_invalid_wait_policy_is_published_as_a_bare_value(framework: ScriptedFramework) -> None:
    value = {"question": {"function": "f", "args": {}}, "__wait__": {"kind": "vote"}}
    [env] = make_publish_interrupts(framework)([("iid", value)], "t", None)
    assert env.question == value and env.policy.kind == "text"


def test_one_envelope_per_interrupt_in_order_and_none_when_done(framework: ScriptedFramework) -> None:
    publish = make_publish_interrupts(framework)
    value = _parked_value(framework, approval())
    envelopes = publish([("a", value), ("b", "free text?")], "t", None)
    assert [e.question_id for e in envelopes] == ["a", "b"]
    assert [e.policy.kind for e in envelopes] == ["approval", "text"]
    assert publish([], "t", InMemoryAnnounce()) == []


def test_reply_url_default_ttl_and_now(framework: ScriptedFramework) -> None:
    [env] = make_publish_interrupts(framework)(
        [("q-9", "hi")],
        "t",
        None,
        reply_url="https://h/questions/{question_id}/reply",
        default_ttl=30,
        now=NOW,
    )
    assert env.reply_with.url == "https://h/questions/q-9/reply"
    assert env.created_at == NOW and env.expires_at == NOW + timedelta(seconds=30)


def test_a_failing_sink_never_raises_out(
    framework: ScriptedFramework, caplog: pytest.LogCaptureFixture
) -> None:
    """ "Returns one envelope per interrupt … Never raises because a sink failed" (library-api.md)."""
    delivered: list[str] = []

    def explode(envelope: Any) -> None:
        raise ConnectionError("sink down")

    class Broken(BaseAnnounce):
        name = "broken"

        def deliver(self, envelope: Any) -> None:
            raise ConnectionError("sink down")

    publish = make_publish_interrupts(framework)
    with caplog.at_level(logging.ERROR, logger="agent_wait"):
        assert len(publish([("a", "x"), ("b", "y")], "t", explode)) == 2
        assert len(publish([("c", "z")], "t", Broken())) == 1
        publish([("d", "w")], "t", lambda e: delivered.append(e.question_id))
    assert delivered == ["d"]
    failed = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [getattr(r, "question_id", None) for r in failed] == ["a", "b", "c"]
