"""The built assets: layer contents and sizes, and the handlers importing from them as in Lambda.

The deployed third-party layers hold cp313 manylinux wheels that this host's Python cannot import, so
the import test uses copies of those layers built for the host interpreter from the same pinned
requirements (``infra.requirements.build_layer(..., "host")``), together with the built function
assets and the built ``agent_wait`` layer, in a fresh ``python -I -S`` (no site-packages). It proves
that the assets carry every first-party module the handlers import, that the layers carry every
third-party one, and that the api imports without LangGraph; the wheel tags themselves are checked
separately against the Lambda platform.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from infra import constants
from infra.bytecode import cache_tag, find_interpreter, magic_number, missing_bytecode
from infra.report import LAMBDA_UNZIPPED_LIMIT, SIZE_BUDGETS, AssemblyReport, main
from infra.requirements import BOTOCORE_SERVICES

if TYPE_CHECKING:
    from pathlib import Path

    from tests.infra.conftest import Synth

pytestmark = pytest.mark.infra


@pytest.fixture(scope="module")
def report(default_synth: Synth) -> AssemblyReport:
    return AssemblyReport.load(default_synth.outdir)


def _function(report: AssemblyReport, name: str) -> object:
    return next(f for f in report.functions if f.name == name)


def test_api_handler_imports_from_the_built_assets_without_langgraph(report: AssemblyReport) -> None:
    api = next(f for f in report.functions if f.name == "ApiFunction")
    assert [layer.display_name for layer in api.layers] == ["Layers/Core/Code", "Layers/AgentWait/Code"]
    result = report.import_handler(api)
    assert result.ok, result.output
    assert "langgraph" not in result.modules
    assert {"handler", "wait_service", "agent_wait", "aws_lambda_powertools", "pydantic"} <= set(
        result.modules
    )


def test_dispatcher_handler_imports_from_the_built_assets_without_langgraph(report: AssemblyReport) -> None:
    dispatcher = next(f for f in report.functions if f.name == "Dispatcher")
    assert [layer.display_name for layer in dispatcher.layers] == [
        "Layers/Core/Code",
        "Layers/AgentWait/Code",
    ]
    result = report.import_handler(dispatcher)
    assert result.ok, result.output
    assert "langgraph" not in result.modules
    assert {"handler", "wait_service", "aws_lambda_powertools"} <= set(result.modules)


def test_runner_handler_imports_from_the_built_assets(report: AssemblyReport) -> None:
    runner = next(f for f in report.functions if f.name == "Runner")
    result = report.import_handler(runner)
    assert result.ok, result.output
    assert {"handler", "wait_service", "agent_wait", "langgraph"} <= set(result.modules)


def test_import_check_fails_when_a_layer_is_missing(report: AssemblyReport) -> None:
    # Without the graph layer the runner cannot import: the check above is not vacuous.
    runner = next(f for f in report.functions if f.name == "Runner")
    runner.layers = [layer for layer in runner.layers if layer.pip_layer != "graph"]
    result = report.import_handler(runner)
    assert not result.ok
    assert "ModuleNotFoundError" in result.output


def test_function_assets_hold_what_internals_md_says(report: AssemblyReport) -> None:
    api = next(f for f in report.functions if f.name == "ApiFunction")
    runner = next(f for f in report.functions if f.name == "Runner")
    assert (api.path / "handler.py").is_file() and (api.path / "wait_service" / "resources.py").is_file()
    assert not (api.path / "examples").exists()
    assert json.loads((api.path / "graph_input" / "graph_input_schema.json").read_text())["required"] == [
        "customer",
        "amount",
    ]
    assert (runner.path / "handler.py").is_file() and (runner.path / "wait_service").is_dir()
    assert (runner.path / "examples").is_dir()
    # Only bytecode for the runtime: nothing the build host's interpreter left behind.
    tags = {pyc.name.split(".")[-2] for pyc in api.path.rglob("__pycache__/*.pyc")}
    assert tags == {cache_tag(constants.PYTHON_VERSION)}


def _pyc_header(pyc: Path) -> tuple[bytes, int]:
    with pyc.open("rb") as handle:
        header = handle.read(8)
    return header[:4], int.from_bytes(header[4:8], "little")


def test_every_shipped_module_is_compiled_for_the_runtime_with_unchecked_hashes(
    report: AssemblyReport,
) -> None:
    magic = magic_number(find_interpreter(constants.PYTHON_VERSION))
    folders = [f.path for f in report.functions] + [layer.path for layer in report.layers]
    for folder in folders:
        assert missing_bytecode(folder, constants.PYTHON_VERSION) == [], folder
        pycs = list(folder.rglob("*.pyc"))
        assert pycs, folder
        for pyc in pycs[:: max(1, len(pycs) // 50)]:
            # 0b01: hash-based, source not checked, so the zip's timestamps cannot invalidate it.
            assert _pyc_header(pyc) == (magic, 0b01), pyc
    for layer in report.layers:
        if layer.pip_layer is not None:
            # Third-party modules ship as bytecode alone (each module once, not twice).
            assert not list((layer.path / "python").rglob("*.py")), layer.display_name


def test_functions_fit_their_size_budgets(report: AssemblyReport) -> None:
    sizes = {f.name: f.total_size for f in report.functions}
    assert set(SIZE_BUDGETS) <= set(sizes)
    for name, budget in SIZE_BUDGETS.items():
        assert sizes[name] <= budget, f"{name}: {sizes[name] / 2**20:.1f} MiB > {budget / 2**20:.0f} MiB"


def test_layers_hold_no_dead_weight(report: AssemblyReport) -> None:
    core = next(layer for layer in report.layers if layer.pip_layer == "core").path / "python"
    graph = next(layer for layer in report.layers if layer.pip_layer == "graph").path / "python"
    services = {p.name for p in (core / "botocore" / "data").iterdir() if p.is_dir()}
    assert services == set(BOTOCORE_SERVICES)
    assert not list((graph / "zstandard").glob("*cffi*"))
    assert not list((graph / "yaml").glob("_yaml.*.so")) and not (graph / "_yaml").exists()
    assert (graph / "yaml" / "__init__.pyc").is_file()  # pure-Python yaml stays importable


def test_assets_ship_no_local_stack_cli_or_test_code(report: AssemblyReport) -> None:
    layer = next(layer for layer in report.layers if layer.display_name == "Layers/AgentWait/Code")
    package = layer.path / "python" / "agent_wait"
    assert (package / "__init__.py").is_file()
    assert not (package / "testing.py").exists()
    folders = [f.path for f in report.functions] + [layer.path for layer in report.layers]
    for folder in folders:
        for forbidden in ("moto", "agent_wait_cli", "duckdb"):
            assert not list(folder.rglob(forbidden)), f"{folder.name} ships {forbidden}"
        for top_level in ("tests", "pytest", "_pytest"):
            assert not (folder / top_level).exists() and not (folder / "python" / top_level).exists()
        assert not list(folder.rglob("demo.py")), f"{folder.name} ships the local demo"


def test_third_party_layers_hold_wheels_for_the_lambda_platform(report: AssemblyReport) -> None:
    arch = "aarch64" if constants.ARCHITECTURE == "arm64" else "x86_64"
    tag = f"cpython-{constants.PYTHON_VERSION.replace('.', '')}-{arch}-linux-gnu"
    core = next(layer for layer in report.layers if layer.pip_layer == "core")
    graph = next(layer for layer in report.layers if layer.pip_layer == "graph")
    extensions = list((core.path / "python").rglob("*.so"))
    assert extensions and all(tag in so.name or ".abi3." in so.name for so in extensions), extensions[:5]
    assert (core.path / "python" / "pydantic_core").is_dir()
    assert (graph.path / "python" / "langgraph").is_dir()
    # No distribution twice: the graph layer drops what core already has.
    core_dists = {p.name for p in (core.path / "python").glob("*.dist-info")}
    graph_dists = {p.name for p in (graph.path / "python").glob("*.dist-info")}
    assert core_dists & graph_dists == set()
    assert not (graph.path / "python" / "pydantic").exists()
    assert not (core.path / "python" / "bin").exists()


def test_every_function_fits_lambdas_unzipped_limit(report: AssemblyReport) -> None:
    for function in report.functions:
        assert 0 < function.total_size < LAMBDA_UNZIPPED_LIMIT, function.name


def test_report_prints_layer_sizes_and_import_results(
    default_synth: Synth, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(default_synth.outdir)]) == 0
    out = capsys.readouterr().out
    assert "Layers/Core" in out and "Layers/Graph" in out and " MB" in out
    assert "ApiFunction            ok (no langgraph)" in out
    assert "Runner                 ok (imports langgraph, graph examples.refund_agent:build_graph)" in out
