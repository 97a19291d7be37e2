"""Redrive on the local stack: a message forced into each DLQ, listed, redriven, and the thread done.

Each failure is a real one: moto is told to fail the AWS calls of one step (the resume's checkpoint
reads, the expiry's ledger write) until the message or timer has used up its retries, so the
message reaches its DLQ the way it would deployed. Then the fault is lifted and ``agent-wait dlq``
(the console script's ``main``, in process) lists and redrives it.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import ROOT, dlq_cli, eventually, http

from agent_wait_cli.dlq import DEDUPLICATION_WINDOW_SECONDS
from agent_wait_cli.local.moto_server import Fault
from agent_wait_cli.local.stack import LocalStack, StackConfig

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.e2e

GRAPH = "examples.timed_refund_agent:build_graph"
LATE = {"action": "reject", "reason": "nobody answered in time"}
# A server error: what the runner retries and then dead-letters.
FAILED = Fault(
    500,
    b'{"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError",'
    b' "message": "injected: the table is unavailable"}',
)


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    # (moto keeps its state per process: a stack name of its own)
    name = f"dlq{uuid.uuid4().hex[:6]}"
    config = StackConfig(project=ROOT, graph=GRAPH, port=0, prefix=f"{name}-", inbox_visibility=0)
    with LocalStack(config) as local:
        yield local


dlq = dlq_cli


def listed(stack: LocalStack) -> list[dict[str, Any]]:
    code, out, err = dlq(stack, "list", "--json")
    assert code == 0, err
    return list(json.loads(out)["messages"])


def park(stack: LocalStack, thread_id: str, policy: dict[str, Any]) -> str:
    status, _, _ = http(
        "POST",
        f"{stack.api_url}/threads/{thread_id}/runs",
        {"input": {"customer": "c-17", "amount": 40, "policy": policy}},
    )
    assert status == 202

    def parked() -> list[str] | None:
        _, _, thread = http("GET", f"{stack.api_url}/threads/{thread_id}")
        return thread.get("pending") if thread.get("status") == "interrupted" else None

    [question_id] = eventually(parked, what=f"{thread_id} to park")
    return str(question_id)


def question(stack: LocalStack, question_id: str) -> dict[str, Any]:
    _, _, body = http("GET", f"{stack.api_url}/questions/{question_id}")
    return dict(body)


def finished(stack: LocalStack, thread_id: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        _, _, thread = http("GET", f"{stack.api_url}/threads/{thread_id}")
        return thread if thread.get("status") == "done" else None

    return dict(eventually(done, timeout=60, what=f"{thread_id} to finish"))


def failing(table: str, *targets: str, marker: bytes = b"", also: bytes = b"") -> Any:
    """Fail the DynamoDB ``targets`` on ``table`` (only the requests holding ``marker`` and ``also``)."""

    def rule(environ: dict[str, Any], body: bytes) -> Fault | None:
        target = str(environ.get("HTTP_X_AMZ_TARGET", "")).rsplit(".", 1)[-1]
        if target in targets and table.encode() in body and marker in body and also in body:
            return FAILED
        return None

    return rule


def test_a_resume_that_failed_every_attempt_is_redriven_and_the_thread_ends(stack: LocalStack) -> None:
    # Given a parked thread whose resume cannot read its checkpoints
    thread_id = f"t-inbox-{uuid.uuid4().hex[:6]}"
    question_id = park(stack, thread_id, {})
    stack.moto.inject(
        failing(
            stack.resources.checkpoint_table, "Query", "GetItem", "BatchGetItem", marker=thread_id.encode()
        )
    )
    try:
        digest = question(stack, question_id)["digest"]
        status, _, _ = http(
            "POST",
            f"{stack.api_url}/questions/{question_id}/reply",
            {"answer": {"action": "approve"}},
            {"If-Match": f'"{digest}"'},
        )
        assert status == 202
        # When every receive fails, the resume ends in the inbox DLQ
        # (the runner backs off 2, 4, 8 and 16 s between its attempts, the SDK within each)
        [letter] = eventually(lambda: listed(stack), timeout=120, what="the resume in the inbox DLQ")
    finally:
        stack.moto.inject(None)

    # Then it is listed, with what it asks for
    assert (letter["dlq"], letter["what"]) == ("inbox", f"resume thread={thread_id} question={question_id}")
    assert letter["group"] == thread_id and letter["deduplication_id"]
    code, out, _ = dlq(stack, "list")
    assert code == 0 and letter["id"] in out and "inbox" in out
    code, out, _ = dlq(stack, "show", letter["id"])
    assert code == 0 and f"group     {thread_id}" in out

    # A redrive inside SQS's deduplication window is refused (it would be dropped), the message kept
    code, out, _ = dlq(stack, "redrive", letter["id"])
    assert code == 1 and out.startswith(f"refused {letter['id']} (inbox,") and "SQS would drop it" in out
    assert [m["id"] for m in listed(stack)] == [letter["id"]]

    # When it is redriven after the window
    later = time.time() + DEDUPLICATION_WINDOW_SECONDS + 1
    code, out, _ = dlq(stack, "redrive", letter["id"], clock=later)
    assert code == 0, out
    assert out.startswith(f"redriven {letter['id']} (inbox, resume thread={thread_id}")

    # Then the thread resumes with the recorded answer and ends; the DLQ is empty
    thread = finished(stack, thread_id)
    assert thread["output"]["refund"] is not None
    q = question(stack, question_id)
    assert (q["status"], q["answer"]) == ("resumed", {"action": "approve"})
    assert [entry["stage"] for entry in q["lifecycle"]].count("resumed") == 1
    assert listed(stack) == []


def test_a_timer_that_failed_every_attempt_is_invoked_again_and_the_thread_ends(stack: LocalStack) -> None:
    # Given a parked thread whose expiry cannot write to the ledger
    thread_id = f"t-timer-{uuid.uuid4().hex[:6]}"
    stack.moto.inject(
        failing(stack.resources.ledger_table, "UpdateItem", "TransactWriteItems", marker=b"system:expiry")
    )
    try:
        question_id = park(stack, thread_id, {"ttl": 1, "on_expiry": {"action": "default", "answer": LATE}})
        # When the timer fails its three attempts, its destination record lands in the lifecycle DLQ
        [letter] = eventually(lambda: listed(stack), what="the timer in the lifecycle DLQ")
    finally:
        stack.moto.inject(None)
    assert question(stack, question_id)["status"] in ("raised", "delivered")

    # Then it is listed with the timer it carries and the error it failed with
    assert letter["dlq"] == "lifecycle"
    assert letter["what"] == f"timer expire n=0 question={question_id}"
    # (the injected InternalServerError; or, on a busy machine, a timer that fired before the
    # question was recorded: either failed every attempt)
    assert letter["error"].startswith(("ClientError", "InternalServerError", "QuestionNotFoundError"))
    assert letter["body"]["requestContext"]["condition"] == "RetriesExhausted"

    # When every lifecycle record is redriven
    code, out, _ = dlq(stack, "redrive", "--all", "--dlq", "lifecycle")
    assert code == 0, out
    assert out.startswith(f"redriven {letter['id']} (lifecycle, timer expire")

    # Then the timer's payload is invoked again: the question expires with its default, the thread ends
    thread = finished(stack, thread_id)
    q = question(stack, question_id)
    assert (q["status"], q["answer"], q["answered_by"]) == ("expired", LATE, "system:expiry")
    assert thread["output"]["rejection"] == LATE
    assert listed(stack) == []


def test_a_timer_scheduler_gave_up_on_is_invoked_again_and_the_thread_ends(stack: LocalStack) -> None:
    # Given a parked thread whose expiry (an hour away) EventBridge Scheduler gave up invoking: it
    # sends the schedule's input to the timers DLQ with its error attributes (the local stack's
    # clock invokes the handler itself, so the test sends what Scheduler would)
    thread_id = f"t-sched-{uuid.uuid4().hex[:6]}"
    question_id = park(stack, thread_id, {"ttl": 3600, "on_expiry": {"action": "default", "answer": LATE}})
    sqs = stack.client("sqs")
    url = sqs.get_queue_url(QueueName=f"{stack.config.prefix}timers-dlq")["QueueUrl"]
    sqs.send_message(
        QueueUrl=url,
        MessageBody=json.dumps({"question_id": question_id, "timer": "expire", "n": 0}),
        MessageAttributes={
            "ERROR_CODE": {"DataType": "String", "StringValue": "AWS.Lambda.AccessDeniedException"},
            "ERROR_MESSAGE": {"DataType": "String", "StringValue": "not authorized to invoke"},
        },
    )

    # Then it is listed under the timers DLQ with the timer it carries and Scheduler's error
    [letter] = listed(stack)
    assert (letter["dlq"], letter["what"]) == ("timers", f"timer expire n=0 question={question_id}")
    assert letter["error"] == "AWS.Lambda.AccessDeniedException: not authorized to invoke"

    # When it is redriven
    code, out, _ = dlq(stack, "redrive", "--all", "--dlq", "timers")
    assert code == 0, out
    assert out.startswith(f"redriven {letter['id']} (timers, timer expire")

    # Then the lifecycle function takes the timer: the question expires with its default, the thread ends
    thread = finished(stack, thread_id)
    q = question(stack, question_id)
    assert (q["status"], q["answer"], q["answered_by"]) == ("expired", LATE, "system:expiry")
    assert thread["output"]["rejection"] == LATE
    assert listed(stack) == []


def test_an_unknown_id_and_an_unknown_dlq_are_one_line_errors(stack: LocalStack) -> None:
    code, out, err = dlq(stack, "redrive", "no-such-message")
    assert (code, out) == (1, "")
    assert (
        err
        == f"agent-wait: no message no-such-message in any dead-letter queue of {stack.config.prefix[:-1]}\n"
    )
    code, _, err = dlq(stack, "list", "--dlq", "nope")
    assert code == 1 and err.count("\n") == 1 and "no dead-letter queue named 'nope'" in err


def test_the_local_archive_holds_each_decided_question_as_the_api_shows_it(stack: LocalStack) -> None:
    from wait_service.stream.archive import JsonLinesSink

    # Given a question answered with edited arguments, and its thread done
    thread_id = f"t-archive-{uuid.uuid4().hex[:6]}"
    question_id = park(stack, thread_id, {})
    digest = question(stack, question_id)["digest"]
    answer = {"action": "approve", "args": {"amount": 25}}
    status, _, _ = http(
        "POST",
        f"{stack.api_url}/questions/{question_id}/reply",
        {"answer": answer},
        {"If-Match": f'"{digest}"'},
    )
    assert status == 202
    finished(stack, thread_id)
    shown = question(stack, question_id)
    folder = stack.archive_dir
    assert folder is not None

    # When the stream's reader has archived its last change
    def archived() -> dict[str, Any] | None:
        rows = [r for r in JsonLinesSink(folder).read() if r["question_id"] == question_id]
        done = [r for r in rows if r["status"] == "resumed"]
        return done[-1] if done else None

    row = eventually(archived, what="the resumed question in the archive")

    # Then the archive holds what the api shows: answer, responder, audit (diff, receipt), lifecycle
    assert json.loads(row["answer"]) == answer == shown["answer"]
    assert row["answered_by"] == shown["answered_by"]
    assert json.loads(row["audit"]) == shown["audit"]
    assert json.loads(row["audit"])["diff"] == [{"op": "replace", "path": "/amount", "value": 25}]
    # (the api shows every stage's empty detail as null; the archive keeps the ledger's stages as stored)
    assert json.loads(row["lifecycle"]) == [
        {k: v for k, v in stage.items() if v is not None} for stage in shown["lifecycle"]
    ]
    assert (folder / "audit" / f"date={row['date']}" / "audit.jsonl").is_file()
