"""A state declared with ``typing.TypedDict`` gets its input schema on the build host's Python too.

Pydantic refuses ``typing.TypedDict`` before Python 3.12 ("Please use `typing_extensions.TypedDict`
instead of `typing.TypedDict` on Python < 3.12"); the build host may run 3.11 while Lambda runs 3.13.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from service_events import ROOT

from agent_wait.errors import InputInvalidError
from wait_service.runs.input_schema import (
    INPUT_SCHEMA_FILE,
    check_input,
    generate_input_schema,
    read_input_schema,
    write_input_schema,
)
from wait_service.runs.runner import _schema_of

if TYPE_CHECKING:
    from pathlib import Path

STATE = '''
from __future__ import annotations

import operator
from typing import Annotated, Literal, NotRequired, Optional

from {module} import TypedDict
from langgraph.graph import END, START, StateGraph


class Line(TypedDict):
    sku: str
    qty: int


class Refund(TypedDict):
    """A refund to approve."""

    customer: str
    amount: float
    lines: Annotated[list[Line], operator.add]
    note: NotRequired[Optional[str]]
    kind: Literal["full", "partial"] | None


def build_graph(checkpointer: object = None) -> object:
    graph = StateGraph(Refund)
    graph.add_node("noop", lambda state: {{}})
    graph.add_edge(START, "noop")
    graph.add_edge("noop", END)
    return graph.compile(checkpointer=checkpointer)
'''

UNBUILDABLE = """
import threading
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class Held(TypedDict):
    lock: threading.Lock


def build_graph(checkpointer: object = None) -> object:
    graph = StateGraph(Held)
    graph.add_node("noop", lambda state: {})
    graph.add_edge(START, "noop")
    graph.add_edge("noop", END)
    return graph.compile(checkpointer=checkpointer)
"""


@pytest.fixture
def graphs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "typing_state_graph.py").write_text(STATE.format(module="typing"))
    (tmp_path / "extensions_state_graph.py").write_text(STATE.format(module="typing_extensions"))
    (tmp_path / "unbuildable_state_graph.py").write_text(UNBUILDABLE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_typing_typeddict_state_gets_the_schema_pydantic_builds_for_the_portable_one(graphs: Path) -> None:
    schema = generate_input_schema("typing_state_graph:build_graph")

    assert schema == generate_input_schema("extensions_state_graph:build_graph")
    assert schema is not None
    assert schema["required"] == ["customer", "amount", "lines", "kind"]
    assert schema["$defs"]["Line"]["required"] == ["sku", "qty"]
    assert schema["description"] == "A refund to approve."


def test_the_schema_checks_run_input(graphs: Path) -> None:
    schema = generate_input_schema("typing_state_graph:build_graph")
    check_input({"customer": "c-17", "amount": 4.5, "lines": [{"sku": "a", "qty": 1}], "kind": None}, schema)

    with pytest.raises(InputInvalidError, match=r"input\.lines\.0\.qty"):
        check_input({"customer": "c", "amount": 1, "lines": [{"sku": "a", "qty": "x"}], "kind": None}, schema)


def test_the_runner_builds_it_as_well(graphs: Path) -> None:
    from wait_service.runs.graph import load_graph

    schema = _schema_of(load_graph("typing_state_graph:build_graph", None))

    assert schema is not None
    assert schema["title"] == "Refund"


def test_a_schema_that_cannot_be_built_leaves_input_unchecked_after_one_warning_line(
    graphs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_input_schema("unbuildable_state_graph:build_graph", graphs / INPUT_SCHEMA_FILE)

    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith("warning: the input schema of unbuildable_state_graph:build_graph cannot be built")
    assert "run input is not checked" in err
    assert json.loads(path.read_text()) is None
    assert read_input_schema(path) is None
    check_input({"anything": 1}, read_input_schema(path))


def test_the_generator_module_writes_null_and_exits_zero(graphs: Path) -> None:
    out = graphs / "schema.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "wait_service.runs.input_schema",
            "unbuildable_state_graph:build_graph",
            str(out),
        ],
        cwd=graphs,
        env={"PYTHONPATH": f"{graphs}:{ROOT}:{ROOT / 'functions'}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stderr.count("\n") == 1
    assert json.loads(out.read_text()) is None
