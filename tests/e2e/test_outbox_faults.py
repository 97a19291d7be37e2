"""Accepted means applied: a fault at each step after a reply's or a start's ledger write.

The ledger write is the commit (DESIGN.md, "Decisions for production": "one commit point per request
= the ledger write; everything else follows from the ledger's DynamoDB stream"). For a reply and for
a start, each step that follows the write fails once in turn — the api dying right after its write
(the write applied, its response lost), the dispatcher failing, the enqueue failing — and the
thread must end ``done`` with no client retry: one request per step, never a second.

The local stack runs in this process (moto on 127.0.0.1, the real handlers), with faults injected
at moto's door and one dispatcher invocation failed on purpose.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import eventually, http

from agent_wait_cli.local.moto_server import Fault
from agent_wait_cli.local.runtime import context_factory, load_handler
from agent_wait_cli.local.stack import LocalStack, StackConfig

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
REFUND = {"customer": "c-17", "amount": 40}
STEPS = ("api dies after the write", "dispatcher fails", "enqueue fails")
# A DynamoDB or SQS 500: botocore retries it a few times, then the caller sees the error.
INTERNAL = Fault(
    500, b'{"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": "injected"}'
)
SQS_INTERNAL = Fault(
    500, b"<ErrorResponse><Error><Code>InternalFailure</Code></Error></ErrorResponse>", "text/xml"
)
# More failed sends than botocore's own retries absorb: the dispatcher's invocation fails and the
# stream's mapping retries the record.
ENQUEUE_FAILURES = 8


class FlakyDispatcher:
    """The real dispatcher handler, failing the first invocation whose batch names ``marked`` ids."""

    def __init__(self) -> None:
        self._handler: Callable[[dict[str, Any], Any], Any] | None = None
        self._lock = threading.Lock()
        self.marked: set[str] = set()
        self.failed: list[str] = []

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        if self._handler is None:
            self._handler = load_handler(
                ROOT / "functions" / "dispatcher" / "handler.py", "outbox_faults_dispatcher"
            )
        text = json.dumps(event)
        with self._lock:
            hit = next((mark for mark in self.marked if mark in text), None)
            if hit is not None:
                self.marked.discard(hit)
                self.failed.append(hit)
        if hit is not None:
            raise RuntimeError(f"injected: the dispatcher died handling {hit}")
        return self._handler(event, context)


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[LocalStack, FlakyDispatcher]]:
    dispatcher = FlakyDispatcher()
    # (moto keeps its state per process, shared with every stack of this worker: a prefix of its own)
    prefix = f"of{uuid.uuid4().hex[:6]}-"
    local = LocalStack(StackConfig(project=ROOT, port=0, prefix=prefix), dispatcher_handler=dispatcher)
    with local:
        yield local, dispatcher


def _thread(api: str, thread_id: str, *statuses: str) -> dict[str, Any] | None:
    status, _, body = http("GET", f"{api}/threads/{thread_id}")
    return body if status == 200 and body.get("status") in statuses else None


def _parked(api: str, thread_id: str) -> str:
    thread = eventually(lambda: _thread(api, thread_id, "interrupted", "failed"), what="the question")
    assert thread["status"] == "interrupted", thread
    return str(thread["pending"][0])


def _inject(
    local: LocalStack, dispatcher: FlakyDispatcher, step: str, target: str, write: bytes
) -> list[int]:
    """Arm ``step``'s fault for the request naming ``target``; returns the live count of faults given."""
    given = [0]
    inbox = local.resources.inbox_url.rsplit("/", 1)[-1].encode()
    if step == "dispatcher fails":
        dispatcher.marked.add(target)
        return given
    lock = threading.Lock()

    def rule(environ: dict[str, Any], body: bytes) -> Fault | None:
        action = environ.get("HTTP_X_AMZ_TARGET", "") + body[:200].decode("latin-1")
        with lock:
            if step == "api dies after the write":
                if action.startswith(write.decode()) and target.encode() in body:
                    given[0] += 1
                    # The first applies the write; botocore's retries meet an outage until the api gives up.
                    return Fault(INTERNAL.status, INTERNAL.body, applied=given[0] == 1)
                return None
            sends = (
                b"SendMessage" in environ.get("HTTP_X_AMZ_TARGET", "").encode()
                or b"Action=SendMessage" in body
            )
            if sends and inbox in body + environ.get("PATH_INFO", "").encode() and target.encode() in body:
                if given[0] < ENQUEUE_FAILURES:
                    given[0] += 1
                    return SQS_INTERNAL
        return None

    local.moto.inject(rule)
    return given


@pytest.mark.parametrize("step", STEPS)
def test_a_reply_reaches_done_with_no_client_retry_whatever_step_fails(
    stack: tuple[LocalStack, FlakyDispatcher], step: str
) -> None:
    local, dispatcher = stack
    api = local.api_url
    thread_id = f"reply-{step.split()[0]}-{uuid.uuid4().hex[:6]}"
    status, _, _ = http("POST", f"{api}/threads/{thread_id}/runs", {"input": REFUND})
    assert status == 202
    question_id = _parked(api, thread_id)
    _, headers, _ = http("GET", f"{api}/questions/{question_id}")

    given = _inject(local, dispatcher, step, question_id, b"DynamoDB_20120810.UpdateItem")
    try:
        status, _, body = http(
            "POST",
            f"{api}/questions/{question_id}/reply",
            {"answer": {"action": "approve"}},
            {"If-Match": headers["ETag"]},
        )
    finally:
        if step == "api dies after the write":
            local.moto.inject(None)
    if step == "api dies after the write":
        # The caller saw a failure (whichever error the api makes of it); it does not retry.
        assert status >= 400 and given[0] >= 1, (status, body)
    else:
        assert status == 202, body

    done = eventually(lambda: _thread(api, thread_id, "done", "failed"), what=f"the thread after '{step}'")
    local.moto.inject(None)
    assert done["status"] == "done", done
    assert done["output"]["refund"]["amount"] == 40
    _, _, question = http("GET", f"{api}/questions/{question_id}")
    assert question["status"] == "resumed"
    if step == "dispatcher fails":
        assert question_id in dispatcher.failed
    if step == "enqueue fails":
        assert given[0] == ENQUEUE_FAILURES
    # How soon the resume left is not asserted here (a wall-clock bound would fail on a loaded
    # machine); the local bound follows from the stream reader's read interval and capped backoff.


@pytest.mark.parametrize("step", STEPS)
def test_a_start_reaches_done_with_no_client_retry_whatever_step_fails(
    stack: tuple[LocalStack, FlakyDispatcher], step: str
) -> None:
    local, dispatcher = stack
    api = local.api_url
    thread_id = f"start-{step.split()[0]}-{uuid.uuid4().hex[:6]}"

    given = _inject(local, dispatcher, step, thread_id, b"DynamoDB_20120810.TransactWriteItems")
    try:
        status, _, body = http("POST", f"{api}/threads/{thread_id}/runs", {"input": REFUND})
    finally:
        if step == "api dies after the write":
            local.moto.inject(None)
    if step == "api dies after the write":
        assert status >= 400 and given[0] >= 1, (status, body)
    else:
        assert status == 202, body

    # The start reached the runner: the run parked on its question, with no second POST.
    question_id = _parked(api, thread_id)
    local.moto.inject(None)
    if step == "dispatcher fails":
        assert thread_id in dispatcher.failed
    if step == "enqueue fails":
        assert given[0] == ENQUEUE_FAILURES
    _, headers, _ = http("GET", f"{api}/questions/{question_id}")
    status, _, _ = http(
        "POST",
        f"{api}/questions/{question_id}/reply",
        {"answer": {"action": "approve"}},
        {"If-Match": headers["ETag"]},
    )
    assert status == 202
    done = eventually(lambda: _thread(api, thread_id, "done", "failed"), what="the thread's end")
    assert done["status"] == "done", done


def test_a_redelivered_stream_record_runs_nothing_twice(stack: tuple[LocalStack, FlakyDispatcher]) -> None:
    """The dispatcher handles a whole batch again (as a mapping's retry does): one run, one resume."""
    local, _ = stack
    api = local.api_url
    thread_id = f"redeliver-{uuid.uuid4().hex[:6]}"
    streams = local.client("dynamodbstreams")
    arn = local.resources.ledger_stream_arn
    status, _, _ = http("POST", f"{api}/threads/{thread_id}/runs", {"input": REFUND})
    assert status == 202
    question_id = _parked(api, thread_id)
    _, headers, _ = http("GET", f"{api}/questions/{question_id}")
    http(
        "POST",
        f"{api}/questions/{question_id}/reply",
        {"answer": {"action": "approve"}},
        {"If-Match": headers["ETag"]},
    )
    eventually(lambda: _thread(api, thread_id, "done", "failed"), what="the thread's end")

    # Every record of this thread's run and question, handed to the dispatcher once more.
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")[
        "ShardIterator"
    ]
    records = [
        record
        for record in streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
        if thread_id in json.dumps(record, default=str) or question_id in json.dumps(record, default=str)
    ]
    assert records
    from agent_wait_cli.local.streams import lambda_record

    event = {"Records": [lambda_record(record, str(arn)) for record in records]}
    context = context_factory("agent-wait-dispatcher", 30, local.config.region)()
    assert local._invoke_dispatcher(event, context) == {"batchItemFailures": []}

    # The runner refuses the repeats: the thread stays done after one run, the question resumed once.
    def settled() -> bool:
        attributes = local.client("sqs").get_queue_attributes(
            QueueUrl=local.resources.inbox_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return attributes == {
            "ApproximateNumberOfMessages": "0",
            "ApproximateNumberOfMessagesNotVisible": "0",
        }

    eventually(settled, what="the inbox to be empty")
    thread = _thread(api, thread_id, "done")
    assert thread is not None
    _, _, question = http("GET", f"{api}/questions/{question_id}")
    assert [stage["stage"] for stage in question["lifecycle"]].count("resumed") == 1
