"""Dependencies point one way: ``infra`` → ``wait_service`` → ``agent_wait``.

The library (``layers/agent_wait``) is what agents import and what the ``agent_wait`` layer ships,
so it never imports the service; the service, which the Lambdas ship, never imports the operator
CLI and local stack (``cli/agent_wait_cli``) or the emulation it runs on (moto).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "layers" / "agent_wait" / "agent_wait"
SERVICE = ROOT / "functions"


def imported_roots(folder: Path) -> dict[str, set[str]]:
    """Each module under ``folder`` → the top-level packages it imports (at any depth, lazily or not)."""
    found: dict[str, set[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        roots: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                roots |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                roots.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = roots
    return found


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        (LIBRARY, {"wait_service", "agent_wait_cli", "infra", "moto"}),
        (SERVICE, {"agent_wait_cli", "infra", "moto", "pytest"}),
    ],
    ids=["library", "service"],
)
def test_dependencies_point_one_way(folder: Path, forbidden: set[str]) -> None:
    offenders = {module: roots & forbidden for module, roots in imported_roots(folder).items()}
    assert {module: bad for module, bad in offenders.items() if bad} == {}


def test_the_scan_sees_imports() -> None:
    # Not vacuous: the CLI does import the service and the library.
    roots = set().union(*imported_roots(ROOT / "cli" / "agent_wait_cli").values())
    assert {"wait_service", "agent_wait"} <= roots


PACKAGES = {
    "agent_wait": LIBRARY,
    "wait_service": SERVICE / "wait_service",
    "agent_wait_cli": ROOT / "cli" / "agent_wait_cli",
}


def module_name(package: str, folder: Path, path: Path) -> str:
    parts = [package, *path.relative_to(folder).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: str, folder: Path) -> dict[str, set[str]]:
    """Module → the modules of the same package it imports, at any depth, for typing only or not (a
    ``from a import b`` names ``a.b`` when that is a module, else ``a``)."""
    paths = {module_name(package, folder, path): path for path in sorted(folder.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        edges: set[str] = set()
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".")
                    anchor = anchor if is_package else anchor[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base
                    for alias in node.names
                ]
            else:
                continue
            edges |= {target for target in targets if target in paths and target != name}
        graph[name] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_circles(package: str) -> None:
    assert circles(import_graph(package, PACKAGES[package])) == []


def test_the_circle_check_finds_a_circle() -> None:
    # Not vacuous: two modules importing each other, and a longer ring, are reported.
    assert circles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}) == [
        ["a", "b"],
        ["c", "d", "e"],
    ]
    graph = import_graph("wait_service", PACKAGES["wait_service"])
    assert "wait_service.ledger" in graph["wait_service.runs.runner"]


# The service's subpackages, top to bottom: each may import those below it, never one above
# (the picture in docs/internals.md). Modules at the top level of ``wait_service`` are the bottom.
LAYERS = ("http", "stream", "runs", "lifecycle", "channels", "answers", "ledger", "")


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else ""


def runtime_imports(path: Path) -> set[str]:
    """The modules ``path`` imports when it runs: every import but those under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for statement in node.body
        for child in ast.walk(statement)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return found


def upward_imports(folder: Path) -> list[str]:
    """Every ``module -> module`` import of the service that points up its layers."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        name = module_name("wait_service", folder, path)
        for target in sorted(runtime_imports(path)):
            if not target.startswith("wait_service.") or layer_of(target) == layer_of(name):
                continue
            if LAYERS.index(layer_of(target)) < LAYERS.index(layer_of(name)):
                found.append(f"{name} -> {target}")
    return found


def test_the_service_subpackages_import_only_downwards() -> None:
    assert upward_imports(PACKAGES["wait_service"]) == []


def test_the_layer_check_finds_an_upward_import(tmp_path: Path) -> None:
    # Not vacuous: a ledger module importing the http api is reported; a typing-only one is not.
    (tmp_path / "ledger").mkdir()
    (tmp_path / "ledger" / "table.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from wait_service.http.api import WaitApi\n"
        "if TYPE_CHECKING:\n"
        "    from wait_service.runs.runner import RunnerService\n"
    )
    assert upward_imports(tmp_path) == [
        "wait_service.ledger.table -> wait_service.http.api",
        "wait_service.ledger.table -> wait_service.http.api.WaitApi",
    ]


# No class of the service grows past this many lines: a longer one does several things, and is
# split by responsibility into collaborating classes (``RunnerService``'s parts under ``runs/``, the
# api's route groups under ``http/``).
MAX_CLASS_LINES = 260


def long_classes(folder: Path, limit: int = MAX_CLASS_LINES) -> dict[str, int]:
    """Every class under ``folder`` longer than ``limit`` lines (``path:Class`` → its length)."""
    found: dict[str, int] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    found[f"{path.relative_to(folder).as_posix()}:{node.name}"] = length
    return found


def test_no_class_of_the_service_is_too_long() -> None:
    assert long_classes(SERVICE) == {}, f"classes over {MAX_CLASS_LINES} lines: split them by responsibility"


def test_the_length_check_finds_a_long_class(tmp_path: Path) -> None:
    # Not vacuous: a class one line over the limit is reported with its length; one at it is not.
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_CLASS_LINES - 1))
    (tmp_path / "long.py").write_text(f"class Long:\n{body}\n    y = 0\n\n\nclass Fits:\n{body}\n")
    assert long_classes(tmp_path) == {"long.py:Long": MAX_CLASS_LINES + 1}
