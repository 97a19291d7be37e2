"""The ledger stream's DLQ on the local stack: a batch the dispatcher failed, redriven from the CLI.

The dispatcher runs inside the local stack's process; ``agent-wait dlq redrive`` reaches it through
the stack's Lambda endpoint with the same synchronous ``Invoke`` it sends the deployed function.
The failure is a real one: moto refuses the dispatcher's enqueue of the start until the batch is
dead-lettered (no retries here, to keep the test short).
"""

from __future__ import annotations

import io
import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import ROOT, dlq_cli, eventually, http

from agent_wait_cli.commands import main
from agent_wait_cli.local.moto_server import Fault
from agent_wait_cli.local.stack import LocalStack, StackConfig

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.e2e

SQS_DOWN = Fault(
    500, b'{"__type": "com.amazonaws.sqs#InternalError", "message": "injected: the inbox is unavailable"}'
)


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    name = f"srd{uuid.uuid4().hex[:6]}"
    config = StackConfig(project=ROOT, port=0, prefix=f"{name}-", stream_retry_attempts=0)
    with LocalStack(config) as local:
        yield local


dlq = dlq_cli


def stream_letters(stack: LocalStack) -> list[dict[str, Any]]:
    code, out, err = dlq(stack, "list", "--json", "--dlq", "ledger-stream")
    assert code == 0, err
    return list(json.loads(out)["messages"])


def test_a_stream_batch_the_dispatcher_failed_is_redriven_through_the_lambda_endpoint(
    stack: LocalStack,
) -> None:
    thread_id = f"t-stream-{uuid.uuid4().hex[:6]}"
    marker = thread_id.encode()

    def inbox_down(environ: dict[str, Any], body: bytes) -> Fault | None:
        target = str(environ.get("HTTP_X_AMZ_TARGET", "")).rsplit(".", 1)[-1]
        sends = target in ("SendMessage", "SendMessageBatch")
        return SQS_DOWN if sends and b"inbox.fifo" in body and marker in body else None

    # Given a start the api accepted whose enqueue the dispatcher failed: the batch is dead-lettered
    stack.moto.inject(inbox_down)
    try:
        status, _, body = http(
            "POST", f"{stack.api_url}/threads/{thread_id}/runs", {"input": {"customer": "c-17", "amount": 40}}
        )
        assert (status, body["status"]) == (202, "queued")
        [letter] = eventually(lambda: stream_letters(stack), what="the batch in the stream's DLQ")
    finally:
        stack.moto.inject(None)
    _, _, thread = http("GET", f"{stack.api_url}/threads/{thread_id}")
    assert thread["status"] == "queued"

    # When it is redriven without the Lambda endpoint, it is refused in one line naming the flag, and kept
    code, out, _ = dlq(stack, "redrive", letter["id"])
    assert code == 1 and "--lambda-endpoint-url" in out and out.count("\n") == 1
    assert [m["id"] for m in stream_letters(stack)] == [letter["id"]]

    # When it is redriven through the stack's Lambda endpoint
    assert stack.lambda_endpoint is not None
    code, out, err = dlq(stack, "redrive", letter["id"], "--lambda-endpoint-url", stack.lambda_endpoint.url)
    assert code == 0, out + err
    assert out.startswith(f"redriven {letter['id']} (ledger-stream")

    # Then the run the api accepted runs: the thread parks on its question, and the DLQ is empty
    def parked() -> dict[str, Any] | None:
        _, _, current = http("GET", f"{stack.api_url}/threads/{thread_id}")
        return current if current.get("status") == "interrupted" else None

    assert len(eventually(parked, what="the redriven run")["pending"]) == 1
    assert stream_letters(stack) == []


def test_the_lambda_endpoint_flag_is_for_the_local_stack_only(stack: LocalStack) -> None:
    code, out, err = dlq(stack, "redrive", "--all", "--lambda-endpoint-url", "https://lambda.example.com")
    assert code == 2 and "not on this machine" in err and err.count("\n") == 1
    out_, err_ = io.StringIO(), io.StringIO()
    code = main(
        ["dlq", "redrive", "--all", "--lambda-endpoint-url", "http://127.0.0.1:1"],
        out=out_,
        err=err_,
        environ={},
    )
    assert code == 2 and "pass its moto --endpoint-url too" in err_.getvalue()
