"""What goes into the third-party layers, derived from the pins in ``pyproject.toml``, and how it is built.

Pure Python (no ``aws_cdk``): the CDK bundlers, ``python -m infra.report`` and the infra tests use the
same functions, so the layer a test imports from is built exactly like the one that is deployed.

Two layers, so the api never carries LangGraph:

- ``core`` (api and runner): Powertools (tracer, validation), pydantic, python-ulid, boto3. boto3 and
  botocore are kept, pinned, rather than stripped in favour of the runtime's copy: langgraph-checkpoint-aws
  needs ``boto3>=1.43.64`` and Powertools' tracer pulls botocore anyway, while the runtime's boto3 lags
  and changes under a deployed function without notice.
- ``graph`` (runner only): LangGraph and the checkpointer, minus every distribution ``core`` already
  holds at the same version (Lambda merges both into ``/opt/python``).

Each layer is then trimmed of what can never load in Lambda (:func:`trim_layer`: botocore's models of
services the deployment does not call, zstandard's cffi backend, PyYAML's libyaml binding) and
compiled (:mod:`infra.bytecode`), so a cold start neither reads dead weight nor compiles a module.

Examples
--------
>>> [r.split("==")[0] for r in layer_requirements("core")]
['aws-lambda-powertools[tracer,validation]', 'jsonpatch', 'pydantic', 'python-ulid', 'boto3']
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tomllib
from typing import TYPE_CHECKING, Literal

from infra.bytecode import compile_tree, find_interpreter
from infra.constants import BUNDLE_CACHE_DIR, PIP_PLATFORM, PYTHON_VERSION, REPO_ROOT
from infra.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

LayerName = Literal["core", "graph"]
Target = Literal["lambda", "host"]

# The first-party layer: the library, without its pytest helpers (never imported in Lambda).
AGENT_WAIT_SOURCES: dict[str, str] = {"python/agent_wait": "layers/agent_wait/agent_wait"}
AGENT_WAIT_EXCLUDE: tuple[str, ...] = ("testing.py",)

CORE_PACKAGES: tuple[str, ...] = (
    "aws-lambda-powertools[tracer,validation]",
    "jsonpatch",
    "pydantic",
    "python-ulid",
    "boto3",
)
GRAPH_PACKAGES: tuple[str, ...] = ("langgraph", "langgraph-checkpoint-aws")
# The agent framework's own packages, added to the graph layer when the stack hosts one (context
# ``framework``); LangGraph's are always there (the runner itself imports LangGraph).
FRAMEWORK_PACKAGES: dict[str, tuple[str, ...]] = {
    "pydantic_ai": ("pydantic-ai-slim",),
    "strands": ("strands-agents",),
}

# botocore's service models kept in the layers: the services the deployment calls (the functions,
# the announcers, the dispatcher's audit archive on Firehose, the checkpointer's S3 offload), the
# X-Ray SDK's own client, and STS (credentials).
# botocore loads a model only when a client for its service is created. A user's agent may call any
# AWS service (bedrock-runtime for a model, say): its graph layer carries botocore with every model
# (``every_aws_service``), which Lambda's merge of the layers lays over the core layer's trimmed copy.
BOTOCORE_SERVICES: tuple[str, ...] = (
    "dynamodb",
    "firehose",
    "s3",
    "scheduler",
    "secretsmanager",
    "sns",
    "sqs",
    "sts",
    "xray",
)
GRAPH_PACKAGES_DYNAMODB: tuple[str, ...] = ("langgraph-checkpoint-dynamodb",)

_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([^;\s]+)")


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_versions(pyproject: Path = REPO_ROOT / "pyproject.toml") -> dict[str, str]:
    """Every ``name==version`` pin in ``pyproject.toml`` (dependencies and all extras), by normalized name."""
    project = tomllib.loads(pyproject.read_text())["project"]
    specs: list[str] = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        specs += extra
    pins: dict[str, str] = {}
    for spec in specs:
        match = _REQ.match(spec)
        if match:
            pins[_normalize(match.group(1))] = match.group(3)
    return pins


def layer_requirements(
    layer: LayerName, *, checkpointer: str = "aws", framework: str = "langgraph"
) -> list[str]:
    """The pinned requirement lines of ``layer`` (``graph`` includes ``core``'s, as resolver input)."""
    pins = pinned_versions()
    packages = list(CORE_PACKAGES)
    if layer == "graph":
        packages += GRAPH_PACKAGES
        if checkpointer == "dynamodb":
            packages += GRAPH_PACKAGES_DYNAMODB
        packages += FRAMEWORK_PACKAGES.get(framework, ())
    lines = []
    for package in packages:
        name = package.split("[", 1)[0]
        version = pins.get(_normalize(name))
        if version is None:
            raise LookupError(
                f"{name} has no '==' pin in pyproject.toml; the layers install pinned versions only"
            )
        lines.append(f"{package}=={version}")
    return lines


def pip_command(
    requirements: Iterable[str], target_dir: Path, target: Target, *, requirements_file: Path | None = None
) -> list[str]:
    """The pip invocation that installs ``requirements`` (and ``requirements_file``'s) into ``target_dir``.

    One resolve for both, so a user's requirement that conflicts with a pin fails the build.
    ``lambda`` fetches wheels for the Lambda runtime (manylinux, CPython ``PYTHON_VERSION``) whatever the
    host is; ``host`` builds the same requirements for this interpreter, for tests that import them.
    """
    command = [sys.executable, "-m", "pip", "install", "-qq", "--disable-pip-version-check", "--no-compile"]
    command += ["--target", str(target_dir)]
    if target == "lambda":
        command += ["--platform", PIP_PLATFORM, "--only-binary=:all:"]
        command += ["--python-version", PYTHON_VERSION, "--implementation", "cp"]
    extra = ["-r", str(requirements_file)] if requirements_file is not None else []
    return command + list(requirements) + extra


def file_digest(path: Path | None) -> str | None:
    """sha256 of a file's bytes (a requirements file), ``None`` for no file."""
    return None if path is None else hashlib.sha256(path.read_bytes()).hexdigest()


def cache_key(
    layer: LayerName,
    target: Target,
    *,
    checkpointer: str = "aws",
    requirements_file: Path | None = None,
    every_aws_service: bool = False,
    framework: str = "langgraph",
) -> str:
    """A digest of everything that decides the layer's contents (a requirements file: its bytes)."""
    # A host build is for this interpreter on this kind of machine (the cache is shared by a user's clones).
    host = f"{sys.implementation.cache_tag}-{sys.platform}-{platform.machine()}"
    interpreter = f"cp{PYTHON_VERSION}-{PIP_PLATFORM}" if target == "lambda" else host
    payload = {
        "layer": layer,
        "target": target,
        "interpreter": interpreter,
        "core": layer_requirements("core"),
        "requirements": layer_requirements(layer, checkpointer=checkpointer, framework=framework),
        "botocore_services": BOTOCORE_SERVICES,
        "format": 8,
    }
    if requirements_file is not None:
        payload["requirements_file"] = file_digest(requirements_file)
    if every_aws_service:
        payload["every_aws_service"] = True
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def build_layer(
    layer: LayerName,
    target: Target,
    *,
    checkpointer: str = "aws",
    requirements_file: Path | None = None,
    every_aws_service: bool = False,
    cache_dir: Path = BUNDLE_CACHE_DIR,
    framework: str = "langgraph",
) -> Path:
    """Build (or reuse from ``cache_dir``) the layer and return its root (which holds ``python/``).

    ``requirements_file`` (``graph`` only): a user's requirements, resolved together with the pins.
    ``every_aws_service`` (``graph`` only): the layer also carries botocore with every service's
    model, for a user's agent that calls AWS services the deployment itself does not.
    """
    if (requirements_file is not None or every_aws_service) and layer != "graph":
        raise ValueError("only the graph layer takes a requirements file or every AWS service")
    key = cache_key(
        layer,
        target,
        checkpointer=checkpointer,
        requirements_file=requirements_file,
        every_aws_service=every_aws_service,
        framework=framework,
    )
    done = cache_dir / f"{layer}-{target}-{key}"
    if (done / "python").is_dir():
        return done
    building = cache_dir / f".{done.name}.{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    site = building / "python"
    site.mkdir(parents=True)
    requirements = layer_requirements(layer, checkpointer=checkpointer, framework=framework)
    if every_aws_service:
        # Exactly the core layer's botocore, kept whole here: Lambda lays this copy over that one.
        core_site = build_layer("core", target, cache_dir=cache_dir) / "python"
        requirements.append(f"botocore=={distribution_version(core_site, 'botocore')}")
    command = pip_command(
        requirements,
        site,
        target,
        requirements_file=requirements_file,
    )
    # A user's file is the likely cause of a failure: pip's output is kept for the one-line error.
    mine = requirements_file is not None
    try:
        subprocess.run(command, check=True, capture_output=mine, text=mine)
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(building, ignore_errors=True)
        if requirements_file is None:
            raise
        output = f"{exc.stdout or ''}{exc.stderr or ''}"
        errors = [line.strip() for line in output.splitlines() if line.startswith("ERROR:")]
        said = errors[0].removeprefix("ERROR:").strip() if errors else f"pip exited with {exc.returncode}"
        platform = "this interpreter" if target == "host" else f"Lambda's Python {PYTHON_VERSION}, wheels"
        raise ConfigError(
            f"context graph_requirements: pip could not install {requirements_file} together with the "
            f"runner's pinned requirements for {platform}: {said}",
            fix="correct that line of the file, or pin a version that fits the pins in pyproject.toml",
            detail=f"{' '.join(command)}\n{output}",
        ) from exc
    # Console scripts point at the build host's interpreter and are never run in a layer.
    shutil.rmtree(site / "bin", ignore_errors=True)
    if layer == "graph":
        core = build_layer("core", target, cache_dir=cache_dir)
        remove_distributions_in(site, core / "python", keep=("botocore",) if every_aws_service else ())
    trim_layer(site, keep_aws_services=every_aws_service)
    strip_debug_info(site)
    # Bytecode for the interpreter that will run the layer: the runtime's version for Lambda, this
    # interpreter for a host build (so a host import of the layout compiles nothing either).
    python = find_interpreter(PYTHON_VERSION) if target == "lambda" else sys.executable
    compile_tree(site, python, sourceless=True)
    try:
        building.rename(done)
    except OSError:
        # Another process finished the same key first; both trees are identical.
        shutil.rmtree(building, ignore_errors=True)
    return done


def trim_layer(site: Path, *, keep_aws_services: bool = False) -> list[str]:
    """Delete from ``site`` what never loads in Lambda; return the paths removed (relative to ``site``).

    - botocore's models of every service not in :data:`BOTOCORE_SERVICES` (over 20 MiB), and their
      entries in ``endpoints.json`` (all kept with ``keep_aws_services``); the kept services' API
      models lose their prose (:func:`_slim_service_models`);
    - zstandard's cffi backend: the layer has no ``cffi``, so it cannot load, and zstandard uses its
      C extension;
    - PyYAML's libyaml binding: ``yaml`` falls back to its pure-Python parser and emitter, which is
      all ``langchain_core`` (its only user, when a graph saves a prompt) needs;
    - Powertools' Swagger UI bundle (the api serves no Swagger UI).
    """
    removed: list[Path] = []
    data = site / "botocore" / "data"
    if data.is_dir() and not keep_aws_services:
        removed += [p for p in data.iterdir() if p.is_dir() and p.name not in BOTOCORE_SERVICES]
        _trim_endpoints(data / "endpoints.json")
        _slim_service_models(data)
    zstandard = site / "zstandard"
    removed += [*zstandard.glob("_cffi.*.so"), *zstandard.glob("backend_cffi.py")]
    removed += [*(site / "yaml").glob("_yaml.*.so"), site / "_yaml"]
    # Swagger UI's bundle, served only by a resolver with ``enable_swagger``, which the api never sets.
    swagger_ui = site / "aws_lambda_powertools" / "event_handler" / "openapi" / "swagger_ui"
    removed += list(swagger_ui.glob("*.min.*"))
    names = []
    for path in removed:
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        else:
            continue
        names.append(str(path.relative_to(site)))
    return names


def _trim_endpoints(path: Path) -> None:
    """Keep the endpoints of :data:`BOTOCORE_SERVICES` only (every partition and region stays).

    botocore parses this 1.2 MiB file when a session creates its first client; the other services'
    entries are useless once their models are gone.
    """
    if not path.is_file():
        return
    endpoints = json.loads(path.read_text())
    for partition in endpoints.get("partitions", []):
        services = partition.get("services", {})
        partition["services"] = {name: spec for name, spec in services.items() if name in BOTOCORE_SERVICES}
    path.write_text(json.dumps(endpoints, separators=(",", ":")))


def _slim_service_models(data: Path) -> None:
    """Drop the HTML documentation from the kept services' ``service-2`` models; store them as plain JSON.

    botocore reads a service's whole model each time a session creates its first client for that
    service (three or four at a function's init): most of DynamoDB's 540 KiB is prose, only ever
    used to render docstrings (``help()``). The documentation of the service, its operations, their
    input/output/error references, its shapes and their members goes (``Shape.documentation`` and
    the like then read ``""``); everything else is kept as it is. The slim model is written as
    ``service-2.json``, which botocore's loader looks for before ``service-2.json.gz``, so nothing
    is decompressed at init. The endpoint rule sets are left as they are.
    """
    for service in sorted(p for p in data.iterdir() if p.is_dir()):
        for packed in sorted(service.glob("*/service-2.json.gz")):
            with gzip.open(packed, "rb") as stream:
                model = json.loads(stream.read().decode("utf-8"))
            _drop_documentation(model)
            for operation in model.get("operations", {}).values():
                _drop_documentation(operation)
                for ref in (operation.get("input"), operation.get("output"), *operation.get("errors", [])):
                    _drop_documentation(ref)
            for shape in model.get("shapes", {}).values():
                _drop_documentation(shape)
                for member in shape.get("members", {}).values():
                    _drop_documentation(member)
            packed.with_suffix("").write_text(
                json.dumps(model, separators=(",", ":"), ensure_ascii=False), encoding="utf-8"
            )
            packed.unlink()


def _drop_documentation(node: object) -> None:
    if isinstance(node, dict) and isinstance(node.get("documentation"), str):
        del node["documentation"]


def strip_debug_info(site: Path) -> int:
    """Remove the debug sections of every extension module under ``site``; return the bytes saved.

    Some wheels ship their extensions unstripped (zstandard's C backend is 10 MiB, of which 9 are
    DWARF). The debug sections are never loaded, so dropping them changes no behaviour. Uses
    ``llvm-strip``, which handles every architecture (the host's GNU ``strip`` cannot read aarch64
    objects); without it the extensions are left as they are.
    """
    tool = shutil.which("llvm-strip")
    if tool is None:
        return 0
    saved = 0
    for extension in sorted(site.rglob("*.so")):
        before = extension.stat().st_size
        subprocess.run([tool, "--strip-debug", str(extension)], check=True, capture_output=True)
        saved += before - extension.stat().st_size
    return saved


def distribution_version(site: Path, name: str) -> str:
    """The version of distribution ``name`` installed in ``site`` (from its ``.dist-info`` folder)."""
    for dist_info in site.glob("*.dist-info"):
        dist, _, version = dist_info.name.removesuffix(".dist-info").rpartition("-")
        if _normalize(dist) == _normalize(name):
            return version
    raise FileNotFoundError(f"{name} is not installed in {site}")


def remove_distributions_in(site: Path, other: Path, keep: Iterable[str] = ()) -> list[str]:
    """Delete from ``site`` every distribution that ``other`` holds at the same version; return their names.

    Lambda merges layers into one ``/opt/python``, so a distribution two layers both carry is dead weight,
    unless named in ``keep`` (a copy that differs once trimmed). Files are removed as listed in the
    distribution's ``RECORD``.
    """
    kept = {_normalize(name) for name in keep}
    removed: list[str] = []
    for dist_info in sorted(site.glob("*.dist-info")):
        if not (other / dist_info.name).is_dir():
            continue
        if _normalize(dist_info.name.removesuffix(".dist-info").rsplit("-", 1)[0]) in kept:
            continue
        record = dist_info / "RECORD"
        for line in record.read_text().splitlines():
            relative = line.rsplit(",", 2)[0]
            path = (site / relative).resolve()
            if path.is_relative_to(site.resolve()) and path.is_file():
                path.unlink()
        shutil.rmtree(dist_info, ignore_errors=True)
        removed.append(dist_info.name.removesuffix(".dist-info"))
    for directory in sorted(
        (p for p in site.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
    ):
        if not any(directory.iterdir()):
            directory.rmdir()
    return removed


def copy_tree(source: Path, destination: Path) -> None:
    """Copy ``source`` into ``destination`` with hard links where possible (the cache is read-only input)."""

    def link_or_copy(src: str, dst: str) -> object:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
        return dst

    shutil.copytree(source, destination, copy_function=link_or_copy, dirs_exist_ok=True)


def tree_size(root: Path) -> int:
    """Bytes in every regular file under ``root`` (the unzipped size Lambda counts against 250 MB)."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())
