"""A large answer is either applied or refused with 413 before anything is recorded (on moto server).

The runner and api handlers are the deployed ones, configured through their environment as in
``test_receive_path``; the checkpoint bucket is created from the same spec as the stack's.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from payloads import incompressible_text
from test_receive_path import Stack, drain, event, stack, thread_event

from wait_service.answer_limits import MAX_ANSWER_BYTES_WITHOUT_OFFLOAD
from wait_service.resources import CHECKPOINT_BUCKET, TTL_DAYS

pytestmark = pytest.mark.integration

KIB = 1024
GRAPH = "large_answer_graph:build_graph"


__all__ = ["stack"]  # the fixture the ones below build on


@pytest.fixture
def notes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Stack:
    """The stack running the note graph (a free-text question, the answer kept twice in its state)."""
    monkeypatch.setenv("AGENT_WAIT_GRAPH", GRAPH)
    built: Stack = request.getfixturevalue("stack")
    return built


@pytest.fixture
def notes_without_offload(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Stack:
    """The note stack with the api limit a deployment without a checkpoint bucket gets."""
    monkeypatch.setenv("AGENT_WAIT_MAX_ANSWER_BYTES", str(MAX_ANSWER_BYTES_WITHOUT_OFFLOAD))
    built: Stack = request.getfixturevalue("notes")
    return built


def reply(stack: Stack, question_id: str, answer: Any) -> dict[str, Any]:
    """POST the answer with no If-Match: the note's question does not bind its answer."""
    request = event(
        "reply.json",
        f"/questions/{question_id}/reply",
        "/questions/{question_id}/reply",
        {"question_id": question_id},
        {"answer": answer},
    )
    request["headers"].pop("If-Match", None)
    request["multiValueHeaders"].pop("If-Match", None)
    return stack.call(request)


def park_note(stack: Stack, thread_id: str) -> str:
    start = event(
        "start_run.json",
        f"/threads/{thread_id}/runs",
        "/threads/{thread_id}/runs",
        {"thread_id": thread_id},
        {"input": {"topic": "shipping"}},
    )
    assert stack.call(start)["statusCode"] == 202
    assert stack.run_inbox() == 1
    [envelope] = drain(stack.sqs, stack.resources.outbox_url)
    return str(envelope["question_id"])


def test_a_250_kib_answer_resumes_to_done(notes: Stack, aws_client: Any) -> None:
    # Given a thread parked on a free-text question
    question_id = park_note(notes, "t-large")
    # (text gzip cannot shrink: the saver stores checkpoints gzipped)
    answer = incompressible_text(250 * KIB)

    # When a human answers with 250 KiB and the runner consumes the resume
    response = reply(notes, question_id, answer)
    assert response["statusCode"] == 202, response["body"]
    assert notes.run_inbox() == 1

    # Then the thread is done and the question resumed
    thread = json.loads(notes.call(thread_event("t-large"))["body"])
    assert (thread["status"], thread["output"]) == ("done", {"note_bytes": 2 * 250 * KIB})
    assert notes.ledger.get_question(question_id).status == "resumed"
    # and the checkpoint over the 350 KB the saver keeps in DynamoDB (gzipped, the answer twice)
    # went to the bucket, tagged for its lifecycle rule
    s3 = aws_client("s3")
    bucket = notes.resources.checkpoint_bucket
    objects = s3.list_objects_v2(Bucket=bucket)["Contents"]
    assert max(o["Size"] for o in objects) > 350 * KIB
    tags = s3.get_object_tagging(Bucket=bucket, Key=objects[0]["Key"])["TagSet"]
    assert tags == [{"Key": "ttl-days", "Value": str(TTL_DAYS)}]
    # and the saver found the deployed rule: it added none of its own
    rules = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert [r["ID"] for r in rules] == [CHECKPOINT_BUCKET.rule_id]


def test_checkpoint_items_expire_with_the_ledger(notes: Stack, aws_client: Any) -> None:
    before = int(time.time())
    park_note(notes, "t-ttl")
    after = int(time.time()) + 1
    items = aws_client("dynamodb").scan(TableName=notes.resources.checkpoint_table)["Items"]

    ttl = TTL_DAYS * 24 * 3600
    assert items
    assert all(before + ttl <= int(item["ttl"]["N"]) <= after + ttl for item in items)


def test_an_answer_over_the_deployment_limit_is_413_and_nothing_is_recorded(
    notes_without_offload: Stack,
) -> None:
    # Given a deployment whose checkpoints cannot offload (the api gets the smaller limit)
    notes = notes_without_offload
    question_id = park_note(notes, "t-refused")

    # When an answer over that limit arrives
    # (a JSON string is its characters and two quotes)
    response = reply(notes, question_id, "n" * (MAX_ANSWER_BYTES_WITHOUT_OFFLOAD - 1))

    # Then it is refused before anything is recorded or enqueued
    assert response["statusCode"] == 413
    assert json.loads(response["body"])["error"] == "payload_too_large"
    assert notes.ledger.get_question(question_id).status == "delivered"
    assert notes.run_inbox() == 0
    # and an answer within it is applied
    assert reply(notes, question_id, "n" * (MAX_ANSWER_BYTES_WITHOUT_OFFLOAD - 2))["statusCode"] == 202
    assert notes.run_inbox() == 1
    assert notes.ledger.get_thread("t-refused").run_status == "done"


def test_an_answer_that_would_not_fit_beside_its_question_is_413(notes: Stack, aws_client: Any) -> None:
    # Given a parked question whose ledger item is already large (a 200 KiB question)
    question_id = park_note(notes, "t-big-question")
    aws_client("dynamodb").update_item(
        TableName=notes.resources.ledger_table,
        Key={"dedupe_key": {"S": f"wait.created:{question_id}"}},
        UpdateExpression="SET #q = :q",
        ExpressionAttributeNames={"#q": "question"},
        ExpressionAttributeValues={":q": {"S": "q" * (200 * KIB)}},
    )

    # When a 250 KiB answer arrives: the item would pass DynamoDB's 400 KB
    response = reply(notes, question_id, "n" * (250 * KIB))

    # Then it is refused before anything is recorded
    assert response["statusCode"] == 413, response["body"]
    assert notes.ledger.get_question(question_id).status == "delivered"
    assert notes.run_inbox() == 0
