"""SlackAnnounce: the announcer suite, the message it posts, and thread follow-ups."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from agent_wait import BaseAnnounce, Envelope
from agent_wait.errors import SlackApiError
from agent_wait.policy import decision, free_text
from agent_wait.slack import APPROVE_ACTION, MODAL_ACTION, REJECT_ACTION, SlackAnnounce, question_blocks
from agent_wait.testing import AnnounceConformance, sample_envelope

if TYPE_CHECKING:
    from collections.abc import Mapping


class FakeSlack:
    """Records Web API calls and answers like Slack (one ``ts`` per message)."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail

    def __call__(self, method: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        if self.fail:
            raise SlackApiError(
                "Slack chat.postMessage failed: channel_not_found", slack_error="channel_not_found"
            )
        self.calls.append((method, dict(body)))
        return {"ok": True, "channel": body["channel"], "ts": f"1700000000.{len(self.calls):06d}"}


class TestSlackAnnounce(AnnounceConformance):
    # A republished question is not posted twice: the message it has is the one people answer.
    deduplicates = True

    def make_announce(self) -> SlackAnnounce:
        return SlackAnnounce("C123", "xoxb-test", call=FakeSlack())

    def delivered(self, announce: BaseAnnounce) -> list[Envelope]:
        assert isinstance(announce, SlackAnnounce)
        fake = announce._call
        assert isinstance(fake, FakeSlack)
        return [
            Envelope.model_validate_json(body["metadata"]["event_payload"]["envelope"])
            for method, body in fake.calls
            if method == "chat.postMessage"
        ]

    def make_broken(self) -> BaseAnnounce:
        return SlackAnnounce("C123", "xoxb-test", call=FakeSlack(fail=True))


def _post(envelope: Envelope) -> dict[str, Any]:
    fake = FakeSlack()
    assert SlackAnnounce("C123", "xoxb-test", call=fake).announce(envelope)
    [(method, body)] = fake.calls
    assert method == "chat.postMessage"
    return body


def test_message_shows_call_args_who_asked_and_expiry_with_buttons_bound_to_the_digest() -> None:
    envelope = sample_envelope("q-7", "thread-9")
    body = _post(envelope)
    text = json.dumps(body["blocks"], ensure_ascii=False)
    assert body["channel"] == "C123" and body["text"] == "Approval needed: issue_refund"
    assert "`issue_refund`" in text and '\\"amount\\": 40.5' in text and "café ☕" in text
    assert "examples.refund_agent.issue_refund" in text and "`thread-9`" in text
    assert "2026-12-01T10:00:00Z" in text  # ttl 86400 from FIXED_NOW, as the fallback of <!date^...>
    [actions] = [b for b in body["blocks"] if b["type"] == "actions"]
    ids = [e["action_id"] for e in actions["elements"]]
    assert ids == [APPROVE_ACTION, REJECT_ACTION, MODAL_ACTION]
    for element in actions["elements"]:
        assert json.loads(element["value"]) == {"q": "q-7", "d": envelope.digest}
    assert body["metadata"]["event_payload"]["question_id"] == "q-7"


def test_decision_gets_one_button_per_option_and_text_gets_a_modal_button() -> None:
    choose = _post(sample_envelope(policy=decision(["refund", "credit", "deny"])))
    [actions] = [b for b in choose["blocks"] if b["type"] == "actions"]
    values = [json.loads(e["value"]).get("c") for e in actions["elements"]]
    assert values == ["refund", "credit", "deny", None]
    assert len({e["action_id"] for e in actions["elements"]}) == 4

    text = _post(sample_envelope(question="Which warehouse?", policy=free_text()))
    [actions] = [b for b in text["blocks"] if b["type"] == "actions"]
    assert [e["action_id"] for e in actions["elements"]] == [MODAL_ACTION]


def test_long_arguments_stay_within_block_kit_limits() -> None:
    envelope = sample_envelope(question={"function": "f", "args": {"blob": "x" * 10_000}})
    section = next(b for b in _post(envelope)["blocks"] if b["type"] == "section")
    assert len(section["text"]["text"]) <= 3000


def test_answered_message_blocks_have_no_buttons() -> None:
    envelope = sample_envelope()
    blocks = question_blocks(
        question_id=envelope.question_id,
        thread_id=envelope.thread_id,
        digest=envelope.digest,
        question=envelope.question,
        policy=envelope.policy,
        source=envelope.source,
        expires_at=None,
        buttons=False,
    )
    assert [b["type"] for b in blocks] == ["header", "section", "context"]
    assert "never expires" in blocks[-1]["elements"][0]["text"]


def test_an_envelope_of_another_type_replies_in_the_question_thread() -> None:
    fake = FakeSlack()
    slack = SlackAnnounce("C123", "xoxb-test", call=fake)
    question = sample_envelope("q-life")
    assert slack.announce(question)
    ts = "1700000000.000001"

    expired = question.model_copy(update={"type": "wait.expired"})
    assert slack.announce(expired)

    method, body = fake.calls[-1]
    assert method == "chat.postMessage"
    assert body == {
        "channel": "C123",
        "thread_ts": ts,
        "text": "Expired (2026-11-30T10:00:00Z).",
    }


def test_a_follow_up_without_a_known_message_fails_visibly() -> None:
    slack = SlackAnnounce("C123", "xoxb-test", call=FakeSlack())
    with pytest.raises(SlackApiError) as err:
        slack.follow_up("q-unknown", "reminder")
    assert err.value.slack_error == "message_not_found"


def test_token_may_be_a_callable_read_when_needed() -> None:
    reads: list[int] = []

    def token() -> str:
        reads.append(1)
        return "xoxb-late"

    slack = SlackAnnounce("C123", token)
    assert reads == []
    assert slack.client.token() == "xoxb-late" and reads == [1]
