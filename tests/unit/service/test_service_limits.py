"""The answer size limits the api refuses with 413 (``wait_service.answer_limits``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agent_wait.aws.dynamodb import to_attribute
from agent_wait.errors import PayloadTooLargeError
from wait_service.answer_limits import (
    DYNAMODB_ITEM_BYTES,
    MAX_ANSWER_BYTES,
    MAX_ANSWER_BYTES_WITHOUT_OFFLOAD,
    MAX_BODY_BYTES,
    SQS_MESSAGE_BYTES,
    answer_bytes,
    attribute_bytes,
    check_answer_size,
    check_reply_fits,
    item_bytes,
)
from wait_service.ledger import QuestionRecord

KIB = 1024


def question(text: Any = "Where to ship?") -> QuestionRecord:
    return QuestionRecord(
        question_id="q-1",
        thread_id="t-1",
        status="delivered",
        digest="d" * 64,
        question=text,
        policy={"kind": "text"},
        source=None,
        created_at="2026-01-01T00:00:00Z",
        expires_at=None,
        updated_at="2026-01-01T00:00:00Z",
        lifecycle=[{"stage": "raised", "at": "2026-01-01T00:00:00Z", "actor": "agent"}],
    )


def test_a_250_kib_answer_is_within_every_limit_with_offload() -> None:
    answer = "x" * (250 * KIB)
    check_answer_size(answer)
    check_reply_fits(question(), answer, reason="r" * 4096)
    assert MAX_ANSWER_BYTES == MAX_BODY_BYTES < SQS_MESSAGE_BYTES


def test_without_offload_the_limit_leaves_room_for_the_answer_twice_in_a_checkpoint_item() -> None:
    assert 2 * MAX_ANSWER_BYTES_WITHOUT_OFFLOAD <= DYNAMODB_ITEM_BYTES // 2
    with pytest.raises(PayloadTooLargeError, match="at most 102400"):
        check_answer_size("x" * MAX_ANSWER_BYTES_WITHOUT_OFFLOAD, MAX_ANSWER_BYTES_WITHOUT_OFFLOAD)


def test_an_answer_that_would_overflow_its_question_item_is_refused() -> None:
    with pytest.raises(PayloadTooLargeError) as refused:
        check_reply_fits(question("q" * (160 * KIB)), "x" * (250 * KIB))
    assert refused.value.question_id == "q-1"


def test_an_item_holding_the_envelope_json_counts_the_question_twice() -> None:
    # The item holds the question once (no envelope JSON): a 100 KiB question takes a 250 KiB answer
    check_reply_fits(question("q" * (100 * KIB)), "x" * (250 * KIB))
    # An item written before, with the envelope JSON, holds it twice: the same answer overflows it
    older = dataclasses.replace(question("q" * (100 * KIB)), envelope='{"question": "..."}')
    with pytest.raises(PayloadTooLargeError):
        check_reply_fits(older, "x" * (250 * KIB))


@pytest.mark.parametrize(
    "value",
    ["abc", "é", 12345, 1.5, -0.25, True, None, [1, "a", {"b": [True]}], {"nested": {"list": [1, 2.5, "x"]}}],
)
def test_attribute_sizes_follow_dynamodb_rules(value: Any) -> None:
    # The computed size is never below the string form DynamoDB stores, nor wildly above it.
    size = attribute_bytes(to_attribute(value))
    assert 1 <= size <= answer_bytes(value) + 32


def test_item_size_counts_names_and_values() -> None:
    assert item_bytes({"a": "xyz"}) == 4
    assert item_bytes({"m": {"k": "v"}}) == 1 + 3 + 1 + 1 + 1
    assert attribute_bytes({"N": "123456"}) == 4
    with pytest.raises(ValueError, match="not a DynamoDB attribute"):
        attribute_bytes({"X": 1})
