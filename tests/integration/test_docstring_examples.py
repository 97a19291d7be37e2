"""Every ``Examples`` section in the code runs and shows what the code returns.

A docstring's example is documentation a newcomer copies: one that no longer holds misleads. Each
module of the library, the service, the CLI, the infrastructure and the benchmarks is imported and
its examples run as ``python -m doctest`` would (``# doctest: +SKIP`` marks those that need AWS or
a running stack; a few bind a server on 127.0.0.1, so these run with the integration tests). The
infrastructure's modules that build CDK constructs are left to the tests that
synthesize the app: importing the CDK starts its Node process, which these workers must not.
"""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_CDK_IMPORT = re.compile(r"^\s*(from|import) (aws_cdk|constructs)\b", re.MULTILINE)
# Where each package's folder is, relative to the repository.
PACKAGES = {
    "agent_wait": ROOT / "layers" / "agent_wait" / "agent_wait",
    "wait_service": ROOT / "functions" / "wait_service",
    "agent_wait_cli": ROOT / "cli" / "agent_wait_cli",
    "infra": ROOT / "infra",
    "bench": ROOT / "bench",
}


def module_names() -> list[str]:
    names = []
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if "__pycache__" in parts or path.name == "__main__.py":
                continue
            if package == "infra" and _CDK_IMPORT.search(path.read_text(encoding="utf-8")):
                continue
            names.append(".".join((package, *parts)).removesuffix(".__init__"))
    return names


def test_every_package_is_searched() -> None:
    names = module_names()
    assert {"agent_wait.aws.dynamodb", "wait_service.ledger.questions", "bench.prices"} <= set(names)
    assert "infra.requirements" in names and "infra.stack" not in names
    assert len(names) > 150


@pytest.mark.parametrize("name", module_names())
def test_the_examples_of(name: str) -> None:
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(verbose=False)
    for test in doctest.DocTestFinder(exclude_empty=True).find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} fail (output above)"
