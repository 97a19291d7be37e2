"""A request of LangChain's HumanInTheLoopMiddleware answered from Slack: only its allowed decisions.

The middleware names, per action request, the decisions a person may take
(``allowed_decisions``: approve, edit, reject, respond). Its Slack message offers those and no
other; a click or a modal answers with the shape the runner turns into the middleware's decision;
a decision the request does not allow is refused to the clicker alone (and by the api with 422).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from service_events import body_of
from test_service_slack import (
    RESPONSE_URL,
    FakeSlackClient,
    click,
    interaction,
    last_text,
    slack,
)

from agent_wait import Policy, Question, build_envelope
from agent_wait.interrupt_keys import WAIT_KEY
from agent_wait.langchain_hitl import batch_questions, decision
from agent_wait.slack import APPROVE_ACTION, MODAL_ACTION, REJECT_ACTION, SlackAnnounce

if TYPE_CHECKING:
    from collections.abc import Callable

    from service_events import Aws

    from agent_wait import Envelope
    from wait_service.http.api import WaitApi

    Call = Callable[[dict[str, Any]], dict[str, Any]]

__all__ = ["slack"]  # the fixture, shared with the Slack tests

ARGS = {"customer": "c-17", "amount": 40}


def request(allowed: list[str]) -> tuple[Any, Policy]:
    """The question and policy of one action request of the middleware's interrupt."""
    value = {
        "action_requests": [{"name": "issue_refund", "args": ARGS, "description": "Refund a customer"}],
        "review_configs": [{"action_name": "issue_refund", "allowed_decisions": allowed}],
    }
    [(_, asked)] = batch_questions("i-1", value)
    return asked["question"], Policy.model_validate(asked[WAIT_KEY])


def raise_request(aws: Aws, allowed: list[str], question_id: str = "q-1") -> Envelope:
    """A middleware request recorded as the runner records it."""
    question, policy = request(allowed)
    return aws.raise_question("t-1", question_id, question=question, policy=policy)


def posted(envelope: Envelope) -> dict[str, Any]:
    bodies: list[dict[str, Any]] = []

    def fake(method: str, body: Any) -> dict[str, Any]:
        bodies.append(dict(body))
        return {"ok": True, "channel": "C1", "ts": "1.0"}

    assert SlackAnnounce("C1", "xoxb-test", call=fake).announce(envelope)
    [message] = bodies
    return message


def buttons(message: dict[str, Any]) -> list[tuple[str, str]]:
    [actions] = [b for b in message["blocks"] if b["type"] == "actions"]
    return [(e["action_id"], e["text"]["text"]) for e in actions["elements"]]


def submit(view: dict[str, Any], values: dict[str, Any], *, user: str = "U3") -> dict[str, Any]:
    return {
        "type": "view_submission",
        "team": {"id": "T1"},
        "user": {"id": user},
        "view": {
            "callback_id": view["callback_id"],
            "private_metadata": view["private_metadata"],
            "state": {"values": values},
        },
    }


def radio(value: str) -> dict[str, Any]:
    return {"value": {"type": "radio_buttons", "selected_option": {"value": value}}}


def typed(text: str) -> dict[str, Any]:
    return {"value": {"type": "plain_text_input", "value": text}}


def open_modal(call: Call, slack: FakeSlackClient, envelope: Envelope) -> dict[str, Any]:
    call(interaction(click(envelope, MODAL_ACTION)))
    method, opened = slack.calls[-1]
    assert method == "views.open"
    return dict(opened["view"])


@pytest.mark.parametrize(
    ("allowed", "expected"),
    [
        (
            ["approve", "edit", "reject", "respond"],
            [
                (APPROVE_ACTION, "Approve"),
                (REJECT_ACTION, "Reject"),
                (MODAL_ACTION, "Edit, respond or explain…"),
            ],
        ),
        (
            ["approve", "reject"],
            [(APPROVE_ACTION, "Approve"), (REJECT_ACTION, "Reject"), (MODAL_ACTION, "Explain…")],
        ),
        (["edit", "respond"], [(MODAL_ACTION, "Edit or respond…")]),
        (["approve"], [(APPROVE_ACTION, "Approve")]),
    ],
)
def test_the_message_offers_only_the_allowed_decisions(
    allowed: list[str], expected: list[tuple[str, str]]
) -> None:
    question, policy = request(allowed)
    message = posted(build_envelope("t-1", Question(question_id="q-1", question=question, policy=policy)))

    assert buttons(message) == expected
    body = message["blocks"][1]["text"]["text"]
    assert "Refund a customer" in body
    assert "*Decisions allowed:* " + ", ".join(f"`{d}`" for d in allowed) in body


def test_the_modal_offers_only_the_allowed_decisions_and_the_inputs_they_need(
    aws: Aws, call: Call, slack: FakeSlackClient
) -> None:
    every = open_modal(call, slack, raise_request(aws, ["approve", "edit", "reject", "respond"]))
    some = open_modal(call, slack, raise_request(aws, ["reject", "respond"], question_id="q-2"))

    def choices(view: dict[str, Any]) -> list[str]:
        return [o["value"] for o in view["blocks"][0]["element"]["options"]]

    assert choices(every) == ["approve", "edit", "reject", "respond"]
    assert [b["block_id"] for b in every["blocks"]] == ["decision", "args", "message", "reason"]
    assert choices(some) == ["reject", "respond"]
    assert [b["block_id"] for b in some["blocks"]] == ["decision", "message", "reason"]


def test_an_approve_click_resumes_with_the_middlewares_approve(
    api: WaitApi, aws: Aws, call: Call, slack: FakeSlackClient
) -> None:
    envelope = raise_request(aws, ["approve", "reject"])

    call(interaction(click(envelope, APPROVE_ACTION)))

    question = api.ledger.get_question("q-1")
    assert (question.status, question.answered_by) == ("answered", "slack:T1:U1")
    assert decision(question.answer, envelope.question) == {"type": "approve"}  # type: ignore[arg-type]
    assert last_text(slack) == "Approved by <@U1>."


def test_a_reject_from_the_modal_carries_the_reason_as_the_message(
    api: WaitApi, aws: Aws, call: Call, slack: FakeSlackClient
) -> None:
    envelope = raise_request(aws, ["approve", "reject"])
    view = open_modal(call, slack, envelope)

    response = call(interaction(submit(view, {"decision": radio("reject"), "reason": typed("ask finance")})))

    assert response["statusCode"] == 200 and response["body"] == ""
    question = api.ledger.get_question("q-1")
    assert decision(question.answer, envelope.question) == {  # type: ignore[arg-type]
        "type": "reject",
        "message": "ask finance",
    }
    assert last_text(slack) == "Rejected by <@U3>."


def test_an_edit_from_the_modal_is_the_middlewares_edit_even_when_approve_is_not_allowed(
    api: WaitApi, aws: Aws, call: Call, slack: FakeSlackClient
) -> None:
    envelope = raise_request(aws, ["edit", "reject"])
    view = open_modal(call, slack, envelope)

    call(
        interaction(
            submit(view, {"decision": radio("edit"), "args": typed('{"customer": "c-17", "amount": 25}')})
        )
    )

    question = api.ledger.get_question("q-1")
    assert question.status == "answered"
    assert decision(question.answer, envelope.question) == {  # type: ignore[arg-type]
        "type": "edit",
        "edited_action": {"name": "issue_refund", "args": {"customer": "c-17", "amount": 25}},
    }
    assert last_text(slack) == "Approved with edited arguments by <@U3>."


def test_an_edit_with_the_arguments_unchanged_still_answers_when_only_edit_is_allowed(
    api: WaitApi, aws: Aws, call: Call, slack: FakeSlackClient
) -> None:
    envelope = raise_request(aws, ["edit"])
    view = open_modal(call, slack, envelope)
    [args_block] = [b for b in view["blocks"] if b["block_id"] == "args"]

    call(
        interaction(
            submit(view, {"decision": radio("edit"), "args": typed(args_block["element"]["initial_value"])})
        )
    )

    question = api.ledger.get_question("q-1")
    assert question.status == "answered"
    assert decision(question.answer, envelope.question)["type"] == "edit"  # type: ignore[arg-type]


def test_a_respond_from_the_modal_sends_the_message_and_needs_one(
    api: WaitApi, aws: Aws, call: Call, slack: FakeSlackClient
) -> None:
    envelope = raise_request(aws, ["approve", "respond"])
    view = open_modal(call, slack, envelope)

    # An empty message keeps the modal open, on the message box
    empty = call(interaction(submit(view, {"decision": radio("respond"), "message": typed("  ")})))
    assert body_of(empty)["response_action"] == "errors" and list(body_of(empty)["errors"]) == ["message"]
    assert api.ledger.get_question("q-1").status == "raised"

    call(interaction(submit(view, {"decision": radio("respond"), "message": typed("use store credit")})))

    question = api.ledger.get_question("q-1")
    assert question.answer == {"action": "respond", "message": "use store credit"}
    assert decision(question.answer, envelope.question) == {  # type: ignore[arg-type]
        "type": "respond",
        "message": "use store credit",
    }
    assert last_text(slack) == "Responded by <@U3>."


def test_a_click_on_a_decision_the_request_does_not_allow_is_refused_to_the_clicker_alone(
    api: WaitApi, aws: Aws, call: Call, slack: FakeSlackClient
) -> None:
    # Given a request that may only be edited or rejected (an approve button it never showed)
    envelope = raise_request(aws, ["edit", "reject"])

    call(interaction(click(envelope, APPROVE_ACTION)))

    url, message = slack.responses[-1]
    assert url == RESPONSE_URL
    assert (message["response_type"], message["replace_original"]) == ("ephemeral", False)
    assert message["text"] == (
        "Not recorded: 'approve' is not allowed for issue_refund(); allowed: ['edit', 'reject']."
    )
    assert api.ledger.get_question("q-1").status == "raised"


def test_a_modal_decision_the_request_does_not_allow_is_shown_on_its_block(
    api: WaitApi, aws: Aws, call: Call, slack: FakeSlackClient
) -> None:
    envelope = raise_request(aws, ["approve", "reject"])
    view = open_modal(call, slack, envelope)

    # A submission naming a decision the modal never offered (respond)
    response = call(interaction(submit(view, {"decision": radio("respond"), "message": typed("hi")})))

    assert body_of(response) == {
        "response_action": "errors",
        "errors": {"decision": "'respond' is not allowed for issue_refund(); allowed: ['approve', 'reject']"},
    }
    assert api.ledger.get_question("q-1").status == "raised"
