"""``agent-wait local`` serves a graph whose state is a ``typing.TypedDict`` on Python 3.11 too.

Pydantic wants ``typing_extensions.TypedDict`` before 3.12; the stack must neither refuse to start
nor take input the graph cannot use. Each step is awaited with ``eventually``, never a fixed sleep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import eventually, http, start_local

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.e2e

GRAPH = """
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class Order(TypedDict):
    customer: str
    amount: float


def build_graph(checkpointer=None):
    graph = StateGraph(Order)
    graph.add_node("double", lambda state: {"amount": state["amount"] * 2})
    graph.add_edge(START, "double")
    graph.add_edge("double", END)
    return graph.compile(checkpointer=checkpointer)
"""


def test_the_stack_starts_checks_input_and_runs(tmp_path: Path) -> None:
    (tmp_path / "typed_orders.py").write_text(GRAPH)
    local = start_local("--graph", "typed_orders:build_graph", "--graph-source", str(tmp_path), cwd=tmp_path)
    try:
        status, _, refused = http("POST", f"{local.api}/threads/t-bad/runs", {"input": {"customer": "c-1"}})
        assert (status, refused["field"]) == (422, "input.amount")

        status, _, _ = http(
            "POST", f"{local.api}/threads/t-ok/runs", {"input": {"customer": "c-1", "amount": 2}}
        )
        assert status == 202

        def done() -> Any:
            _, _, thread = http("GET", f"{local.api}/threads/t-ok")
            return thread if thread.get("status") in ("done", "failed") else None

        assert eventually(done, what="the run")["output"] == {"customer": "c-1", "amount": 4}
        assert not [line for line in local.lines if line.startswith("warning:")]
    finally:
        assert local.stop() == 0, "\n".join(local.lines)
