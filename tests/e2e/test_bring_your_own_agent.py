"""A user's own agent on the local stack, and async-mode questions answered over HTTP."""

from __future__ import annotations

import subprocess
import textwrap
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import ROOT, cli_path, eventually, http, start_local

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.e2e

# A user's agent: its own package, outside the project, with its own module layout.
USER_AGENT = """
from typing import Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from agent_wait import approval
from agent_wait.langgraph import wait


class TicketState(TypedDict, total=False):
    ticket: str
    closed: Any


@wait(approval())
def close_ticket(ticket: str) -> str:
    return f"closed {ticket}"


def close(state: TicketState) -> TicketState:
    return {"closed": close_ticket(state["ticket"])}


def build_graph(checkpointer=None):
    graph = StateGraph(TicketState)
    graph.add_node("close", close)
    graph.add_edge(START, "close")
    graph.add_edge("close", END)
    return graph.compile(checkpointer=checkpointer)
"""


def _thread(api: str, thread_id: str, *statuses: str) -> dict[str, Any] | None:
    status, _, body = http("GET", f"{api}/threads/{thread_id}")
    return body if status == 200 and body.get("status") in statuses else None


def _answer(api: str, question_id: str, answer: Any) -> None:
    status, headers, _ = http("GET", f"{api}/questions/{question_id}")
    assert status == 200
    status, _, reply = http(
        "POST",
        f"{api}/questions/{question_id}/reply",
        {"answer": answer},
        {"If-Match": headers["ETag"], "X-Wait-Principal": "e2e:carol"},
    )
    assert (status, reply["status"]) == (202, "answered"), reply


def test_a_user_agent_from_its_own_folder_parks_and_resumes(tmp_path: Path) -> None:
    # Given an agent package in a folder of its own, and a working directory outside the project
    source = tmp_path / "agent-src"
    (source / "acme_tickets").mkdir(parents=True)
    (source / "acme_tickets" / "__init__.py").write_text("")
    (source / "acme_tickets" / "graph.py").write_text(textwrap.dedent(USER_AGENT))

    local = start_local(
        "--graph", "acme_tickets.graph:build_graph", "--graph-source", str(source), cwd=tmp_path
    )
    try:
        assert f"graph source: {source}" in local.lines
        api, thread_id = local.api, f"e2e-byoa-{uuid.uuid4().hex[:6]}"
        status, _, _ = http("POST", f"{api}/threads/{thread_id}/runs", {"input": {"ticket": "T-9"}})
        assert status == 202

        parked = eventually(lambda: _thread(api, thread_id, "interrupted", "failed"), what="the question")
        assert parked["status"] == "interrupted", parked
        [question_id] = parked["pending"]
        _answer(api, question_id, {"action": "approve"})

        done = eventually(lambda: _thread(api, thread_id, "done", "failed"), what="the result")
        assert (done["status"], done["output"]["closed"]) == ("done", "closed T-9")
    finally:
        assert local.stop() == 0, "\n".join(local.lines)


def test_a_graph_module_not_found_is_one_sentence_naming_where_it_looked(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            cli_path(),
            "local",
            "--port",
            "0",
            "--graph",
            "acme_missing.graph:build_graph",
            "--graph-source",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "no module named 'acme_missing'" in result.stderr and str(tmp_path) in result.stderr
    assert "Traceback" not in result.stderr


def test_an_async_question_is_answered_over_http_by_a_new_run() -> None:
    local = start_local("--graph", "examples.async_agent:build_graph")
    try:
        api, thread_id = local.api, f"e2e-async-{uuid.uuid4().hex[:6]}"
        status, _, _ = http("POST", f"{api}/threads/{thread_id}/runs", {"input": {"audience": "all"}})
        assert status == 202

        # The run does not park: it ends with the send pending, and the question is in the ledger
        first = eventually(lambda: _thread(api, thread_id, "done", "failed"), what="the first run")
        assert first["status"] == "done" and first["output"]["send"]["status"] == "pending_approval"
        question_id = first["output"]["send"]["question_id"]
        status, _, listed = http("GET", f"{api}/questions?thread_id={thread_id}")
        assert [item["question_id"] for item in listed["items"]] == [question_id]

        # When it is answered, a new run carries the answer and the thread finishes with it
        _answer(api, question_id, {"action": "approve", "args": {"audience": "vip"}})
        done = eventually(
            lambda: (
                (t := _thread(api, thread_id, "done", "failed"))
                and t["output"].get("outcome") != first["output"]["outcome"]
                and t
            ),
            what="the answer's run",
        )
        assert done["output"]["outcome"] == "sent to vip (approved by e2e:carol)"
        status, _, question = http("GET", f"{api}/questions/{question_id}")
        assert question["status"] == "resumed"
    finally:
        assert local.stop() == 0, "\n".join(local.lines)


def test_the_real_model_example_drafts_offline_parks_and_resumes() -> None:
    """On the local stack the support agent drafts with the fake model (Bedrock is not there)."""
    from examples.support_reply.support_reply_agent.model import FAKE_DRAFT

    # As docs/your-own-agent.md runs it: the example's folder is the graph source, as it is deployed.
    local = start_local(
        "--graph", "support_reply_agent.graph:build_graph", "--graph-source", "examples/support_reply"
    )
    try:
        api, thread_id = local.api, f"e2e-model-{uuid.uuid4().hex[:6]}"
        run = {"input": {"customer": "c-17", "message": "My parcel is late."}}
        status, _, _ = http("POST", f"{api}/threads/{thread_id}/runs", run)
        assert status == 202

        parked = eventually(lambda: _thread(api, thread_id, "interrupted", "failed"), what="the draft")
        assert parked["status"] == "interrupted", parked
        [question_id] = parked["pending"]
        status, _, question = http("GET", f"{api}/questions/{question_id}")
        assert question["question"]["args"] == {"customer": "c-17", "text": FAKE_DRAFT}
        _answer(api, question_id, {"action": "approve", "args": {"text": "It ships today."}})

        done = eventually(lambda: _thread(api, thread_id, "done", "failed"), what="the sent reply")
        assert done["output"]["sent"] == {"customer": "c-17", "text": "It ships today."}
    finally:
        assert local.stop() == 0, "\n".join(local.lines)
