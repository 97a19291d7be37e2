"""The LangChain v1 example agent (``examples/middleware_agent.py``) synthesizes clean.

It rides on the bucket variant (``BUCKET_CONTEXT``: ``graph`` and ``graph_requirements`` name the
example and its requirements file), so cdk-nag and cfn-lint check it in ``test_nag_and_lint.py``
with every other variant; here: its layer, its import from the built asset, its input schema.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from infra.constants import REPO_ROOT
from infra.report import AssemblyReport, Function
from tests.infra.conftest import BUCKET_CONTEXT

if TYPE_CHECKING:
    from tests.infra.conftest import Synth

pytestmark = pytest.mark.infra


@pytest.fixture(scope="module")
def bucket_report(bucket_synth: Synth) -> AssemblyReport:
    return AssemblyReport.load(bucket_synth.outdir)


def _function(report: AssemblyReport, name: str) -> Function:
    (function,) = [f for f in report.functions if f.name == name]
    return function


def test_the_variant_names_the_example_and_its_requirements() -> None:
    assert BUCKET_CONTEXT["graph"] == "examples.middleware_agent:build_graph"
    assert BUCKET_CONTEXT["graph_requirements"] == "examples/middleware_agent_requirements.txt"


def test_langchain_lands_in_the_runner_graph_layer(bucket_report: AssemblyReport) -> None:
    runner = _function(bucket_report, "Runner")
    (graph,) = [layer for layer in runner.layers if layer.pip_layer == "graph"]
    assert (graph.path / "python" / "langchain" / "agents").is_dir()
    # At the version the example's requirements file pins.
    (pin,) = (REPO_ROOT / BUCKET_CONTEXT["graph_requirements"]).read_text().split()
    name, version = pin.split("==")
    dist_infos = [p.name for p in (graph.path / "python").glob(f"{name}-*.dist-info")]
    assert dist_infos == [f"{name}-{version}.dist-info"]
    assert (graph.path / "python" / "langgraph").is_dir()
    # The requirement is the graph layer's alone: the api's layers do not carry it.
    api = _function(bucket_report, "ApiFunction")
    assert not [layer for layer in api.layers if list((layer.path / "python").glob("langchain-*.dist-info"))]


def test_the_runner_imports_the_example_from_the_built_asset(bucket_report: AssemblyReport) -> None:
    runner = _function(bucket_report, "Runner")
    assert list((runner.path / "examples").glob("middleware_agent*.py*"))
    result = bucket_report.import_handler(runner)
    assert result.ok, result.output
    # The runner built the agent at init (as in Lambda), with the layer's own langchain.
    assert {"examples", "langchain", "langgraph"} <= set(result.modules)


def test_the_api_validates_input_against_the_agent_messages(bucket_report: AssemblyReport) -> None:
    api = _function(bucket_report, "ApiFunction")
    schema = json.loads((api.path / "graph_input" / "graph_input_schema.json").read_text())
    assert "messages" in schema["properties"]
    assert "messages" in schema.get("required", [])
