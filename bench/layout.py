"""The shipped asset layout, assembled as Lambda mounts it: the function's code and its merged layers.

Lambda unzips the function into ``/var/task`` and every layer into ``/opt`` (their ``python/`` folders
merge into ``/opt/python``), both read-only, and puts both on ``sys.path``. :func:`assemble` does the
same into a temporary folder with the same builders the CDK app uses (:mod:`infra.bundling`,
:mod:`infra.requirements`):

- ``target="host"``: third-party layers built for this interpreter, everything compiled by it, so the
  layout can be imported and timed here exactly as it is shipped;
- ``target="lambda"``: the deployed layers (cp313, the Lambda platform) and code compiled by the
  runtime's Python, for the sizes and the bytecode check.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from infra.bytecode import compile_tree, find_interpreter, missing_bytecode
from infra.constants import PYTHON_VERSION, REPO_ROOT
from infra.requirements import (
    AGENT_WAIT_EXCLUDE,
    AGENT_WAIT_SOURCES,
    LayerName,
    Target,
    build_layer,
    copy_tree,
    tree_size,
)

if TYPE_CHECKING:
    from pathlib import Path

Function = Literal["api", "runner"]
LAYERS: dict[Function, tuple[LayerName, ...]] = {"api": ("core",), "runner": ("core", "graph")}


@dataclass(frozen=True)
class Layout:
    """One function's ``/var/task`` and ``/opt`` in a folder of their own."""

    function: Function
    target: Target
    task: Path
    opt: Path

    @property
    def sys_path(self) -> list[str]:
        return [str(self.task), str(self.opt / "python")]

    @property
    def size(self) -> int:
        return tree_size(self.task) + tree_size(self.opt)

    def uncompiled(self) -> list[Path]:
        """Shipped ``.py`` files with no ``.pyc`` for the interpreter that will run them."""
        version = (
            PYTHON_VERSION if self.target == "lambda" else f"{sys.version_info[0]}.{sys.version_info[1]}"
        )
        return missing_bytecode(self.task, version) + missing_bytecode(self.opt, version)


def function_sources() -> dict[Function, dict[str, str]]:
    """The function assets' sources, read from the CDK app (in a subprocess: it starts jsii)."""
    code = (
        "import json, sys; from infra.functions import API_SOURCES, RUNNER_SOURCES;"
        "sys.stdout.write(json.dumps({'api': API_SOURCES, 'runner': RUNNER_SOURCES}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=120
    )
    sources: dict[Function, dict[str, str]] = json.loads(done.stdout)
    return sources


def _read_only(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def make_writable(root: Path) -> None:
    """Undo :func:`assemble`'s read-only bits so the folder can be deleted."""
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


def assemble(
    function: Function,
    target: Target,
    sources: dict[str, str],
    into: Path,
    *,
    extra: dict[str, str] | None = None,
) -> Layout:
    """Build ``function``'s layout under ``into`` (``extra`` adds repository folders to the task root)."""
    # infra.bundling loads the CDK, which starts a node process: only when a layout is built.
    from infra.bundling import copy_sources

    python = find_interpreter(PYTHON_VERSION) if target == "lambda" else sys.executable
    root = into / f"{function}-{target}"
    task, opt = root / "task", root / "opt"
    copy_sources(sources | (extra or {}), task)
    compile_tree(task, python)
    copy_sources(AGENT_WAIT_SOURCES, opt, AGENT_WAIT_EXCLUDE)
    compile_tree(opt / "python" / "agent_wait", python)
    for layer in LAYERS[function]:
        copy_tree(build_layer(layer, target) / "python", opt / "python")
    # Lambda's code folders are read-only; the interpreters below also run with -B (root ignores
    # permission bits), so nothing is ever written into the layout.
    _read_only(root)
    return Layout(function, target, task, opt)


def python_command(layout: Layout, script: str) -> list[str]:
    """A fresh interpreter with Lambda's view of the layout: ``-I -S -B``, the layout's path first."""
    prelude = f"import sys; sys.path[:0] = {layout.sys_path!r}\n"
    return [sys.executable, "-I", "-S", "-B", "-c", prelude + script]


def environment(extra: dict[str, str]) -> dict[str, str]:
    """A minimal environment (no PYTHONPATH, no venv) with fake credentials and ``extra``."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "POWERTOOLS_METRICS_NAMESPACE": "AgentWaitBench",
        **extra,
    }
