"""Hostile and careless requests: every one gets a 4xx in the error shape, and nothing is written."""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

import pytest
from service_events import api_event, body_of, get_event, header, reply_event, start_event

from wait_service.ledger import Ledger, encode_token
from wait_service.limits import MAX_DEPTH, number_problem

if TYPE_CHECKING:
    from collections.abc import Callable

    from service_events import Aws, FakeClock

    Call = Callable[[dict[str, Any]], dict[str, Any]]


def assert_refused(
    response: dict[str, Any], status: int, error: str, field: str | None = None
) -> dict[str, Any]:
    assert response["statusCode"] == status, response["body"]
    body = body_of(response)
    assert body["error"] == error
    assert isinstance(body["message"], str) and body["message"]
    if field is not None:
        assert body["field"] == field
    return body


def list_event(**query: str) -> dict[str, Any]:
    return get_event("/questions", "/questions", query=query)


def nothing_written(aws: Aws, clock: FakeClock, thread_id: str) -> bool:
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)
    return aws.inbox_messages() == [] and ledger.find_thread(thread_id) is None


# -- content types and bodies ----------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "multipart/form-data",
        "application/x-www-form-urlencoded",
        "application/json; charset=utf-16",
        "application/jsonx",
        None,
    ],
)
def test_a_body_that_is_not_json_content_is_415(
    aws: Aws, call: Call, clock: FakeClock, content_type: str | None
) -> None:
    event = start_event("t-1", {"customer": "c-1"})
    event["headers"]["Content-Type"] = content_type
    if content_type is None:
        del event["headers"]["Content-Type"]

    body = assert_refused(call(event), 415, "unsupported_media_type", "Content-Type")

    assert "application/json" in body["message"]
    assert nothing_written(aws, clock, "t-1")


def test_json_with_a_charset_of_utf8_is_accepted(call: Call) -> None:
    event = start_event("t-1", {"customer": "c-1"})
    event["headers"]["Content-Type"] = "Application/JSON; charset=UTF-8"

    assert call(event)["statusCode"] == 202


def test_curl_form_post_to_reply_is_415_not_a_missing_answer(aws: Aws, call: Call) -> None:
    aws.raise_question()
    event = reply_event(
        "q-1", body="answer=yes", headers={"Content-Type": "application/x-www-form-urlencoded"}
    )

    assert_refused(call(event), 415, "unsupported_media_type", "Content-Type")


def test_a_body_that_is_not_utf8_is_400(aws: Aws, call: Call, clock: FakeClock) -> None:
    event = start_event("t-1", body=base64.b64encode(b'{"input": "\xff\xfe"}').decode())
    event["isBase64Encoded"] = True

    assert_refused(call(event), 400, "invalid_request", "body")
    assert nothing_written(aws, clock, "t-1")


@pytest.mark.parametrize("encoded", [False, True])
def test_a_body_is_parsed_once_per_request(
    aws: Aws, call: Call, monkeypatch: pytest.MonkeyPatch, encoded: bool
) -> None:
    # The gate reads the body to refuse bad JSON; the resolver reuses what it read.
    import wait_service.limits

    envelope = aws.raise_question()
    event = reply_event(
        "q-1", body=json.dumps({"answer": {"action": "approve"}}), if_match=f'"{envelope.digest}"'
    )
    if encoded:
        event["body"] = base64.b64encode(event["body"].encode()).decode()
        event["isBase64Encoded"] = True
    parsed: list[str] = []
    loads = json.loads

    def counting(text: str | bytes, *args: Any, **kwargs: Any) -> Any:
        parsed.append(str(text))
        return loads(text, *args, **kwargs)

    monkeypatch.setattr(wait_service.limits.json, "loads", counting)

    response = call(event)

    assert response["statusCode"] == 202, response["body"]
    # json.loads is everybody's (moto's and botocore's too): count the parses of this body.
    assert parsed.count('{"answer": {"action": "approve"}}') == 1


@pytest.mark.parametrize("body", ["{", "[" * 1000 + "]" * 1000, "nope"])
def test_bodies_that_are_not_json_or_nest_past_recursion_are_400(call: Call, body: str) -> None:
    assert_refused(call(start_event("t-1", body=body)), 400, "invalid_request", "body")


def test_nesting_is_limited_to_what_dynamodb_stores(call: Call) -> None:
    def nested(levels: int) -> Any:
        value: Any = 1
        for _ in range(levels):
            value = [value]
        return value

    assert call(start_event("t-1", nested(MAX_DEPTH)))["statusCode"] == 202
    assert_refused(call(start_event("t-2", nested(MAX_DEPTH + 1))), 400, "invalid_request", "body")


# -- methods -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("GET", "/threads/t-1/runs", "POST"),
        ("DELETE", "/threads/t-1", "GET"),
        ("PUT", "/questions", "GET"),
        ("PATCH", "/questions/q-1", "GET"),
        ("GET", "/questions/q-1/reply", "POST"),
        ("HEAD", "/questions", "GET"),
    ],
)
def test_unsupported_method_is_405_with_allow(call: Call, method: str, path: str, allow: str) -> None:
    response = call(api_event("get_question.json", path=path, resource=path, method=method))

    body = assert_refused(response, 405, "method_not_allowed")
    assert header(response, "Allow") == allow
    assert body["allow"] == allow.split(", ")


# -- thread ids -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "thread_id",
    ["a b", "caf\u00e9", "t" * 81, "a/b", "x%20y", "t\u200b", "\ufffd", "emoji-\U0001f600", "quote'"],
)
def test_thread_ids_aws_cannot_use_are_400_before_anything_is_written(
    aws: Aws, call: Call, clock: FakeClock, thread_id: str
) -> None:
    assert_refused(call(start_event(thread_id, {"customer": "c-1"})), 400, "invalid_request", "thread_id")
    assert_refused(
        call(get_event(f"/threads/{thread_id}", "/threads/{thread_id}")), 400, "invalid_request", "thread_id"
    )
    assert_refused(call(list_event(thread_id=thread_id)), 400, "invalid_request", "thread_id")
    assert nothing_written(aws, clock, thread_id)


@pytest.mark.parametrize("thread_id", ["t" * 80, "order-17:refund.v2_a", "0"])
def test_thread_ids_in_the_alphabet_up_to_80_characters_are_accepted(
    aws: Aws, call: Call, thread_id: str
) -> None:
    assert call(start_event(thread_id, {"customer": "c-1"}))["statusCode"] == 202
    [message] = aws.inbox_messages()
    # The deduplication id stays within SQS's 128 characters.
    assert len(message["_attributes"]["MessageDeduplicationId"]) <= 128


# -- query parameters --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"thread_id": ""}, "thread_id"),
        ({"next": ""}, "next"),
        ({"status": ""}, "status"),
        ({"limit": ""}, "limit"),
    ],
)
def test_empty_query_parameters_are_400_naming_them(call: Call, query: dict[str, str], field: str) -> None:
    assert_refused(call(list_event(**query)), 400, "invalid_request", field)


def _token(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


KEY = {"dedupe_key": {"S": "wait.created:q-1"}, "status": {"S": "raised"}, "created_at": {"S": "2026"}}


@pytest.mark.parametrize(
    ("query", "token"),
    [
        ({}, "!!!"),
        ({}, _token([1, 2])),
        ({}, _token({"dedupe_key": {"N": "1"}})),
        ({}, _token({"dedupe_key": {"S": "x"}})),
        ({}, _token(KEY | {"extra": {"S": "x"}})),
        ({"status": "raised"}, _token(KEY | {"status": {"S": "answered"}})),
        ({"thread_id": "t-1"}, _token(KEY)),
        (
            {"thread_id": "t-1"},
            _token({"dedupe_key": {"S": "k"}, "thread_id": {"S": "t-2"}, "created_at": {"S": "2026"}}),
        ),
        ({"status": "pending"}, _token({"pending": {"raised": 1, "delivered": None, "escalated": None}})),
        ({"status": "pending"}, _token({"pending": {"raised": KEY, "delivered": KEY, "escalated": "end"}})),
        ({"status": "pending"}, _token({"pending": {"raised": None}})),
        ({"status": "pending"}, _token({"pending": "end"})),
    ],
)
def test_forged_page_tokens_are_400_naming_next(call: Call, query: dict[str, str], token: str) -> None:
    assert_refused(call(list_event(**query, next=token)), 400, "invalid_request", "next")


def test_a_real_page_token_still_pages(aws: Aws, call: Call) -> None:
    for n in range(3):
        aws.raise_question(thread_id="t-1", question_id=f"q-{n}")

    first = body_of(call(list_event(status="raised", limit="2")))
    second = call(list_event(status="raised", limit="2", next=first["next"]))

    assert second["statusCode"] == 200
    assert len(first["items"]) + len(body_of(second)["items"]) == 3
    assert encode_token({"a": {"S": "b"}})  # the ledger's own encoder is the one the api reads


# -- numbers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"input": {"amount": NaN}}', "input.amount"),
        ('{"input": {"amount": 1e309}}', "input.amount"),
        ('{"input": {"amount": -Infinity}}', "input.amount"),
        ('{"input": {"items": [1, {"amount": 1e300}]}}', "input.items.1.amount"),
        ('{"input": {"amount": 5e-324}}', "input.amount"),
        ('{"input": {"amount": 10000000000000000000000000000000000000001}}', "input.amount"),
        ('{"input": 1e309}', "input"),
        ('{"input": {"amount": 100000000000000000000000000000000000000}}', "input.amount"),
        ('{"input": {"amount": -1e39}}', "input.amount"),
        ('{"input": {"amount": -1e-131}}', "input.amount"),
    ],
)
def test_numbers_dynamodb_cannot_store_are_400_in_run_input(
    aws: Aws, call: Call, clock: FakeClock, raw: str, field: str
) -> None:
    assert_refused(call(start_event("t-1", body=raw)), 400, "invalid_request", field)
    assert nothing_written(aws, clock, "t-1")


def test_numbers_dynamodb_stores_are_accepted(call: Call) -> None:
    largest = "9" * 38
    raw = '{"input": {"a": 9.9e37, "b": -1e-130, "c": 0.1, "d": LARGEST, "e": 0}}'.replace("LARGEST", largest)

    assert call(start_event("t-1", body=raw))["statusCode"] == 202


@pytest.mark.parametrize("number", ["NaN", "1e309", "1e300", "-5e-324"])
def test_numbers_dynamodb_cannot_store_are_422_in_answers(
    aws: Aws, call: Call, clock: FakeClock, number: str
) -> None:
    aws.raise_question()
    raw = '{"answer": {"action": "approve", "args": {"amount": NUMBER}}}'.replace("NUMBER", number)

    body = assert_refused(call(reply_event("q-1", body=raw)), 422, "invalid_answer", "answer.args.amount")

    assert body["question_id"] == "q-1"
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)
    assert ledger.get_question("q-1").status == "raised"
    assert aws.inbox_messages() == []


def test_number_problem_names_the_first_offender_in_document_order() -> None:
    assert number_problem({"a": [0, 1], "b": float("nan"), "c": float("inf")}, "input") == (
        "input.b",
        "nan is not a finite number",
    )
    assert number_problem(True, "input") is None


# -- the document is the contract ----------------------------------------------------------------


def spec_of(call: Call) -> dict[str, Any]:
    return body_of(call(get_event("/openapi.json", "/openapi.json")))


# 503: every route reads or writes the ledger, which can be throttled.
EXPECTED_STATUSES = {
    ("post", "/threads/{thread_id}/runs"): {"202", "400", "409", "413", "415", "422", "503"},
    ("get", "/threads/{thread_id}"): {"200", "400", "404", "503"},
    ("get", "/questions"): {"200", "400", "503"},
    ("get", "/questions/{question_id}"): {"200", "404", "503"},
    ("post", "/questions/{question_id}/reply"): {
        "200",
        "202",
        "400",
        "403",
        "404",
        "409",
        "410",
        "412",
        "413",
        "415",
        "422",
        "428",
        "503",
    },
}


def test_every_route_documents_exactly_the_statuses_it_answers(call: Call) -> None:
    spec = spec_of(call)

    documented = {
        (method, path): set(op["responses"])
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
    }
    assert {k: v for k, v in documented.items() if k in EXPECTED_STATUSES} == EXPECTED_STATUSES


def test_errors_are_one_error_body_with_every_optional_field(call: Call) -> None:
    spec = spec_of(call)
    schemas = spec["components"]["schemas"]

    assert "HTTPValidationError" not in schemas and "ValidationError" not in schemas
    error_body = schemas["ErrorBody"]
    assert set(error_body["required"]) == {"error", "message"}
    assert {"field", "pending", "standing_answer", "status", "question_id", "thread_id"} <= set(
        error_body["properties"]
    )
    for ops in spec["paths"].values():
        for op in ops.values():
            for status, response in op["responses"].items():
                if status.startswith(("4", "5")):
                    assert response["content"]["application/json"]["schema"] == {
                        "$ref": "#/components/schemas/ErrorBody"
                    }
    assert "#/components/schemas/ValidationError" not in json.dumps(spec)


def test_if_match_etag_security_and_thread_id_pattern_are_documented(call: Call) -> None:
    spec = spec_of(call)
    paths = spec["paths"]

    reply = paths["/questions/{question_id}/reply"]["post"]
    assert any(p["in"] == "header" and p["name"].lower() == "if-match" for p in reply["parameters"])
    assert "ETag" in paths["/questions/{question_id}"]["get"]["responses"]["200"]["headers"]
    assert set(spec["components"]["securitySchemes"]) == {"sigv4", "jwt"}
    for ops in paths.values():
        for op in ops.values():
            assert op["security"] == [{"sigv4": []}, {"jwt": []}]
    [thread_param] = paths["/threads/{thread_id}"]["get"]["parameters"]
    assert thread_param["schema"]["pattern"] == "^[A-Za-z0-9._:-]{1,80}$"


def test_an_empty_body_declared_as_another_type_is_415(call: Call) -> None:
    event = start_event("t-1", body="")
    event["headers"]["Content-Type"] = "text/plain"

    assert_refused(call(event), 415, "unsupported_media_type", "Content-Type")


def test_an_empty_body_without_a_type_is_400_naming_the_body(call: Call) -> None:
    event = start_event("t-1", body="")
    del event["headers"]["Content-Type"]

    assert_refused(call(event), 400, "invalid_request", "body")
