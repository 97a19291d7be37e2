"""``POST /slack/interactions``: Slack's signature, answers through the reply service, message updates."""

from __future__ import annotations

import json
import urllib.parse
from typing import TYPE_CHECKING, Any

import pytest
from service_events import api_event, body_of

from agent_wait import Policy, decision
from agent_wait.slack import APPROVE_ACTION, MODAL_ACTION, REJECT_ACTION, SlackAnnounce, button_value
from wait_service.channels.slack import (
    SlackInteractions,
    answer_from_modal,
    slack_signature,
    verify_slack,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from service_events import Aws

    from agent_wait import Envelope
    from wait_service.http.api import WaitApi

    Call = Callable[[dict[str, Any]], dict[str, Any]]

# Slack's documentation, "Verifying requests from Slack", its worked example, byte for byte.
SLACK_DOC_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SLACK_DOC_TIMESTAMP = "1531420618"
SLACK_DOC_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
    b"&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
    b"&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
    b"&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
SLACK_DOC_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"

NOW = 1_800_000_000
SIGNING_SECRET = "slack-signing-secret"
RESPONSE_URL = "https://hooks.slack.com/actions/T1/1/abc"


def test_slacks_published_example_is_reproduced_byte_for_byte() -> None:
    assert slack_signature(SLACK_DOC_SECRET, SLACK_DOC_TIMESTAMP, SLACK_DOC_BODY) == SLACK_DOC_SIGNATURE
    now = int(SLACK_DOC_TIMESTAMP)
    assert (
        verify_slack(SLACK_DOC_SECRET, SLACK_DOC_TIMESTAMP, SLACK_DOC_SIGNATURE, SLACK_DOC_BODY, now=now)
        is None
    )


@pytest.mark.parametrize(
    ("timestamp", "signature", "body", "now", "code"),
    [
        (SLACK_DOC_TIMESTAMP, SLACK_DOC_SIGNATURE, SLACK_DOC_BODY + b"&x=1", 1531420618, "signature_invalid"),
        ("1531420619", SLACK_DOC_SIGNATURE, SLACK_DOC_BODY, 1531420619, "signature_invalid"),
        (
            SLACK_DOC_TIMESTAMP,
            SLACK_DOC_SIGNATURE,
            SLACK_DOC_BODY,
            1531420618 + 301,
            "timestamp_out_of_window",
        ),
        (
            SLACK_DOC_TIMESTAMP,
            SLACK_DOC_SIGNATURE,
            SLACK_DOC_BODY,
            1531420618 - 301,
            "timestamp_out_of_window",
        ),
        (SLACK_DOC_TIMESTAMP, "v0=ü", SLACK_DOC_BODY, 1531420618, "signature_invalid"),
        (None, SLACK_DOC_SIGNATURE, SLACK_DOC_BODY, 1531420618, "signature_missing"),
        (SLACK_DOC_TIMESTAMP, None, SLACK_DOC_BODY, 1531420618, "signature_missing"),
    ],
)
def test_slack_signature_failures(timestamp: Any, signature: Any, body: bytes, now: int, code: str) -> None:
    assert verify_slack(SLACK_DOC_SECRET, timestamp, signature, body, now=now) == code


class FakeSlackClient:
    """Records what the interactions handler sends to Slack."""

    def __init__(self) -> None:
        self.responses: list[tuple[str, dict[str, Any]]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def respond(self, url: str, body: Mapping[str, Any]) -> None:
        self.responses.append((url, dict(body)))

    def call(self, method: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        self.calls.append((method, dict(body)))
        return {"ok": True}


@pytest.fixture
def slack(api: WaitApi) -> FakeSlackClient:
    client = FakeSlackClient()
    api.slack = SlackInteractions(api.replies, lambda: SIGNING_SECRET, client, clock=lambda: NOW)  # type: ignore[arg-type]
    return client


def interaction(payload: dict[str, Any], *, secret: str = SIGNING_SECRET, at: int = NOW) -> dict[str, Any]:
    body = "payload=" + urllib.parse.quote(json.dumps(payload))
    return api_event(
        "reply.json",
        path="/slack/interactions",
        resource="/slack/interactions",
        method="POST",
        body=body,
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": str(at),
            "X-Slack-Signature": slack_signature(secret, at, body.encode()),
            "If-Match": None,
        },
        identity={"sourceIp": "203.0.113.9", "userArn": None},
    )


def click(
    envelope: Envelope, action_id: str, *, user: str = "U1", choice: str | None = None
) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "team": {"id": "T1"},
        "user": {"id": user, "team_id": "T1"},
        "response_url": RESPONSE_URL,
        "trigger_id": "trig-1",
        "actions": [
            {"action_id": action_id, "value": button_value(envelope.question_id, envelope.digest, choice)}
        ],
    }


def last_text(slack: FakeSlackClient) -> str:
    return str(slack.responses[-1][1]["text"])


def test_approve_click_answers_as_the_slack_user_and_updates_the_message(
    api: WaitApi, aws: Aws, call: Call, slack: FakeSlackClient
) -> None:
    envelope = aws.raise_question("t-1", "q-1")

    response = call(interaction(click(envelope, APPROVE_ACTION)))

    assert response["statusCode"] == 200
    question = api.ledger.get_question("q-1")
    assert (question.status, question.answer, question.answered_by) == (
        "answered",
        {"action": "approve"},
        "slack:T1:U1",
    )
    url, message = slack.responses[-1]
    assert url == RESPONSE_URL and message["replace_original"] is True
    assert message["text"] == "Approved by <@U1>."
    assert all(block["type"] != "actions" for block in message["blocks"])
    assert len([m for m in aws.inbox_messages() if "question_id" in m]) == 1


def test_a_second_different_click_shows_the_409_sentence(
    aws: Aws, call: Call, slack: FakeSlackClient
) -> None:
    envelope = aws.raise_question("t-1", "q-1")
    call(interaction(click(envelope, APPROVE_ACTION)))

    call(interaction(click(envelope, REJECT_ACTION, user="U2")))

    assert last_text(slack) == (
        "Not recorded: this question was already answered by <@U1>, and the first answer stands (approved)."
    )


def test_a_stale_message_shows_the_412_sentence(aws: Aws, call: Call, slack: FakeSlackClient) -> None:
    envelope = aws.raise_question("t-1", "q-1")
    stale = envelope.model_copy(update={"digest": "0" * 64})

    call(interaction(click(stale, APPROVE_ACTION)))

    assert last_text(slack).startswith("Not recorded: the question changed after this message was posted")


def test_an_expired_question_shows_the_410_sentence(
    aws: Aws, call: Call, slack: FakeSlackClient, clock: Any
) -> None:
    envelope = aws.raise_question("t-1", "q-1", policy=Policy(kind="approval", ttl=60))
    clock.advance(120)

    call(interaction(click(envelope, APPROVE_ACTION)))

    assert last_text(slack) == "Not recorded: this question has expired and takes no more answers."


def test_a_responder_not_allowed_is_told_alone_and_the_buttons_stay(
    api: WaitApi, aws: Aws, call: Call, slack: FakeSlackClient
) -> None:
    envelope = aws.raise_question("t-1", "q-1", policy=Policy(kind="approval", responders=["slack:T1:U9"]))

    call(interaction(click(envelope, APPROVE_ACTION)))

    message = slack.responses[-1][1]
    assert message["response_type"] == "ephemeral" and message["replace_original"] is False
    assert api.ledger.get_question("q-1").status == "raised"

    call(interaction(click(envelope, APPROVE_ACTION, user="U9")))
    assert api.ledger.get_question("q-1").answered_by == "slack:T1:U9"


def test_a_decision_button_answers_with_its_choice(
    api: WaitApi, aws: Aws, call: Call, slack: FakeSlackClient
) -> None:
    envelope = aws.raise_question("t-1", "q-1", policy=decision(["refund", "credit"]), question="How?")

    call(interaction(click(envelope, "agent_wait.choose.1", choice="credit")))

    assert api.ledger.get_question("q-1").answer == {"choice": "credit"}
    assert last_text(slack) == "Chose `credit` by <@U1>."


@pytest.mark.parametrize(
    ("change", "code"),
    [({"secret": "not-slacks"}, "signature_invalid"), ({"at": NOW - 301}, "timestamp_out_of_window")],
)
def test_a_bad_slack_signature_is_a_401_and_answers_nothing(
    api: WaitApi, aws: Aws, call: Call, slack: FakeSlackClient, change: dict[str, Any], code: str
) -> None:
    envelope = aws.raise_question("t-1", "q-1")

    response = call(interaction(click(envelope, APPROVE_ACTION), **change))

    assert response["statusCode"] == 401 and body_of(response)["error"] == code
    assert api.ledger.get_question("q-1").status == "raised" and slack.responses == []


def test_edit_button_opens_a_modal_and_its_submission_answers_with_edited_args(
    api: WaitApi, aws: Aws, call: Call, slack: FakeSlackClient
) -> None:
    envelope = aws.raise_question("t-1", "q-1")

    call(interaction(click(envelope, MODAL_ACTION)))
    [(method, opened)] = slack.calls
    assert method == "views.open" and opened["trigger_id"] == "trig-1"
    view = opened["view"]
    assert [b["block_id"] for b in view["blocks"]] == ["decision", "args", "reason"]

    submission = {
        "type": "view_submission",
        "team": {"id": "T1"},
        "user": {"id": "U3"},
        "view": {
            "callback_id": view["callback_id"],
            "private_metadata": view["private_metadata"],
            "state": {
                "values": {
                    "decision": {"value": {"type": "radio_buttons", "selected_option": {"value": "approve"}}},
                    "args": {
                        "value": {"type": "plain_text_input", "value": '{"customer": "c-17", "amount": 25}'}
                    },
                    "reason": {"value": {"type": "plain_text_input", "value": "partial refund"}},
                }
            },
        },
    }
    response = call(interaction(submission))

    assert response["statusCode"] == 200 and response["body"] == ""
    question = api.ledger.get_question("q-1")
    assert question.answer == {"action": "approve", "args": {"customer": "c-17", "amount": 25}}
    assert (question.answered_by, question.reason) == ("slack:T1:U3", "partial refund")
    assert last_text(slack) == "Approved with edited arguments by <@U3>."


def test_a_modal_with_json_that_does_not_parse_stays_open_with_an_error(
    api: WaitApi, aws: Aws, call: Call, slack: FakeSlackClient
) -> None:
    aws.raise_question("t-1", "q-1")
    record = api.ledger.get_question("q-1")
    values = {
        "decision": {"value": {"selected_option": {"value": "approve"}}},
        "args": {"value": {"value": "{amount: 25"}},
    }
    answer, _, errors = answer_from_modal(record, values)
    assert answer is None and errors["args"].startswith("This is not JSON")

    reject = {
        "decision": {"value": {"selected_option": {"value": "reject"}}},
        "reason": {"value": {"value": "no"}},
    }
    assert answer_from_modal(record, reject)[0] == {"action": "reject", "reason": "no"}


def test_a_body_without_a_payload_is_a_400(call: Call, slack: FakeSlackClient) -> None:
    event = interaction({})
    body = "nothing=here"
    event["body"] = body
    event["headers"]["X-Slack-Signature"] = slack_signature(SIGNING_SECRET, NOW, body.encode())

    assert call(event)["statusCode"] == 400


def test_messages_on_the_ledger_are_shared_by_every_runner_and_the_lifecycle(aws: Aws) -> None:
    from wait_service.channels.slack import LedgerSlackMessages

    posts: list[tuple[str, dict[str, Any]]] = []

    def fake(method: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        posts.append((method, dict(body)))
        return {"ok": True, "channel": "C123", "ts": f"1800000000.{len(posts):06d}"}

    def announcer() -> SlackAnnounce:
        store = LedgerSlackMessages(aws.resources.ledger_table, aws.dynamodb, clock=lambda: NOW)
        return SlackAnnounce("C123", "xoxb-test", call=fake, posted=store)

    envelope = aws.raise_question("t-1", "q-1")
    # Given one runner instance posted the question
    assert announcer().announce(envelope)
    # When another instance republishes it, and a third process follows up on it
    assert announcer().announce(envelope)
    assert announcer().announce(envelope.model_copy(update={"type": "wait.reminder"}))

    # Then there is one message, and the follow-up is in its thread
    assert [body.get("thread_ts") for _, body in posts] == [None, "1800000000.000001"]
    # And the question itself is untouched (no attribute added to its item)
    assert (
        "ts"
        not in aws.dynamodb.get_item(
            TableName=aws.resources.ledger_table, Key={"dedupe_key": {"S": "wait.created:q-1"}}
        )["Item"]
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"amount": 5, "amount": 20000}', "The key 'amount' appears twice"),
        ('{"customer": "\\ud800"}', "lone surrogate"),
        ("[" * 5000 + "]" * 5000, "not JSON"),
    ],
)
def test_a_modal_edit_is_read_as_the_api_reads_a_body(
    api: WaitApi, aws: Aws, call: Call, slack: FakeSlackClient, text: str, error: str
) -> None:
    aws.raise_question("t-1", "q-1")
    record = api.ledger.get_question("q-1")
    values = {
        "decision": {"value": {"selected_option": {"value": "approve"}}},
        "args": {"value": {"value": text}},
    }

    answer, _, errors = answer_from_modal(record, values)

    assert answer is None and error in errors["args"]


def test_a_modal_edit_keeps_the_digits_typed(
    api: WaitApi, aws: Aws, call: Call, slack: FakeSlackClient
) -> None:
    from decimal import Decimal

    aws.raise_question("t-1", "q-1")
    record = api.ledger.get_question("q-1")
    typed = '{"customer": "c-17", "amount": 25.00000000000000000001}'
    values = {
        "decision": {"value": {"selected_option": {"value": "approve"}}},
        "args": {"value": {"value": typed}},
    }

    answer, _, _ = answer_from_modal(record, values)

    assert answer == {
        "action": "approve",
        "args": {"customer": "c-17", "amount": Decimal("25.00000000000000000001")},
    }


def test_a_quorum_vote_from_slack_keeps_the_buttons_and_shows_the_count(
    api: WaitApi, aws: Aws, call: Call, slack: FakeSlackClient
) -> None:
    # Given a question two people must approve
    envelope = aws.raise_question("t-1", "q-1", policy=Policy(kind="approval", approvals_required=2))

    # When the first approves from Slack
    call(interaction(click(envelope, APPROVE_ACTION)))

    # Then the vote is recorded, nothing is decided, and the message keeps its buttons for the
    # second person, with where the count stands
    question = api.ledger.get_question("q-1")
    assert question.is_open and question.approvers == ("slack:T1:U1",)
    _, message = slack.responses[-1]
    assert message["text"] == "Approved by <@U1>: 1 of 2 approvals."
    assert any(block["type"] == "actions" for block in message["blocks"])
    assert [m for m in aws.inbox_messages() if "question_id" in m] == []

    # When a second person approves, the quorum decides and the buttons go
    call(interaction(click(envelope, APPROVE_ACTION, user="U2")))

    assert api.ledger.get_question("q-1").status == "answered"
    _, message = slack.responses[-1]
    assert message["text"] == "Approved by <@U2>."
    assert all(block["type"] != "actions" for block in message["blocks"])
    assert len([m for m in aws.inbox_messages() if "question_id" in m]) == 1
