"""``checkpointer=dynamodb`` parks and resumes a whole thread on moto server (which enforces key schemas).

The runner and api handlers are the deployed ones, configured through their environment as in
``test_receive_path``; the resources are created as the local stack creates them with
``--checkpointer dynamodb``, and their keys are compared with the package's own, not with ours.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from test_receive_path import REFUND, Stack, drain, park, reply_event, stack, start_event, thread_event

from tests.checkpoint_dynamodb_schema import keys_the_saver_reads, package_key_schemas
from wait_service.answer_limits import DYNAMODB_ITEM_BYTES, MAX_ANSWER_BYTES_WITHOUT_OFFLOAD
from wait_service.resources import TTL_DAYS, create_resources
from wait_service.runs.checkpoint_dynamodb import ExpiringDynamoDBSaver

if TYPE_CHECKING:
    from wait_service.resources import LocalResources

pytestmark = pytest.mark.integration

__all__ = ["stack"]  # the fixture the tests below build on
KIB = 1024


@pytest.fixture
def resources(aws_client: Any) -> LocalResources:
    """The local stack's resources with ``checkpointer="dynamodb"`` (overrides the shared fixture)."""
    return create_resources(
        aws_client("dynamodb"),
        aws_client("sqs"),
        aws_client("sns"),
        prefix=f"d{uuid.uuid4().hex[:8]}-",
        s3=aws_client("s3"),
        checkpointer="dynamodb",
    )


def _key_schema(dynamodb: Any, table: str) -> list[tuple[str, str]]:
    keys = dynamodb.describe_table(TableName=table)["Table"]["KeySchema"]
    return [(k["AttributeName"], k["KeyType"]) for k in keys]


def _scan(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = dynamodb.scan(TableName=table)["Items"]
    return items


def test_the_tables_have_the_keys_the_package_uses(resources: LocalResources, aws_client: Any) -> None:
    dynamodb = aws_client("dynamodb")
    package = package_key_schemas()
    assert resources.checkpoint_writes_table is not None
    assert resources.checkpoint_bucket is None
    assert _key_schema(dynamodb, resources.checkpoint_table) == package["checkpoints"]
    assert _key_schema(dynamodb, resources.checkpoint_writes_table) == package["writes"]


def test_the_saver_reads_and_writes_by_those_keys(
    resources: LocalResources, moto_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server.endpoint)
    assert resources.checkpoint_writes_table is not None
    saver = ExpiringDynamoDBSaver(
        checkpoints_table_name=resources.checkpoint_table,
        writes_table_name=resources.checkpoint_writes_table,
        ttl_seconds=60,
    )
    seen = keys_the_saver_reads(saver)
    package = package_key_schemas()
    checkpoints, writes = resources.checkpoint_table, resources.checkpoint_writes_table
    # A checkpoint is read by both its keys, the latest by the partition key alone.
    assert seen["get_item"][checkpoints] == sorted(name for name, _ in package["checkpoints"])
    assert seen["query"][checkpoints] == [package["checkpoints"][0][0]]
    assert seen["query"][writes] == [package["writes"][0][0]]
    # Every item put carries both keys of its table, and the TTL attribute.
    assert {name for name, _ in package["checkpoints"]} | {"ttl"} <= set(seen["put"][checkpoints])
    assert {name for name, _ in package["writes"]} | {"ttl"} <= set(seen["put"][writes])


def test_a_thread_starts_parks_and_resumes_to_done(stack: Stack, aws_client: Any) -> None:
    # Given the runner configured for the dynamodb checkpointer
    assert stack.env["AGENT_WAIT_CHECKPOINTER"] == "dynamodb"
    before = int(time.time())

    # When a run is started over the api and the runner parks it on its question
    envelope = park(stack, "t-ddb")
    question_id = envelope["question_id"]
    assert stack.ledger.get_thread("t-ddb").pending == [question_id]
    dynamodb = aws_client("dynamodb")
    assert _scan(dynamodb, stack.resources.checkpoint_table)

    # and a human approves, and the runner consumes the resume
    reply = stack.call(reply_event(question_id, {"action": "approve"}, envelope["reply_with"]["if_match"]))
    assert reply["statusCode"] == 202, reply["body"]
    assert stack.run_inbox() == 1

    # Then the thread is done with the refund, read back from the checkpoint
    thread = json.loads(stack.call(thread_event("t-ddb"))["body"])
    assert (thread["status"], thread["pending"]) == ("done", [])
    assert thread["output"]["refund"] == {"refund_id": "rf-c-17-40", "customer": "c-17", "amount": 40}
    assert stack.ledger.get_question(question_id).status == "resumed"
    # and every checkpoint and write item expires with the ledger
    after = int(time.time()) + 1
    ttl = TTL_DAYS * 24 * 3600
    assert stack.resources.checkpoint_writes_table is not None
    for table in (stack.resources.checkpoint_table, stack.resources.checkpoint_writes_table):
        items = _scan(dynamodb, table)
        assert items, table
        assert all(before + ttl <= int(item["ttl"]["N"]) <= after + ttl for item in items), table


def test_a_second_thread_does_not_see_the_first(stack: Stack) -> None:
    park(stack, "t-one")
    assert stack.call(start_event("t-two", REFUND | {"customer": "c-18"}))["statusCode"] == 202
    assert stack.run_inbox() == 1
    [envelope] = drain(stack.sqs, stack.resources.outbox_url)
    assert envelope["question"]["args"]["customer"] == "c-18"
    assert len(stack.ledger.get_thread("t-one").pending) == 1


@pytest.fixture
def notes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Stack:
    """The stack running the note graph (a free-text answer kept twice in its state)."""
    monkeypatch.setenv("AGENT_WAIT_GRAPH", "large_answer_graph:build_graph")
    built: Stack = request.getfixturevalue("stack")
    return built


def test_an_answer_at_the_limit_resumes_and_one_over_it_is_413(notes: Stack, aws_client: Any) -> None:
    from test_large_answers import park_note, reply

    # Given the api limit a deployment without offload gets, and a parked note
    assert notes.env["AGENT_WAIT_MAX_ANSWER_BYTES"] == str(MAX_ANSWER_BYTES_WITHOUT_OFFLOAD)
    question_id = park_note(notes, "t-limit")

    # When an answer one byte over the limit arrives, it is refused before anything is recorded
    # (a JSON string is its characters and two quotes)
    assert reply(notes, question_id, "n" * (MAX_ANSWER_BYTES_WITHOUT_OFFLOAD - 1))["statusCode"] == 413
    # and an answer exactly at the limit is applied: the thread resumes to done
    answer = "n" * (MAX_ANSWER_BYTES_WITHOUT_OFFLOAD - 2)
    assert reply(notes, question_id, answer)["statusCode"] == 202
    assert notes.run_inbox() == 1
    thread = notes.ledger.get_thread("t-limit")
    assert thread.run_status == "done", thread
    assert json.loads(notes.call(thread_event("t-limit"))["body"])["output"] == {
        "note_bytes": 2 * len(answer)
    }

    # with the largest checkpoint item (the answer twice in the state) well inside DynamoDB's limit
    dynamodb = aws_client("dynamodb")
    largest = max(
        sum(len(v.get("B", b"")) for v in item.values())
        for item in _scan(dynamodb, notes.resources.checkpoint_table)
    )
    assert 2 * len(answer) < largest < DYNAMODB_ITEM_BYTES
