"""Each Lambda's init runs no garbage collection and freezes what it built.

A fresh interpreter imports the function's handler configured as in Lambda (fake credentials:
building clients calls no AWS API), with a callback counting the collector's runs. Before the init
ran with the collector off, the api's import started about a hundred collections, one of them over
every object (a tenth of its instructions); each later request's first collections walked what
the init had built.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.service.test_service_runner_cold import ENVIRONMENT

ROOT = Path(__file__).resolve().parents[3]

FUNCTIONS = ("api", "runner", "dispatcher", "lifecycle", "webhooks")


@pytest.mark.parametrize("function", FUNCTIONS)
def test_the_init_collects_nothing_and_freezes_what_it_built(function: str) -> None:
    code = (
        "import gc, json, sys\n"
        f"sys.path[:0] = [{str(ROOT / 'functions' / function)!r}, {str(ROOT)!r}]\n"
        # What a handler imports before its init phase (the standard library's typing and contextlib),
        # and its own bytecode, as Lambda's layout ships it: compiling the module is not its init.
        "import os, py_compile, typing, wait_service.init_phase\n"
        f"py_compile.compile({str(ROOT / 'functions' / function / 'handler.py')!r}, doraise=True)\n"
        # Counts start from zero: the few allocations before the handler's init phase cannot
        # reach the collector's threshold, whatever the interpreter allocated so far.
        "gc.collect()\n"
        "runs = []\n"
        "def count(phase, info):\n"
        "    if phase == 'start':\n"
        "        runs.append(info['generation'])\n"
        "gc.callbacks.append(count)\n"
        "import handler\n"
        "print(json.dumps({'runs': runs, 'enabled': gc.isenabled(), 'frozen': gc.get_freeze_count()}))\n"
    )
    environment = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=environment | ENVIRONMENT,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["runs"] == [], f"the {function}'s init started collections of generations {found['runs']}"
    assert found["enabled"], "the collector is off after the init"
    # Every module, class and client of the init: tens of thousands of objects.
    assert found["frozen"] > 20_000
