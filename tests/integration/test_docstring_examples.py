"""Every ``Examples`` section in the code runs and shows what the code returns.

A docstring's example is documentation a newcomer copies: one that no longer holds misleads. Each
module of the library, the service, the CLI, the infrastructure and the benchmarks is imported and
its examples run as ``python -m doctest`` would (``# doctest: +SKIP`` marks those that need AWS or
a running stack; a few bind a server on 127.0.0.1, so these run with the integration tests). The
infrastructure's modules that build CDK constructs run theirs in a process of their own: importing
the CDK starts its Node process, which these workers must not.
"""

from __future__ import annotations

import doctest
import importlib
import re
import subprocess
import sys
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


def module_names(*, cdk: bool = False) -> list[str]:
    """The modules whose examples run here; ``cdk``: instead, the infrastructure's modules that
    import the CDK."""
    names = []
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if "__pycache__" in parts or path.name == "__main__.py":
                continue
            builds_constructs = package == "infra" and bool(
                _CDK_IMPORT.search(path.read_text(encoding="utf-8"))
            )
            if builds_constructs == cdk:
                names.append(".".join((package, *parts)).removesuffix(".__init__"))
    return names


def run_examples(name: str) -> doctest.TestResults:
    """Import module ``name`` and run its examples; failures are printed as doctest prints them."""
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(verbose=False)
    for test in doctest.DocTestFinder(exclude_empty=True).find(module, name):
        runner.run(test)
    return runner.summarize(verbose=False)


def test_every_package_is_searched() -> None:
    names = module_names()
    assert {"agent_wait.aws.dynamodb", "wait_service.ledger.questions", "bench.prices"} <= set(names)
    assert "infra.requirements" in names and "infra.stack" not in names
    assert len(names) > 150


@pytest.mark.parametrize("name", module_names())
def test_the_examples_of(name: str) -> None:
    result = run_examples(name)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} fail (output above)"


# Run in a process of its own, by ``python -c``: each CDK module's examples, then one line of counts.
_CDK_RUNNER = """
import sys
from tests.integration.test_docstring_examples import run_examples
failed = attempted = 0
for name in sys.argv[1:]:
    result = run_examples(name)
    failed, attempted = failed + result.failed, attempted + result.attempted
print(f"examples: {attempted} attempted, {failed} failed")
"""


def test_the_examples_of_the_modules_that_build_constructs() -> None:
    names = module_names(cdk=True)
    assert {"infra.stack", "infra.specs"} <= set(names)
    done = subprocess.run(
        [sys.executable, "-c", _CDK_RUNNER, *names],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counts = re.search(r"examples: (\d+) attempted, (\d+) failed", done.stdout)
    assert counts is not None, done.stdout[-3000:] + done.stderr[-3000:]
    attempted, failed = int(counts.group(1)), int(counts.group(2))
    assert attempted > 0
    assert failed == 0, done.stdout[-5000:]
