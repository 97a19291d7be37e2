"""The build's bytecode and trimming steps, on small trees made here (no network, no pip)."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

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
        (data / service / "2020-01-01" / "service-2.json.gz").write_bytes(gzip.compress(b"{}"))
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


def test_trim_layer_drops_only_the_prose_of_the_kept_models(tmp_path: Path) -> None:
    """The documentation strings go; a member *named* documentation and required doc fields stay."""
    folder = tmp_path / "botocore" / "data" / "sqs" / "2012-11-05"
    folder.mkdir(parents=True)
    model = {
        "metadata": {"apiVersion": "2012-11-05", "protocol": "json"},
        "documentation": "<p>Welcome</p>",
        "clientContextParams": {"Flag": {"type": "boolean", "documentation": "kept: botocore reads it"}},
        "operations": {
            "SendMessage": {
                "name": "SendMessage",
                "input": {"shape": "SendMessageRequest", "documentation": "<p>in</p>"},
                "errors": [{"shape": "Oops", "documentation": "<p>err</p>"}],
                "documentation": "<p>Sends</p>",
            }
        },
        "shapes": {
            "SendMessageRequest": {
                "type": "structure",
                "required": ["documentation"],
                "members": {
                    "documentation": {"shape": "String", "documentation": "<p>a member so named</p>"},
                },
                "documentation": "<p>shape</p>",
            },
            "String": {"type": "string", "max": 10},
        },
    }
    (folder / "service-2.json.gz").write_bytes(gzip.compress(json.dumps(model).encode()))
    (folder / "endpoint-rule-set-1.json.gz").write_bytes(gzip.compress(b'{"documentation": "x"}'))

    trim_layer(tmp_path)

    assert sorted(p.name for p in folder.iterdir()) == ["endpoint-rule-set-1.json.gz", "service-2.json"]
    slim = json.loads((folder / "service-2.json").read_text())
    assert "documentation" not in slim and "documentation" not in slim["operations"]["SendMessage"]
    assert slim["operations"]["SendMessage"]["input"] == {"shape": "SendMessageRequest"}
    assert slim["operations"]["SendMessage"]["errors"] == [{"shape": "Oops"}]
    request = slim["shapes"]["SendMessageRequest"]
    assert request == {
        "type": "structure",
        "required": ["documentation"],
        "members": {"documentation": {"shape": "String"}},
    }
    assert slim["shapes"]["String"] == {"type": "string", "max": 10}
    assert slim["clientContextParams"] == model["clientContextParams"]
    assert slim["metadata"] == model["metadata"]


def test_a_slim_model_serves_botocore_as_the_full_one_does(tmp_path: Path) -> None:
    """A client built from the slimmed copy of a real model has the same operations and shapes."""
    import botocore
    import botocore.session

    source = Path(botocore.__file__).parent / "data" / "sqs"
    data = tmp_path / "botocore" / "data"
    shutil.copytree(source, data / "sqs")
    trim_layer(tmp_path)
    assert not list((data / "sqs").rglob("service-2.json.gz"))

    full = botocore.session.get_session().get_service_model("sqs")
    slim_session = botocore.session.get_session()
    slim_session.get_component("data_loader").search_paths.insert(0, str(data))
    slim = slim_session.get_service_model("sqs")
    assert full.documentation and not slim.documentation  # the slim copy is the one loaded
    assert slim.operation_names == full.operation_names
    for name in full.operation_names:
        full_input, slim_input = (
            full.operation_model(name).input_shape,
            slim.operation_model(name).input_shape,
        )
        assert (slim_input and slim_input.members.keys()) == (full_input and full_input.members.keys())
        assert (slim_input and slim_input.required_members) == (full_input and full_input.required_members)
    client = slim_session.create_client(
        "sqs", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    assert client.meta.service_model.operation_names == full.operation_names
