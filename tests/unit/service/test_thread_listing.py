"""A thread's questions: keys from the keys-only ``by-thread`` index, items from the table by key.

The index holds a question's keys alone, so a question's moves never write it; a page reads its
keys, newest first, then its items in one ``BatchGetItem``. What that read can meet is tested here
in moto in process: keys DynamoDB leaves unprocessed (throttling), a question removed between the
two reads, a status filter, and paging across pages.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from agent_wait.aws.dynamodb import ledger_put
from agent_wait.envelope import Question, build_envelope
from wait_service.http.errors_http import unavailable
from wait_service.ledger import Ledger
from wait_service.ledger.paging import UNPROCESSED_ATTEMPTS, UNPROCESSED_BACKOFF_SECONDS
from wait_service.resources import LEDGER, create_table

if TYPE_CHECKING:
    from collections.abc import Iterator

START = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    """Six questions of thread t-1, a minute apart (q-0 the oldest), and one of thread t-2."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, LEDGER, "ledger")
        for n, thread in [*((n, "t-1") for n in range(6)), (6, "t-2")]:
            envelope = build_envelope(thread, Question(question_id=f"q-{n}", question={"refund": n}))
            request = ledger_put("ledger", envelope)
            request["Item"]["created_at"] = {"S": (START + timedelta(minutes=n)).isoformat()}
            client.put_item(**request)
        ledger = Ledger("ledger", client)
        ledger._sleep = lambda seconds: None
        yield ledger


def listed(ledger: Ledger, **query: Any) -> list[list[str]]:
    """Every page of a thread listing, by question id."""
    pages, token = [], None
    while True:
        page = ledger.list_questions(next_token=token, **query)
        pages.append([q.question_id for q in page.items])
        token = page.next
        if token is None:
            return pages


def test_a_thread_is_listed_newest_first_across_pages(ledger: Ledger) -> None:
    assert listed(ledger, thread_id="t-1", limit=4) == [["q-5", "q-4", "q-3", "q-2"], ["q-1", "q-0"]]
    assert listed(ledger, thread_id="t-2") == [["q-6"]]
    assert listed(ledger, thread_id="t-none") == [[]]


def test_a_status_filter_keeps_the_pages_keys_in_that_status(ledger: Ledger) -> None:
    # Given q-1 and q-4 answered
    for question_id in ("q-1", "q-4"):
        ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")

    # Then a page of three keys holds those of them in the status asked for, as a filtered Query
    # would, and paging goes on to the end
    assert listed(ledger, thread_id="t-1", status="answered", limit=3) == [["q-4"], ["q-1"]]
    assert listed(ledger, thread_id="t-1", status="pending", limit=3) == [["q-5", "q-3"], ["q-2", "q-0"]]


def test_a_listed_question_carries_what_its_page_shows_and_not_its_envelope(ledger: Ledger) -> None:
    [newest, *_] = ledger.list_questions(thread_id="t-1").items
    assert (newest.question_id, newest.thread_id, newest.question) == ("q-5", "t-1", {"refund": 5})
    assert newest.created_at == (START + timedelta(minutes=5)).isoformat()
    assert newest.envelope is None


def unprocessing(ledger: Ledger, left: list[int]) -> list[int]:
    """Make the i-th ``BatchGetItem`` leave its last ``left[i]`` keys unprocessed.

    Returns the number of keys each read asked for, as the reads are made.
    """
    real = ledger._client.batch_get_item
    asked: list[int] = []

    def batch_get_item(**request: Any) -> Any:
        [(table, wanted)] = request["RequestItems"].items()
        keys = wanted["Keys"]
        asked.append(len(keys))
        held = left[len(asked) - 1] if len(asked) <= len(left) else 0
        served = keys[: len(keys) - held]
        response = real(RequestItems={table: wanted | {"Keys": served}}) if served else {"Responses": {}}
        if held:
            response["UnprocessedKeys"] = {table: wanted | {"Keys": keys[len(keys) - held :]}}
        return response

    ledger._client.batch_get_item = batch_get_item  # type: ignore[method-assign]
    return asked


def test_keys_left_unprocessed_are_read_again_after_a_growing_wait(ledger: Ledger) -> None:
    # Given DynamoDB leaving 4 of the 6 keys unprocessed, then 1
    asked = unprocessing(ledger, [4, 1])
    waits: list[float] = []
    ledger._sleep = waits.append

    # Then the page holds every question, newest first, after two waits
    assert listed(ledger, thread_id="t-1") == [["q-5", "q-4", "q-3", "q-2", "q-1", "q-0"]]
    assert asked == [6, 4, 1]
    assert waits == [UNPROCESSED_BACKOFF_SECONDS, 2 * UNPROCESSED_BACKOFF_SECONDS]


def test_keys_left_unprocessed_on_every_read_fail_the_page_as_a_throttled_call(ledger: Ledger) -> None:
    asked = unprocessing(ledger, [1] * UNPROCESSED_ATTEMPTS)
    with pytest.raises(ClientError) as raised:
        ledger.list_questions(thread_id="t-1")
    assert len(asked) == UNPROCESSED_ATTEMPTS
    # The api answers it 503 with Retry-After, as any throttled read
    error = unavailable(raised.value)
    assert error is not None and "BatchGetItem" in error.message


def test_a_question_removed_between_the_two_reads_is_left_out(ledger: Ledger) -> None:
    # Given q-3 removed (its TTL) after the index was read and before its item was
    real = ledger._client.batch_get_item

    def removed_first(**request: Any) -> Any:
        ledger._client.delete_item(TableName="ledger", Key={"dedupe_key": {"S": "wait.created:q-3"}})
        return real(**request)

    ledger._client.batch_get_item = removed_first  # type: ignore[method-assign]
    assert listed(ledger, thread_id="t-1") == [["q-5", "q-4", "q-2", "q-1", "q-0"]]
