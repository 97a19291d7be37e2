"""Hostile bodies, tokens and store failures: each is refused in the error shape, and nothing runs
other than the digits sent.

- JSON numbers are read as decimals: ``10000.00000000000000001`` is not 10000, a number past 38
  significant digits is refused (422 in an answer, 400 in a run's input) naming its field, and an
  accepted one is stored, shown and run with the digits sent;
- an object naming a key twice is 400 naming the key; a lone surrogate anywhere is 400 naming the
  field; any malformed ``next`` is 400;
- a throttled or failed ledger write is 503 with ``Retry-After``, never 404.
"""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError
from langgraph.checkpoint.memory import InMemorySaver
from service_events import body_of, get_event, header, reply_event, start_event

from agent_wait import Policy
from wait_service.ledger import Ledger
from wait_service.runs.inbox import ResumeMessage, parse_message
from wait_service.runs.runner import RunnerService, build_runner

if TYPE_CHECKING:
    from collections.abc import Callable

    from service_events import Aws, FakeClock

    Call = Callable[[dict[str, Any]], dict[str, Any]]

LONG = "10000.00000000000000001"


def refused(response: dict[str, Any], status: int, error: str, field: str | None) -> dict[str, Any]:
    assert response["statusCode"] == status, response["body"]
    body = body_of(response)
    assert (body["error"], body.get("field")) == (error, field), body
    return dict(body)


def reply_text(question_id: str, text: str, digest: str) -> dict[str, Any]:
    return reply_event(question_id, body=text, if_match=f'"{digest}"')


@pytest.fixture
def ledger(aws: Aws, clock: FakeClock) -> Ledger:
    return Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)


# -- numbers are exact ------------------------------------------------------------------------


def test_an_edit_past_the_schema_maximum_by_a_digit_float_would_lose_is_422(
    aws: Aws, call: Call, ledger: Ledger
) -> None:
    # The proposal's schema says amount <= 10000; as a float, 10000.00000000000000001 is 10000.
    envelope = aws.raise_question(
        question={
            "function": "issue_refund",
            "args": {"customer": "c-17", "amount": 40},
            "args_schema": {"type": "object", "properties": {"amount": {"type": "number", "maximum": 10000}}},
        }
    )
    text = '{"answer": {"action": "approve", "args": {"amount": %s}}}' % LONG  # noqa: UP031

    refused(call(reply_text("q-1", text, envelope.digest)), 422, "invalid_answer", "answer.args.amount")
    assert ledger.get_question("q-1").is_open


def test_an_accepted_number_is_stored_and_shown_with_the_digits_sent(
    aws: Aws, call: Call, ledger: Ledger
) -> None:
    envelope = aws.raise_question()
    text = '{"answer": {"action": "approve", "args": {"amount": %s}}}' % LONG  # noqa: UP031

    assert call(reply_text("q-1", text, envelope.digest))["statusCode"] == 202

    assert ledger.get_question("q-1").answer == {"action": "approve", "args": {"amount": Decimal(LONG)}}
    shown = call(get_event("/questions/q-1", "/questions/{question_id}", {"question_id": "q-1"}))
    assert f'"amount":{LONG}' in shown["body"]
    audit = json.loads(shown["body"], parse_float=Decimal)["audit"]
    assert audit["authorized"]["args"]["amount"] == Decimal(LONG)
    assert audit["diff"] == [{"op": "replace", "path": "/amount", "value": Decimal(LONG)}]
    # The same answer again is the same answer (200), not a conflict.
    assert call(reply_text("q-1", text, envelope.digest))["statusCode"] == 200


def test_past_38_significant_digits_an_answer_is_422_and_an_input_400(
    aws: Aws, call: Call, ledger: Ledger
) -> None:
    envelope = aws.raise_question()
    forty = "1." + "1" * 39
    text = '{"answer": {"action": "approve", "args": {"amount": %s}}}' % forty  # noqa: UP031

    body = refused(
        call(reply_text("q-1", text, envelope.digest)), 422, "invalid_answer", "answer.args.amount"
    )
    assert "40 significant digits" in body["message"]
    assert ledger.get_question("q-1").is_open
    start = start_event("t-9", body='{"input": {"customer": "c-1", "amount": %s}}' % forty)  # noqa: UP031
    refused(call(start), 400, "invalid_request", "input.amount")
    assert aws.inbox_messages() == []


def test_a_run_input_reaches_the_inbox_and_the_runner_with_the_digits_sent(aws: Aws, call: Call) -> None:
    start = start_event("t-9", body='{"input": {"customer": "c-1", "amount": %s}}' % LONG)  # noqa: UP031

    assert call(start)["statusCode"] == 202
    aws.dispatch()  # the ledger's stream hands the recorded start to the dispatcher

    [message] = aws.sqs.receive_message(QueueUrl=aws.resources.inbox_url)["Messages"]
    assert f'"amount":{LONG}' in message["Body"]
    parsed = parse_message(message["Body"])
    assert parsed.input == {"customer": "c-1", "amount": Decimal(LONG)}  # type: ignore[union-attr]


def test_the_graph_resumes_with_the_decimal_the_person_sent(
    aws: Aws, call: Call, ledger: Ledger, clock: FakeClock
) -> None:
    runner: RunnerService = build_runner(
        aws.settings,
        dynamodb=aws.dynamodb,
        sns=aws.sns,
        sqs=aws.sqs,
        checkpointer=InMemorySaver(),
        clock=clock,
    )
    from wait_service.runs.inbox import StartMessage

    outcome = runner.run(StartMessage(thread_id="t-1", input={"customer": "c-17", "amount": 40}))
    [question_id] = outcome.pending
    digest = ledger.get_question(question_id).digest
    text = '{"answer": {"action": "approve", "args": {"amount": 25.00000000000000000001}}}'
    assert call(reply_text(question_id, text, digest))["statusCode"] == 202

    runner.run(ResumeMessage(thread_id="t-1", question_id=question_id))

    # The tool ran with the digits sent (a Decimal), and the receipt records exactly those (as
    # digits in a string: no float holds them).
    question = ledger.get_question(question_id)
    assert question.status == "resumed"
    assert question.receipt is not None and question.receipt["ran"] is True
    assert question.receipt["args"]["amount"] == "25.00000000000000000001"
    output: Any = ledger.get_thread("t-1").output
    assert output["refund"]["refund_id"] == "rf-c-17-25.00000000000000000001"


# -- duplicate keys, lone surrogates ----------------------------------------------------------


def test_a_key_named_twice_is_400_naming_it_and_nothing_is_approved(
    aws: Aws, call: Call, ledger: Ledger
) -> None:
    envelope = aws.raise_question()
    text = '{"answer": {"action": "reject", "action": "approve"}}'

    body = refused(call(reply_text("q-1", text, envelope.digest)), 400, "invalid_request", "action")
    assert "'action'" in body["message"]
    assert ledger.get_question("q-1").is_open
    assert aws.inbox_messages() == []


def test_a_key_named_twice_in_a_run_input_is_400(aws: Aws, call: Call) -> None:
    start = start_event("t-9", body='{"input": {"amount": 5, "amount": -5}}')

    refused(call(start), 400, "invalid_request", "amount")
    assert aws.inbox_messages() == []


@pytest.mark.parametrize(
    ("policy", "answer", "field"),
    [
        (Policy(kind="text"), "\ud800", "answer"),
        (Policy(kind="text"), {"text": "fine \udfff"}, "answer.text"),
        (
            Policy(kind="approval"),
            {"action": "approve", "args": {"customer": "c\ud800"}},
            "answer.args.customer",
        ),
        (Policy(kind="approval"), {"action": "reject", "reason": "\ud83d"}, "answer.reason"),
        (Policy(kind="approval"), {"action": "approve", "args": {"\ud800": 1}}, "answer.args.\ud800"),
    ],
)
def test_a_lone_surrogate_in_an_answer_is_400_naming_the_field(
    aws: Aws, call: Call, ledger: Ledger, policy: Policy, answer: Any, field: str
) -> None:
    envelope = aws.raise_question(policy=policy)
    text = json.dumps({"answer": answer})  # ensure_ascii: the surrogate travels as \ud800

    refused(call(reply_text("q-1", text, envelope.digest)), 400, "invalid_request", field)
    assert ledger.get_question("q-1").is_open


@pytest.mark.parametrize(
    ("input", "field"),
    [({"customer": "\ud800"}, "input.customer"), (["ok", ["\udc00"]], "input.1.0"), ("\ud800", "input")],
)
def test_a_lone_surrogate_in_a_run_input_is_400_naming_the_field(
    aws: Aws, call: Call, ledger: Ledger, input: Any, field: str
) -> None:
    refused(call(start_event("t-9", input)), 400, "invalid_request", field)
    assert aws.inbox_messages() == [] and ledger.find_thread("t-9") is None


def test_a_revoke_reason_with_a_lone_surrogate_is_400(aws: Aws, call: Call) -> None:
    aws.raise_question()
    event = reply_event("q-1", body=json.dumps({"reason": "\ud800"}))
    event["path"] = "/questions/q-1/revoke"

    refused(call(event), 400, "invalid_request", "reason")


def test_an_escaped_backslash_before_ud800_is_plain_text(aws: Aws, call: Call, ledger: Ledger) -> None:
    envelope = aws.raise_question(policy=Policy(kind="text"))

    assert call(reply_text("q-1", '{"answer": "C:\\\\ud800"}', envelope.digest))["statusCode"] == 202
    assert ledger.get_question("q-1").answer == "C:\\ud800"


# -- page tokens ------------------------------------------------------------------------------


KEY = {"dedupe_key": {"S": "wait.created:q-1"}, "status": {"S": "raised"}, "created_at": {"S": "2026"}}


def _token(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


@pytest.mark.parametrize("status", [None, "raised", "pending"])
@pytest.mark.parametrize(
    "token",
    [
        # Deep enough for Python's parser to give up, short enough for the 4096-character limit.
        _token("[" * 1500 + "]" * 1500),
        _token('{"a":' * 500 + "1" + "}" * 500),
        _token('{"dedupe_key": {"S": "x"}, "dedupe_key": {"S": "y"}}'),
        _token('{"pending": ' + "[" * 1400 + "]" * 1400 + "}"),
        _token(json.dumps({"pending": {"raised": None, "delivered": None, "escalated": None, "x": 1}})),
        _token(json.dumps(KEY | {"dedupe_key": {"S": "\ud800"}})),
        _token(json.dumps({"pending": {"raised": KEY | {"dedupe_key": {"S": "\udc00"}}}})),
    ],
)
def test_any_malformed_page_token_is_400_naming_next(call: Call, status: str | None, token: str) -> None:
    assert len(token) <= 4096
    query = {"next": token} | ({"status": status} if status else {})

    refused(call(get_event("/questions", "/questions", query=query)), 400, "invalid_request", "next")


# -- a throttled or failed ledger write -------------------------------------------------------


def aws_error(code: str, operation: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": 400}}, operation
    )


@pytest.mark.parametrize(
    "code", ["ProvisionedThroughputExceededException", "ThrottlingException", "InternalServerError"]
)
def test_a_throttled_answer_write_is_503_with_retry_after_and_the_retry_is_recorded(
    aws: Aws, call: Call, ledger: Ledger, code: str
) -> None:
    envelope = aws.raise_question()
    failures = [code]

    def fail_once(params: dict[str, Any], **_: Any) -> None:
        if failures and ":to" in params.get("ExpressionAttributeValues", {}):
            raise aws_error(failures.pop(), "UpdateItem")

    aws.dynamodb.meta.events.register("provide-client-params.dynamodb.UpdateItem", fail_once)
    try:
        event = reply_event("q-1", {"action": "approve"}, if_match=f'"{envelope.digest}"')

        response = call(event)

        body = refused(response, 503, "service_unavailable", None)
        assert header(response, "Retry-After") == "1"
        assert code in body["message"]
        assert ledger.get_question("q-1").is_open
        assert call(event)["statusCode"] == 202
    finally:
        aws.dynamodb.meta.events.unregister("provide-client-params.dynamodb.UpdateItem", fail_once)


def test_an_answer_write_refused_for_another_reason_is_not_a_missing_question(aws: Aws, call: Call) -> None:
    envelope = aws.raise_question()

    def fail(params: dict[str, Any], **_: Any) -> None:
        if ":to" in params.get("ExpressionAttributeValues", {}):
            raise aws_error("ValidationException", "UpdateItem")

    aws.dynamodb.meta.events.register("provide-client-params.dynamodb.UpdateItem", fail)
    try:
        response = call(reply_event("q-1", {"action": "approve"}, if_match=f'"{envelope.digest}"'))
    finally:
        aws.dynamodb.meta.events.unregister("provide-client-params.dynamodb.UpdateItem", fail)

    assert response["statusCode"] == 500
    assert body_of(response)["error"] == "internal_error"


def test_a_throttled_read_is_503_too(aws: Aws, call: Call) -> None:
    aws.raise_question()

    def fail(**_: Any) -> None:
        raise aws_error("ProvisionedThroughputExceededException", "GetItem")

    aws.dynamodb.meta.events.register("provide-client-params.dynamodb.GetItem", fail)
    try:
        response = call(get_event("/questions/q-1", "/questions/{question_id}", {"question_id": "q-1"}))
    finally:
        aws.dynamodb.meta.events.unregister("provide-client-params.dynamodb.GetItem", fail)

    assert response["statusCode"] == 503
    assert header(response, "Retry-After") == "1"


def test_a_missing_question_is_still_404(call: Call) -> None:
    response = call(reply_event("nope", {"action": "approve"}))

    refused(response, 404, "question_not_found", None)


def test_an_idempotent_start_keeps_the_digits_and_tells_them_apart(aws: Aws, call: Call) -> None:
    def start(amount: str) -> dict[str, Any]:
        event = start_event("t-9", body='{"input": {"customer": "c-1", "amount": %s}}' % amount)  # noqa: UP031
        event["headers"]["Idempotency-Key"] = "k-1"
        event["multiValueHeaders"]["Idempotency-Key"] = ["k-1"]
        return call(event)

    assert start(LONG)["statusCode"] == 202
    assert start(LONG)["statusCode"] == 202
    # 10000 is another body than 10000.00000000000000001, though a float cannot tell them apart.
    refused(start("10000"), 422, "idempotency_conflict", None)
    aws.dispatch()  # the ledger's stream hands the recorded start to the dispatcher
    [message] = aws.sqs.receive_message(QueueUrl=aws.resources.inbox_url)["Messages"]
    assert f'"amount":{LONG}' in message["Body"]
