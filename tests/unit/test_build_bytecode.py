"""The build's bytecode and trimming steps, on small trees made here (no network, no pip)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from infra.bytecode import (
    PYTHON_ENV,
    NoMatchingInterpreterError,
    cache_tag,
    compile_tree,
    find_interpreter,
    magic_number,
    missing_bytecode,
)
from infra.requirements import BOTOCORE_SERVICES, trim_layer

if TYPE_CHECKING:
    from pathlib import Path

HERE = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _tree(root: Path) -> None:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("VALUE = 41\n")
    (root / "pkg" / "mod.py").write_text("from pkg import VALUE\nANSWER = VALUE + 1\n")
    (root / "broken.py").write_text("def (:\n")  # does not compile: left as it is


def _import_answer(root: Path) -> str:
    code = f"import sys; sys.path.insert(0, {str(root)!r}); import pkg.mod as m; print(m.ANSWER, m.__file__)"
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", code], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_compile_tree_writes_unchecked_hash_pyc_beside_the_sources(tmp_path: Path) -> None:
    _tree(tmp_path)
    compile_tree(tmp_path, sys.executable)

    pyc = tmp_path / "pkg" / "__pycache__" / f"mod.{cache_tag(HERE)}.pyc"
    header = pyc.read_bytes()[:8]
    assert header[:4] == magic_number(sys.executable)
    assert int.from_bytes(header[4:8], "little") == 0b01  # hash-based, source never checked
    assert missing_bytecode(tmp_path, HERE) == [tmp_path / "broken.py"]
    assert _import_answer(tmp_path).startswith("42 ")


def test_sourceless_compile_ships_each_module_once_and_it_still_imports(tmp_path: Path) -> None:
    _tree(tmp_path)
    compile_tree(tmp_path, sys.executable, sourceless=True)

    assert sorted(p.name for p in (tmp_path / "pkg").iterdir()) == ["__init__.pyc", "mod.pyc"]
    assert (tmp_path / "broken.py").is_file()  # what does not compile is kept, and listed
    answer, path = _import_answer(tmp_path).split()
    assert answer == "42" and path.endswith("mod.pyc")


def test_find_interpreter_takes_the_named_one_and_refuses_a_wrong_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(PYTHON_ENV, sys.executable)
    assert find_interpreter(HERE) == sys.executable
    monkeypatch.setenv("PATH", "")
    monkeypatch.setenv("PYENV_ROOT", "/nonexistent")
    with pytest.raises(NoMatchingInterpreterError, match=PYTHON_ENV):
        find_interpreter("2.1")


def test_trim_layer_keeps_the_services_used_and_drops_dead_weight(tmp_path: Path) -> None:
    data = tmp_path / "botocore" / "data"
    for service in (*BOTOCORE_SERVICES, "ec2", "sagemaker"):
        (data / service / "2020-01-01").mkdir(parents=True)
        (data / service / "2020-01-01" / "service-2.json.gz").write_bytes(b"x")
    endpoints = {"partitions": [{"partition": "aws", "regions": {"us-east-1": {}}, "services": {}}]}
    endpoints["partitions"][0]["services"] = {"sqs": {"endpoints": {}}, "ec2": {"endpoints": {}}}
    (data / "endpoints.json").write_text(json.dumps(endpoints))
    (tmp_path / "zstandard").mkdir()
    for name in ("__init__.py", "backend_cffi.py", "_cffi.cpython-313-aarch64-linux-gnu.so", "backend_c.so"):
        (tmp_path / "zstandard" / name).write_bytes(b"x")
    (tmp_path / "yaml").mkdir()
    (tmp_path / "yaml" / "__init__.py").write_text("")
    (tmp_path / "yaml" / "_yaml.cpython-313-aarch64-linux-gnu.so").write_bytes(b"x")
    (tmp_path / "_yaml").mkdir()
    (tmp_path / "_yaml" / "__init__.py").write_text("")

    removed = trim_layer(tmp_path)

    assert sorted(p.name for p in data.iterdir()) == sorted([*BOTOCORE_SERVICES, "endpoints.json"])
    assert sorted(p.name for p in (tmp_path / "zstandard").iterdir()) == ["__init__.py", "backend_c.so"]
    assert [p.name for p in (tmp_path / "yaml").iterdir()] == ["__init__.py"]
    assert not (tmp_path / "_yaml").exists()
    assert "botocore/data/ec2" in removed and "_yaml" in removed
    [partition] = json.loads((data / "endpoints.json").read_text())["partitions"]
    assert partition["services"] == {"sqs": {"endpoints": {}}} and partition["regions"] == {"us-east-1": {}}
    assert trim_layer(tmp_path) == []  # idempotent
