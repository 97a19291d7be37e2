"""Report on a cloud assembly: layer sizes, and whether the handlers import from the built assets.

``python -m infra.report cdk.out`` (run by ``make synth``) prints each layer's unzipped size, each
function's total against Lambda's 250 MB limit, then imports every handler in a fresh interpreter
whose ``sys.path`` is what Lambda gives it: the function's asset folder, then each of its layers'
``python/`` folders, and the standard library (``-I -S -B``: no site-packages, no venv, no bytecode
written into the assets).

The Lambda layers hold cp313 manylinux wheels that this host's interpreter cannot load, so the import
check swaps each third-party layer for a copy built from the same pinned requirements for the host
(:func:`infra.requirements.build_layer` with ``target="host"``); the function assets and the
``agent_wait`` layer are the built ones. What it proves: the assets hold every first-party module the
handlers import, the layers hold every third-party one (nothing leaks in from the build venv), the
api imports without LangGraph, and the handlers import with the environment the template gives them.

Examples
--------
>>> report = AssemblyReport.load(Path("cdk.out"))  # doctest: +SKIP
>>> [fn.name for fn in report.functions]  # doctest: +SKIP
['ApiFunction', 'Runner']
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.constants import EVERY_AWS_SERVICE_METADATA, GRAPH_REQUIREMENTS_METADATA
from infra.requirements import LayerName, build_layer, tree_size

LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024
# Our own budgets (code + layers, unzipped): what a cold start has to map and read stays small.
SIZE_BUDGETS: dict[str, int] = {
    "Runner": 45 * 1024 * 1024,
    "ApiFunction": 20 * 1024 * 1024,
    # The dispatcher ships with the api's layers.
    "Dispatcher": 20 * 1024 * 1024,
}
_PIP_LAYERS: dict[str, LayerName] = {"Layers/Core": "core", "Layers/Graph": "graph"}
_ACCOUNT, _REGION = "123456789012", "us-east-1"
# Read from AWS while a handler is imported (Lambda's init phase): left out of the import check.
_NEEDS_AWS_AT_INIT = frozenset({"AGENT_WAIT_CHECKPOINT_BUCKET", "AGENT_WAIT_RUNNER_SECRETS"})


@dataclass
class Layer:
    logical_id: str
    display_name: str
    path: Path
    # The user's requirements file the graph layer was built with (context graph_requirements).
    requirements_file: Path | None = None
    # A user's agent: the graph layer carries every AWS service's botocore model.
    every_aws_service: bool = False

    @property
    def pip_layer(self) -> LayerName | None:
        """``core`` or ``graph`` for a third-party layer, ``None`` for first-party code."""
        return _PIP_LAYERS.get(self.display_name.removesuffix("/Code"))

    @property
    def size(self) -> int:
        return tree_size(self.path)


@dataclass
class Function:
    logical_id: str
    name: str
    path: Path
    layers: list[Layer]
    environment: dict[str, str] = field(default_factory=dict)

    @property
    def total_size(self) -> int:
        return tree_size(self.path) + sum(layer.size for layer in self.layers)


@dataclass
class ImportResult:
    function: str
    ok: bool
    output: str
    modules: list[str] = field(default_factory=list)


@dataclass
class AssemblyReport:
    """The functions and layers of every stack in a cloud assembly, with their asset folders."""

    outdir: Path
    layers: list[Layer]
    functions: list[Function]

    @classmethod
    def load(cls, outdir: Path) -> AssemblyReport:
        manifest = json.loads((outdir / "manifest.json").read_text())
        layers: list[Layer] = []
        functions: list[Function] = []
        for artifact in manifest["artifacts"].values():
            if artifact["type"] != "aws:cloudformation:stack":
                continue
            template = json.loads((outdir / artifact["properties"]["templateFile"]).read_text())
            assets = _assets_by_key(outdir, manifest)
            requirements_files = _layer_metadata(outdir, artifact, GRAPH_REQUIREMENTS_METADATA)
            every_service = _layer_metadata(outdir, artifact, EVERY_AWS_SERVICE_METADATA)
            resources: dict[str, Any] = template["Resources"]
            by_id: dict[str, Layer] = {}
            for logical_id, resource in resources.items():
                if resource["Type"] == "AWS::Lambda::LayerVersion":
                    display, path = assets[resource["Properties"]["Content"]["S3Key"]]
                    requirements = requirements_files.get(logical_id)
                    by_id[logical_id] = Layer(
                        logical_id,
                        display,
                        path,
                        None if requirements is None else Path(requirements),
                        every_aws_service=bool(every_service.get(logical_id)),
                    )
            layers += by_id.values()
            for logical_id, resource in resources.items():
                if resource["Type"] != "AWS::Lambda::Function":
                    continue
                props = resource["Properties"]
                s3_key = props.get("Code", {}).get("S3Key")
                if s3_key not in assets:
                    continue  # inline or CDK-internal code: not ours
                display, path = assets[s3_key]
                variables = props.get("Environment", {}).get("Variables", {})
                functions.append(
                    Function(
                        logical_id=logical_id,
                        name=display.split("/", 1)[0],
                        path=path,
                        layers=[by_id[ref["Ref"]] for ref in props.get("Layers", [])],
                        environment={k: _resolve(v, resources) for k, v in variables.items()},
                    )
                )
        return cls(outdir, layers, functions)

    def import_handler(self, function: Function, *, cache_dir: Path | None = None) -> ImportResult:
        """Import ``handler`` of ``function`` in a fresh interpreter with Lambda's path (see module doc)."""
        paths = [str(function.path)]
        for layer in function.layers:
            if layer.pip_layer is None:
                paths.append(str(layer.path / "python"))
                continue
            checkpointer = function.environment.get("AGENT_WAIT_CHECKPOINTER", "aws")
            kwargs: dict[str, Any] = {"checkpointer": checkpointer}
            if layer.pip_layer == "graph" and function.environment.get("AGENT_WAIT_FRAMEWORK"):
                kwargs["framework"] = function.environment["AGENT_WAIT_FRAMEWORK"]
            if layer.requirements_file is not None:
                kwargs["requirements_file"] = layer.requirements_file
            if layer.every_aws_service:
                kwargs["every_aws_service"] = True
            if cache_dir is not None:
                kwargs["cache_dir"] = cache_dir
            built = str(build_layer(layer.pip_layer, "host", **kwargs) / "python")
            if layer.every_aws_service:
                # Lambda merges the layers into one folder, this copy of botocore (every service's
                # model) laid over the core layer's trimmed one; first on the path, it is what imports.
                paths.insert(1, built)
            else:
                paths.append(built)
        script = (
            "import json, sys\n"
            f"sys.path[:0] = {paths!r}\n"
            "import handler\n"
            "assert callable(handler.handler), 'handler.handler is not callable'\n"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
        )
        env = {
            "PATH": os.environ.get("PATH", ""),
            "AWS_REGION": _REGION,
            "AWS_DEFAULT_REGION": _REGION,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_LAMBDA_FUNCTION_NAME": function.name,
            "POWERTOOLS_TRACE_DISABLED": "1",
            # With a bucket the init phase reads its lifecycle from S3; there is no AWS to reach here.
            **{k: v for k, v in function.environment.items() if k not in _NEEDS_AWS_AT_INIT},
            # Nor are the runner's secrets read: each variable gets a stand-in, so a graph that
            # reads one while it is built still imports.
            **dict.fromkeys(_runner_secret_names(function.environment), "import-check-stand-in"),
        }
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-B", "-c", script],
            env=env,
            cwd=function.path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            return ImportResult(function.name, False, done.stderr.strip()[-4000:])
        modules = json.loads(done.stdout.strip().splitlines()[-1])
        return ImportResult(function.name, True, "", modules)


def _runner_secret_names(environment: dict[str, str]) -> list[str]:
    return sorted(json.loads(environment.get("AGENT_WAIT_RUNNER_SECRETS") or "{}"))


def _layer_metadata(outdir: Path, artifact: dict[str, Any], key: str) -> dict[str, Any]:
    """Logical id of a resource -> the value of its stack metadata entry ``key`` (the graph layer's:
    the user's requirements file it was built with, whether it carries every AWS service)."""
    metadata: dict[str, list[dict[str, Any]]] = dict(artifact.get("metadata", {}))
    if artifact.get("additionalMetadataFile"):
        metadata.update(json.loads((outdir / artifact["additionalMetadataFile"]).read_text()))
    found: dict[str, Any] = {}
    for entries in metadata.values():
        logical_id = next((e["data"] for e in entries if e["type"] == "aws:cdk:logicalId"), None)
        value = next((e["data"] for e in entries if e["type"] == key), None)
        if logical_id and value is not None:
            found[logical_id] = value
    return found


def _assets_by_key(outdir: Path, manifest: dict[str, Any]) -> dict[str, tuple[str, Path]]:
    found: dict[str, tuple[str, Path]] = {}
    for artifact in manifest["artifacts"].values():
        if artifact["type"] != "cdk:asset-manifest":
            continue
        files = json.loads((outdir / artifact["properties"]["file"]).read_text()).get("files", {})
        for asset in files.values():
            for destination in asset["destinations"].values():
                found[destination["objectKey"]] = (
                    asset.get("displayName", ""),
                    (outdir / asset["source"]["path"]).resolve(),
                )
    return found


def _resolve(value: Any, resources: dict[str, Any]) -> str:
    """A stand-in for what CloudFormation resolves at deploy time, shaped like the real value."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_resolve(v, resources) for v in value)
    (function, argument), *_ = value.items()
    if function == "Ref":
        pseudo = {"AWS::Region": _REGION, "AWS::AccountId": _ACCOUNT, "AWS::Partition": "aws"}
        if argument in pseudo:
            return pseudo[argument]
        if argument == "AWS::URLSuffix":
            return "amazonaws.com"
        kind = resources.get(argument, {}).get("Type", "")
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{_REGION}.amazonaws.com/{_ACCOUNT}/{argument}.fifo"
        if kind == "AWS::SNS::Topic":
            return f"arn:aws:sns:{_REGION}:{_ACCOUNT}:{argument}"
        return str(argument).lower()
    if function == "Fn::GetAtt":
        logical_id, attribute = argument
        if attribute.endswith("Arn"):
            return f"arn:aws:service:{_REGION}:{_ACCOUNT}:{logical_id}"
        return f"{logical_id}-{attribute}".lower()
    if function == "Fn::Join":
        separator, parts = argument
        return str(separator).join(_resolve(part, resources) for part in parts)
    return json.dumps(value)


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MB"


def main(argv: list[str] | None = None) -> int:
    """Print the report; exit 1 if a function is over the size limit or a handler does not import."""
    args = sys.argv[1:] if argv is None else argv
    outdir = Path(args[0] if args else "cdk.out")
    report = AssemblyReport.load(outdir)
    failed = False
    _out("Layers (unzipped):")
    for layer in report.layers:
        _out(f"  {layer.display_name.removesuffix('/Code'):<22} {_mb(layer.size):>10}  {layer.path.name}")
    _out("Functions (code + layers, unzipped; Lambda allows 250 MB):")
    for function in report.functions:
        over = function.total_size > LAMBDA_UNZIPPED_LIMIT
        failed |= over
        budget = SIZE_BUDGETS.get(function.name)
        note = ""
        if any(layer.every_aws_service for layer in function.layers):
            # The budget is the sample's; a user's agent brings its own packages and AWS models.
            note = "  (your agent's packages and every AWS service's botocore model)"
        elif budget is not None:
            note = f"  (budget {_mb(budget)}{', OVER BUDGET' if function.total_size > budget else ''})"
        limit = "  OVER THE LIMIT" if over else ""
        _out(f"  {function.name:<22} {_mb(function.total_size):>10}{limit}{note}")
    _out("Handlers imported from the built assets (fresh interpreter, Lambda's sys.path):")
    for function in report.functions:
        result = report.import_handler(function)
        failed |= not result.ok
        if result.ok:
            graph = "imports langgraph" if "langgraph" in result.modules else "no langgraph"
            spec = function.environment.get("AGENT_WAIT_GRAPH")
            if spec and spec.split(".", 1)[0] in result.modules:
                graph += f", graph {spec}"
            _out(f"  {function.name:<22} ok ({graph})")
        else:
            _out(f"  {function.name:<22} FAILED\n{result.output}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
