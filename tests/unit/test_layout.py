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
