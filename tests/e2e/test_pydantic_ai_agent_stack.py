"""A Pydantic AI agent on the local stack (``--framework pydantic_ai``), answered through HTTP and the CLI.

``examples.pydantic_ai_agent`` defers its ``@wait`` tool; the runner publishes the question and
resumes the agent with the answer, its history kept in the checkpoint table. Each step is
awaited with ``eventually``, never a fixed sleep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import LocalProcess, eventually, http, run_cli, start_local

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.e2e

AGENT = "examples.pydantic_ai_agent:agent"


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalProcess]:
    local = start_local("--framework", "pydantic_ai", "--agent", AGENT)
    try:
        yield local
    finally:
        code = local.stop()
        assert code == 0, "\n".join(local.lines)


def thread_in(stack: LocalProcess, thread_id: str, status: str) -> dict[str, Any] | None:
    _, _, thread = http("GET", f"{stack.api}/threads/{thread_id}")
    return thread if thread.get("status") in (status, "failed") else None


def test_start_question_answer_done_with_the_receipt(stack: LocalProcess) -> None:
    assert "framework: pydantic_ai" in stack.lines

    # A start that is not the agent's input is refused before anything is queued
    status, _, refused = http("POST", f"{stack.api}/threads/p-e2e/runs", {"input": {"customer": "c-1"}})
    assert status == 422, refused

    status, _, _ = http(
        "POST", f"{stack.api}/threads/p-e2e/runs", {"input": {"prompt": "refund 40 to c-e2e"}}
    )
    assert status == 202
    parked = eventually(lambda: thread_in(stack, "p-e2e", "interrupted"), what="the agent to park")
    assert parked["status"] == "interrupted", parked
    [question_id] = parked["pending"]
    status, headers, asked = http("GET", f"{stack.api}/questions/{question_id}")
    assert status == 200
    assert (asked["question"]["function"], asked["question"]["args"]) == (
        "issue_refund",
        {"customer": "c-e2e", "amount": 40},
    )

    # An edit the tool's schema refuses is a 422 naming the field, and changes nothing
    status, _, bad = http(
        "POST",
        f"{stack.api}/questions/{question_id}/reply",
        {"answer": {"action": "approve", "args": {"amount": -1}}},
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

    done = eventually(lambda: thread_in(stack, "p-e2e", "done"), timeout=60, what="the agent to finish")
    assert done["status"] == "done", done
    assert done["output"]["output"] == 'issue_refund: {"refunded":25,"customer":"c-e2e"}'
    _, _, resumed = http("GET", f"{stack.api}/questions/{question_id}")
    assert resumed["status"] == "resumed"
    receipt = resumed["audit"]["receipt"]
    assert (receipt["ran"], receipt["args"]) == (True, {"customer": "c-e2e", "amount": 25})


def test_a_rejection_from_the_cli_denies_the_tool(stack: LocalProcess) -> None:
    status, _, _ = http("POST", f"{stack.api}/threads/p-cli/runs", {"input": {"prompt": "delete note n-9"}})
    assert status == 202
    [question_id] = eventually(lambda: thread_in(stack, "p-cli", "interrupted"), what="the question")[
        "pending"
    ]

    replied = run_cli("reply", question_id, "--reject", "--reason", "keep it", "--api", stack.api, check=True)
    assert "202 answered" in replied.stdout

    done = eventually(lambda: thread_in(stack, "p-cli", "done"), timeout=60, what="the agent to finish")
    assert done["output"]["output"] == "delete_note: keep it", done
