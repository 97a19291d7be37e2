"""A Strands agent on the local stack (``--framework strands``), answered through HTTP.

``examples.strands_agent:build_agent`` stops on a ``@wait`` interrupt; the runner publishes the
question and resumes the agent with an ``interruptResponse``, its session one snapshot in the
checkpoint bucket (moto). Each step is awaited with ``eventually``, never a fixed sleep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import LocalProcess, eventually, http, start_local

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.e2e

AGENT = "examples.strands_agent:build_agent"


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalProcess]:
    local = start_local("--framework", "strands", "--agent", AGENT)
    try:
        yield local
    finally:
        code = local.stop()
        assert code == 0, "\n".join(local.lines)


def thread_in(stack: LocalProcess, thread_id: str, status: str) -> dict[str, Any] | None:
    _, _, thread = http("GET", f"{stack.api}/threads/{thread_id}")
    return thread if thread.get("status") in (status, "failed") else None


def test_start_question_answer_done_with_the_receipt(stack: LocalProcess) -> None:
    assert "framework: strands" in stack.lines
    status, _, _ = http(
        "POST", f"{stack.api}/threads/s-e2e/runs", {"input": {"prompt": "refund 40 to c-s-e2e"}}
    )
    assert status == 202
    parked = eventually(lambda: thread_in(stack, "s-e2e", "interrupted"), what="the agent to park")
    assert parked["status"] == "interrupted", parked
    [question_id] = parked["pending"]
    status, headers, asked = http("GET", f"{stack.api}/questions/{question_id}")
    assert status == 200
    assert asked["question"]["args"] == {"customer": "c-s-e2e", "amount": 40}

    # An edit of the wrong type is a 422 naming the field, and changes nothing
    status, _, bad = http(
        "POST",
        f"{stack.api}/questions/{question_id}/reply",
        {"answer": {"action": "approve", "args": {"amount": "lots"}}},
        {"If-Match": headers["ETag"]},
    )
    assert (status, bad["field"]) == (422, "answer.args.amount"), bad

    status, _, body = http(
        "POST",
        f"{stack.api}/questions/{question_id}/reply",
        {"answer": {"action": "approve", "args": {"amount": 25}}},
        {"If-Match": headers["ETag"], "X-Wait-Principal": "e2e:carol"},
    )
    assert (status, body["status"]) == (202, "answered"), body

    done = eventually(lambda: thread_in(stack, "s-e2e", "done"), timeout=60, what="the agent to finish")
    assert done["status"] == "done", done
    assert done["output"]["output"] == '{"refunded": 25, "customer": "c-s-e2e"}'
    _, _, resumed = http("GET", f"{stack.api}/questions/{question_id}")
    assert resumed["status"] == "resumed"
    receipt = resumed["audit"]["receipt"]
    assert (receipt["ran"], receipt["args"]) == (True, {"customer": "c-s-e2e", "amount": 25})
