"""``Idempotency-Key`` on ``POST /threads/{thread_id}/runs``: a repeat returns the first response."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from service_events import body_of, start_event

from wait_service.ledger import Ledger

if TYPE_CHECKING:
    from collections.abc import Callable

    from service_events import Aws, FakeClock

    Call = Callable[[dict[str, Any]], dict[str, Any]]

REFUND = {"customer": "c-17", "amount": 40}


def keyed(thread_id: str, input: Any, key: str) -> dict[str, Any]:
    event = start_event(thread_id, input)
    event["headers"]["Idempotency-Key"] = key
    event["multiValueHeaders"]["Idempotency-Key"] = [key]
    return event


def test_a_repeated_key_and_body_returns_the_first_response_and_starts_nothing(aws: Aws, call: Call) -> None:
    first = call(keyed("t-1", REFUND, "retry-1"))
    again = call(keyed("t-1", REFUND, "retry-1"))

    assert (first["statusCode"], again["statusCode"]) == (202, 202)
    assert body_of(first) == body_of(again) == {"thread_id": "t-1", "status": "queued"}
    assert len(aws.inbox_messages()) == 1


def test_the_same_key_with_a_different_body_is_422_idempotency_conflict(aws: Aws, call: Call) -> None:
    call(keyed("t-1", REFUND, "retry-1"))

    response = call(keyed("t-1", {"customer": "c-17", "amount": 41}, "retry-1"))

    assert response["statusCode"] == 422
    body = body_of(response)
    assert (body["error"], body["thread_id"]) == ("idempotency_conflict", "t-1")
    assert "Idempotency-Key" in body["message"]
    assert len(aws.inbox_messages()) == 1


def test_keys_are_per_thread_and_other_keys_start_new_runs(aws: Aws, call: Call) -> None:
    for thread_id, key in [("t-1", "k-1"), ("t-2", "k-1"), ("t-1", "k-2")]:
        assert call(keyed(thread_id, REFUND, key))["statusCode"] == 202

    assert len(aws.inbox_messages()) == 3


def test_a_refused_start_records_nothing_so_a_retry_with_the_key_starts(
    aws: Aws, call: Call, clock: FakeClock
) -> None:
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)
    ledger.queue_thread("t-1")
    ledger.thread_interrupted("t-1", ["q-1"])

    assert call(keyed("t-1", REFUND, "retry-1"))["statusCode"] == 409
    ledger.thread_done("t-1", "{}")

    assert call(keyed("t-1", REFUND, "retry-1"))["statusCode"] == 202
    assert len(aws.inbox_messages()) == 1


def test_records_stay_out_of_the_question_listings(aws: Aws, call: Call) -> None:
    call(keyed("t-1", REFUND, "retry-1"))

    for query in ({}, {"status": "pending"}, {"thread_id": "t-1"}):
        listed = call(
            start_event("x", {})
            | {
                "httpMethod": "GET",
                "path": "/questions",
                "body": None,
                "queryStringParameters": query or None,
            }
        )
        assert body_of(listed)["items"] == []


@pytest.mark.parametrize("key", ["", "has space", "x" * 256, "caf\u00e9"])
def test_a_malformed_key_is_400_naming_the_header(aws: Aws, call: Call, key: str) -> None:
    response = call(keyed("t-1", REFUND, key))

    assert response["statusCode"] == 400
    assert body_of(response)["field"].lower() == "idempotency-key"
    assert aws.inbox_messages() == []
