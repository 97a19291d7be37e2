"""``agent-wait local --graph ... --graph-source DIR``: the import path and its errors."""

from __future__ import annotations

import io
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest

from agent_wait_cli.commands import build_parser
from agent_wait_cli.local.graph_source import GraphSourceError, check_graph, put_first, resolve_graph_source
from agent_wait_cli.local_command import run_local

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def clean_path() -> Iterator[None]:
    saved, modules = list(sys.path), set(sys.modules)
    yield
    sys.path[:] = saved
    for name in set(sys.modules) - modules:
        del sys.modules[name]


def write_agent(root: Path, package: str, body: str) -> None:
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    (root / package / "graph.py").write_text(textwrap.dedent(body))


def test_the_graph_source_is_searched_first(tmp_path: Path, clean_path: None) -> None:
    write_agent(
        tmp_path / "src", "gs_first_agent", "def build_graph(checkpointer=None):\n    return 'mine'\n"
    )
    put_first([tmp_path / "src"])
    assert sys.path[0] == str(tmp_path / "src")
    assert check_graph("gs_first_agent.graph:build_graph", [tmp_path / "src"])() == "mine"


def test_a_missing_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(GraphSourceError, match=r"--graph-source .*nope: no such directory"):
        resolve_graph_source(tmp_path / "nope")
    (tmp_path / "file").write_text("")
    with pytest.raises(GraphSourceError, match="not a directory"):
        resolve_graph_source(tmp_path / "file")


def test_a_module_not_found_names_the_module_and_the_folders_searched(
    tmp_path: Path, clean_path: None
) -> None:
    put_first([tmp_path])
    with pytest.raises(GraphSourceError) as exc:
        check_graph("gs_absent_agent.graph:build_graph", [tmp_path, tmp_path / "other"])
    message = str(exc.value)
    assert "no module named 'gs_absent_agent'" in message
    assert str(tmp_path) in message and str(tmp_path / "other") in message


def test_a_missing_requirement_says_to_install_the_agents_requirements(
    tmp_path: Path, clean_path: None
) -> None:
    write_agent(tmp_path, "gs_needy_agent", "import gs_not_installed_pkg\n")
    put_first([tmp_path])
    with pytest.raises(GraphSourceError, match=r"needs 'gs_not_installed_pkg'.*pip install -r"):
        check_graph("gs_needy_agent.graph:build_graph", [tmp_path])


def test_a_missing_attribute_names_the_file(tmp_path: Path, clean_path: None) -> None:
    write_agent(tmp_path, "gs_attr_agent", "def other():\n    pass\n")
    put_first([tmp_path])
    with pytest.raises(GraphSourceError, match=r"gs_attr_agent/graph.py has no attribute 'build_graph'"):
        check_graph("gs_attr_agent.graph:build_graph", [tmp_path])


def test_an_import_that_raises_is_reported_in_one_sentence(tmp_path: Path, clean_path: None) -> None:
    write_agent(tmp_path, "gs_raising_agent", "raise RuntimeError('no MODEL_ID')\n")
    put_first([tmp_path])
    with pytest.raises(GraphSourceError, match="raised RuntimeError: no MODEL_ID"):
        check_graph("gs_raising_agent.graph:build_graph", [tmp_path])


def test_cli_refuses_a_missing_graph_source_before_starting_anything(tmp_path: Path) -> None:
    args = build_parser({}).parse_args(
        ["local", "--graph", "a.b:c", "--graph-source", str(tmp_path / "nope")]
    )
    out, err = io.StringIO(), io.StringIO()

    assert run_local(args, out, err) == 2
    assert err.getvalue() == f"agent-wait: --graph-source {tmp_path / 'nope'}: no such directory\n"
    assert out.getvalue() == ""
