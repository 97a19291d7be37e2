"""``agent-wait local --checkpointer dynamodb``: the local stack on langgraph-checkpoint-dynamodb's tables."""

from __future__ import annotations

import os
import subprocess
import uuid
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from e2e_support import ROOT, cli_path, eventually, http, start_local

from tests.checkpoint_dynamodb_schema import package_key_schemas
from wait_service.answer_limits import MAX_ANSWER_BYTES_WITHOUT_OFFLOAD

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.e2e


def _thread(api: str, thread_id: str, *statuses: str) -> dict[str, Any] | None:
    status, _, body = http("GET", f"{api}/threads/{thread_id}")
    return body if status == 200 and body.get("status") in statuses else None


def test_local_dynamodb_checkpointer_parks_and_resumes() -> None:
    local = start_local("--checkpointer", "dynamodb")
    try:
        assert "checkpointer: dynamodb" in local.lines
        # The tables the stack created are keyed as the package reads them; there is no bucket.
        dynamodb = boto3.client("dynamodb", endpoint_url=local.info["moto"], region_name="us-east-1")
        keys = {
            name.removeprefix("agent-wait-"): [
                (k["AttributeName"], k["KeyType"])
                for k in dynamodb.describe_table(TableName=name)["Table"]["KeySchema"]
            ]
            for name in dynamodb.list_tables()["TableNames"]
            if "checkpoint" in name
        }
        package = package_key_schemas()
        assert keys == {"checkpoints": package["checkpoints"], "checkpoint-writes": package["writes"]}
        s3 = boto3.client("s3", endpoint_url=local.info["moto"], region_name="us-east-1")
        assert s3.list_buckets()["Buckets"] == []

        # A thread parks, is answered and resumes to done over the api.
        api, thread_id = local.api, f"e2e-ddb-{uuid.uuid4().hex[:6]}"
        status, _, _ = http(
            "POST", f"{api}/threads/{thread_id}/runs", {"input": {"customer": "c-17", "amount": 40}}
        )
        assert status == 202
        parked = eventually(lambda: _thread(api, thread_id, "interrupted", "failed"), what="the question")
        assert parked["status"] == "interrupted", parked
        [question_id] = parked["pending"]
        _, headers, _ = http("GET", f"{api}/questions/{question_id}")
        # An answer over the limit without offload is refused before it is recorded.
        status, _, refused = http(
            "POST",
            f"{api}/questions/{question_id}/reply",
            {"answer": {"action": "approve", "note": "n" * MAX_ANSWER_BYTES_WITHOUT_OFFLOAD}},
            {"If-Match": headers["ETag"]},
        )
        assert (status, refused["error"]) == (413, "payload_too_large")
        status, _, _ = http(
            "POST",
            f"{api}/questions/{question_id}/reply",
            {"answer": {"action": "approve"}},
            {"If-Match": headers["ETag"]},
        )
        assert status == 202
        done = eventually(lambda: _thread(api, thread_id, "done", "failed"), what="the result")
        assert (done["status"], done["output"]["refund"]["amount"]) == ("done", 40), done
    finally:
        assert local.stop() == 0, "\n".join(local.lines)


SUBGRAPH_AGENT = """
from typing_extensions import TypedDict
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    topic: str
    answer: str


def ask(state: State) -> State:
    return {"answer": str(interrupt({"prompt": state["topic"]}))}


def build_graph(checkpointer=None):
    inner = StateGraph(State)
    inner.add_node("ask", ask)
    inner.add_edge(START, "ask")
    inner.add_edge("ask", END)
    graph = StateGraph(State)
    graph.add_node("review", inner.compile())
    graph.add_edge(START, "review")
    graph.add_edge("review", END)
    return graph.compile(checkpointer=checkpointer)
"""


def test_local_dynamodb_refuses_a_graph_with_a_checkpointed_subgraph(tmp_path: Path) -> None:
    (tmp_path / "sub_agent.py").write_text(SUBGRAPH_AGENT)
    env = os.environ | {"PYTHONPATH": str(tmp_path)}
    argv = [
        cli_path(),
        "local",
        "--port",
        "0",
        "--checkpointer",
        "dynamodb",
        "--graph",
        "sub_agent:build_graph",
    ]

    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    assert done.returncode == 1, done.stdout + done.stderr
    assert "checkpointer=dynamodb cannot run graph sub_agent:build_graph: node(s) review" in done.stderr
    assert "Deploy with checkpointer=aws" in done.stderr
