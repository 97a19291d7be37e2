"""The synth writes a user's graph input schema on the build host's Python, whatever the state type.

A state declared with ``typing.TypedDict`` is refused by pydantic before Python 3.12, and the build
host may run 3.11 while Lambda runs 3.13: the synth must neither stop nor ship a wrong schema.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from infra import constants
from infra.functions import graph_input_dir
from wait_service.runs.input_schema import INPUT_SCHEMA_FILE

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

TYPED = """
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class Refund(TypedDict):
    customer: str
    amount: float


def build_graph(checkpointer=None):
    graph = StateGraph(Refund)
    graph.add_node("noop", lambda state: {})
    graph.add_edge(START, "noop")
    graph.add_edge("noop", END)
    return graph.compile(checkpointer=checkpointer)
"""


def test_a_typing_typeddict_state_of_a_users_graph_gets_its_schema(tmp_path: Path) -> None:
    (tmp_path / "typed_refund_graph.py").write_text(TYPED)

    relative = graph_input_dir("typed_refund_graph:build_graph", source=tmp_path)

    schema = json.loads((constants.REPO_ROOT / relative / INPUT_SCHEMA_FILE).read_text())
    assert schema["required"] == ["customer", "amount"]


def test_an_unbuildable_schema_is_one_warning_line_and_the_synth_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    held = TYPED.replace("from typing import TypedDict", "import threading\nfrom typing import TypedDict")
    (tmp_path / "held_graph.py").write_text(held.replace("amount: float", "lock: threading.Lock"))

    relative = graph_input_dir("held_graph:build_graph", source=tmp_path)

    assert json.loads((constants.REPO_ROOT / relative / INPUT_SCHEMA_FILE).read_text()) is None
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("warning: the input schema of held_graph:build_graph cannot be built")
