"""Compiled Python for the shipped assets, so a cold start never compiles a module.

Lambda mounts the function code and the layers read-only: an interpreter that finds no ``.pyc`` beside
a module compiles it on every cold start and cannot write the result. So every asset is compiled at
build time, by an interpreter of the runtime's Python version (the bytecode format changes with each
minor version, not with the CPU, so an x86-64 build serves the arm64 functions), with
``unchecked-hash`` invalidation: the interpreter loads the ``.pyc`` without comparing it with the
source's timestamp, which the zip upload does not keep anyway.

Pure Python (no ``aws_cdk``): the bundlers, the infra tests and ``make bench`` share it.

Examples
--------
>>> cache_tag("3.13")
'cpython-313'
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

# Set this to a python executable of the runtime's version when none is found on PATH or in pyenv.
PYTHON_ENV = "AGENT_WAIT_BYTECODE_PYTHON"


class NoMatchingInterpreterError(RuntimeError):
    """No interpreter of the runtime's Python version is available to compile the assets."""


def cache_tag(version: str) -> str:
    """The ``__pycache__`` tag of CPython ``version`` (``"3.13"`` → ``"cpython-313"``)."""
    return "cpython-" + version.replace(".", "")


def _version_of(python: str) -> str | None:
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def find_interpreter(version: str) -> str:
    """A CPython executable of ``version``: ``$AGENT_WAIT_BYTECODE_PYTHON``, this one, PATH, then pyenv.

    Raises
    ------
    NoMatchingInterpreterError
        None was found; the message says how to provide one.
    """
    candidates: list[str] = []
    if os.environ.get(PYTHON_ENV):
        candidates.append(os.environ[PYTHON_ENV])
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        candidates.append(sys.executable)
    on_path = shutil.which(f"python{version}")
    if on_path:
        candidates.append(on_path)
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates += [str(p) for p in sorted((pyenv_root / "versions").glob(f"{version}*/bin/python{version}"))]
    for candidate in candidates:
        if _version_of(candidate) == version:
            return candidate
    raise NoMatchingInterpreterError(
        f"no Python {version} interpreter to compile the Lambda assets with (looked at ${PYTHON_ENV}, "
        f"python{version} on PATH and pyenv's versions); install one (e.g. `pyenv install {version}`) "
        f"or point {PYTHON_ENV} at it"
    )


def compile_tree(root: Path, python: str, *, sourceless: bool = False) -> None:
    """Compile every ``.py`` under ``root`` with ``python``.

    By default each module gets an unchecked-hash ``__pycache__/<name>.<tag>.pyc`` beside its source.
    ``sourceless`` writes ``<name>.pyc`` in place of the source and deletes the source: the import
    system loads such a file directly, and the layer carries each module once instead of twice (the
    third-party layers do this; a traceback through them shows file and line, not the line's text).

    Files that do not compile (syntax of another Python version in some packages' tests) are left
    as they are, as pip itself does; :func:`missing_bytecode` lists them.
    """
    command = [python, "-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash"]
    subprocess.run(
        [*command, *(["-b"] if sourceless else []), str(root)],
        check=False,
        capture_output=True,
        timeout=600,
    )
    if sourceless:
        for source in sorted(root.rglob("*.py")):
            if source.with_suffix(".pyc").is_file():
                source.unlink()


def missing_bytecode(root: Path, version: str) -> list[Path]:
    """Every ``.py`` under ``root`` without a ``.pyc`` for ``version`` beside it (in ``__pycache__``)."""
    tag = cache_tag(version)
    return [
        path
        for path in sorted(root.rglob("*.py"))
        if not (path.parent / "__pycache__" / f"{path.stem}.{tag}.pyc").is_file()
    ]


def bytecode_version(pyc: Path) -> bytes:
    """The magic number a ``.pyc`` starts with (one per Python minor version)."""
    with pyc.open("rb") as handle:
        return handle.read(4)


def magic_number(python: str) -> bytes:
    """The bytecode magic number of the interpreter ``python``."""
    done = subprocess.run(
        [python, "-c", "import importlib.util, sys; sys.stdout.write(importlib.util.MAGIC_NUMBER.hex())"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return bytes.fromhex(done.stdout.strip())
