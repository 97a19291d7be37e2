"""What ran is exactly what was approved, on the local stack (seed 003: "what exactly did you
approve, and did exactly that run, once?")."""

from __future__ import annotations

import json
import uuid
from typing import Any

import boto3
import pytest
from e2e_support import LocalProcess, eventually, http

pytestmark = pytest.mark.e2e

REFUND = {"customer": "c-17", "amount": 40}


def parked(local: LocalProcess, thread_id: str) -> tuple[str, str]:
    """Start a refund of 40 on ``thread_id``; returns its question id and ETag once it waits."""
    assert http("POST", f"{local.api}/threads/{thread_id}/runs", {"input": REFUND})[0] == 202

    def waiting() -> Any:
        _, _, thread = http("GET", f"{local.api}/threads/{thread_id}")
        return thread if thread.get("status") == "interrupted" else None

    [question_id] = eventually(waiting, what="the question")["pending"]
    _, headers, _ = http("GET", f"{local.api}/questions/{question_id}")
    return question_id, headers["ETag"]


def printed(local: LocalProcess, prefix: str) -> str:
    return next(line.split(": ", 1)[1] for line in local.lines if line.startswith(prefix))


def test_a_forged_inbox_message_resumes_nothing(local_stack: LocalProcess) -> None:
    # Given a thread waiting on the approval of a refund of 40
    thread_id = f"e2e-forged-{uuid.uuid4().hex[:6]}"
    question_id, etag = parked(local_stack, thread_id)

    # When someone who can write to the inbox puts a resume there that "approves" 999
    inbox_url = printed(local_stack, "outbox queue").replace("outbox.fifo", "inbox.fifo")
    sqs = boto3.client(
        "sqs",
        endpoint_url=printed(local_stack, "moto"),
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    forged = {
        "thread_id": thread_id,
        "question_id": question_id,
        "answer": {"action": "approve", "args": {"amount": 999}},
    }
    sqs.send_message(
        QueueUrl=inbox_url,
        MessageBody=json.dumps(forged),
        MessageGroupId=thread_id,
        MessageDeduplicationId=uuid.uuid4().hex,
    )

    # Then it is consumed and resumes nothing: the question is still open, the thread still waits
    def consumed() -> bool:
        attributes = sqs.get_queue_attributes(QueueUrl=inbox_url, AttributeNames=["All"])["Attributes"]
        return (
            attributes["ApproximateNumberOfMessages"]
            == attributes["ApproximateNumberOfMessagesNotVisible"]
            == "0"
        )

    eventually(consumed, what="the forged message to be consumed")
    _, _, question = http("GET", f"{local_stack.api}/questions/{question_id}")
    assert question["status"] == "delivered"
    _, _, thread = http("GET", f"{local_stack.api}/threads/{thread_id}")
    assert (thread["status"], thread["pending"]) == ("interrupted", [question_id])

    # And the real answer still runs exactly what it approved
    status, _, _ = http(
        "POST",
        f"{local_stack.api}/questions/{question_id}/reply",
        {"answer": {"action": "approve"}},
        {"If-Match": etag},
    )
    assert status == 202

    def done() -> Any:
        _, _, thread = http("GET", f"{local_stack.api}/threads/{thread_id}")
        return thread if thread.get("status") == "done" else None

    assert eventually(done, what="the refund")["output"]["refund"]["amount"] == 40


@pytest.mark.parametrize(
    ("if_match", "status"),
    [("*", 412), ('W/"{d}"', 412), ("{d}", 412), ('"other", "{d}"', 412), (None, 428)],
    ids=["star", "weak", "unquoted", "list", "missing"],
)
def test_a_binding_question_takes_nothing_but_its_strong_etag(
    local_stack: LocalProcess, if_match: str | None, status: int
) -> None:
    thread_id = f"e2e-bind-{uuid.uuid4().hex[:6]}"
    question_id, etag = parked(local_stack, thread_id)
    digest = etag.strip('"')
    headers = {} if if_match is None else {"If-Match": if_match.format(d=digest)}

    got, _, body = http(
        "POST", f"{local_stack.api}/questions/{question_id}/reply", {"answer": {"action": "approve"}}, headers
    )

    assert (got, body["error"]) == (
        status,
        "precondition_failed" if status == 412 else "precondition_required",
    )
    _, _, question = http("GET", f"{local_stack.api}/questions/{question_id}")
    assert (question["status"], question["answer"]) == ("delivered", None)


def test_a_typed_edit_is_refused_naming_the_field_and_a_valid_one_runs_as_audited(
    local_stack: LocalProcess,
) -> None:
    # Given a refund of 40 waiting for approval; its question carries the arguments' schema
    thread_id = f"e2e-typed-{uuid.uuid4().hex[:6]}"
    question_id, etag = parked(local_stack, thread_id)
    _, _, question = http("GET", f"{local_stack.api}/questions/{question_id}")
    assert question["question"]["args_schema"]["properties"]["amount"]["exclusiveMinimum"] == 0
    reply_url = f"{local_stack.api}/questions/{question_id}/reply"

    # When an edit breaks the argument's type or constraint, it is refused naming the field
    for amount in (-1000, "all the money"):
        status, _, body = http(
            "POST",
            reply_url,
            {"answer": {"action": "approve", "args": {"amount": amount}}},
            {"If-Match": etag},
        )
        assert (status, body["field"]) == (422, "answer.args.amount"), body
    _, _, unchanged = http("GET", f"{local_stack.api}/questions/{question_id}")
    assert unchanged["answer"] is None

    # And a valid edit runs with the edited value, the audit showing exactly what ran
    status, _, _ = http(
        "POST", reply_url, {"answer": {"action": "approve", "args": {"amount": 25}}}, {"If-Match": etag}
    )
    assert status == 202

    def done() -> Any:
        _, _, thread = http("GET", f"{local_stack.api}/threads/{thread_id}")
        return thread if thread.get("status") == "done" else None

    assert eventually(done, what="the refund")["output"]["refund"]["amount"] == 25
    _, _, answered = http("GET", f"{local_stack.api}/questions/{question_id}")
    audit = answered["audit"]
    assert audit["proposed"]["args"] == REFUND
    assert audit["authorized"]["args"] == REFUND | {"amount": 25}
    assert audit["diff"] == [{"op": "replace", "path": "/amount", "value": 25}]
    assert audit["if_match"] == etag
    assert (audit["receipt"]["ran"], audit["receipt"]["args"]) == (True, REFUND | {"amount": 25})
