"""The Lambda layers: third-party ``core`` and ``graph`` dependencies, and the ``agent_wait`` library."""

from __future__ import annotations

import shlex

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra import constants
from infra.bundling import CopyBundling, PipLayerBundling
from infra.requirements import (
    AGENT_WAIT_EXCLUDE,
    AGENT_WAIT_SOURCES,
    LayerName,
    cache_key,
    layer_requirements,
)

# What the Docker fallbacks run (the bundling image's python is the runtime's); the local bundlers
# do the same through infra.bytecode.
COMPILE = "python -m compileall -q --invalidation-mode unchecked-hash"


def runtime() -> lambda_.Runtime:
    return lambda_.Runtime.PYTHON_3_13


def architecture() -> lambda_.Architecture:
    return lambda_.Architecture.ARM_64 if constants.ARCHITECTURE == "arm64" else lambda_.Architecture.X86_64


def code_asset(sources: dict[str, str], *, exclude: tuple[str, ...] = ()) -> lambda_.Code:
    """An asset holding ``sources`` (minus top-level ``exclude`` entries), copied without Docker.

    Hashed on the files copied. The Docker ``command`` does the same copy but only runs if local
    bundling is unavailable, which :class:`~infra.bundling.CopyBundling` never reports.
    """
    bundler = CopyBundling(sources, exclude=exclude)
    steps = []
    for dest, src in sources.items():
        steps.append(f"mkdir -p /asset-output/{dest} && cp -r /asset-input/{src}/. /asset-output/{dest}")
        steps += [f"rm -rf /asset-output/{dest}/{name}" for name in exclude]
    steps.append("find /asset-output -name __pycache__ -prune -exec rm -rf {} +")
    steps.append(f"{COMPILE} /asset-output")
    return lambda_.Code.from_asset(
        str(constants.REPO_ROOT),
        asset_hash_type=cdk.AssetHashType.CUSTOM,
        asset_hash=bundler.source_hash(),
        bundling=cdk.BundlingOptions(
            image=runtime().bundling_image, local=bundler, command=["bash", "-c", " && ".join(steps)]
        ),
    )


class Layers(Construct):
    """``core`` (api + runner), ``graph`` (runner) and ``agent_wait`` (api + runner) layers.

    Parameters
    ----------
    checkpointer
        ``dynamodb`` adds langgraph-checkpoint-dynamodb to the ``graph`` layer.

    Examples
    --------
    >>> layers = Layers(stack, "Layers", checkpointer="aws")  # doctest: +SKIP
    >>> layers.for_api  # [core, agent_wait]  # doctest: +SKIP
    """

    def __init__(self, scope: Construct, construct_id: str, *, checkpointer: str) -> None:
        super().__init__(scope, construct_id)
        self.core = self._build_pip_layer("Core", "core", checkpointer)
        self.graph = self._build_pip_layer("Graph", "graph", checkpointer)
        self.agent_wait = lambda_.LayerVersion(
            self,
            "AgentWait",
            description="agent_wait library",
            code=code_asset(AGENT_WAIT_SOURCES, exclude=AGENT_WAIT_EXCLUDE),
            compatible_runtimes=[runtime()],
            compatible_architectures=[architecture()],
        )

    @property
    def for_api(self) -> list[lambda_.ILayerVersion]:
        return [self.core, self.agent_wait]

    @property
    def for_runner(self) -> list[lambda_.ILayerVersion]:
        return [self.core, self.graph, self.agent_wait]

    def _build_pip_layer(self, construct_id: str, name: LayerName, checkpointer: str) -> lambda_.LayerVersion:
        requirements = layer_requirements(name, checkpointer=checkpointer)
        return lambda_.LayerVersion(
            self,
            construct_id,
            description=f"agent-wait {name} dependencies: {', '.join(requirements)}"[:256],
            code=lambda_.Code.from_asset(
                str(constants.REPO_ROOT / "layers" / "deps"),
                asset_hash_type=cdk.AssetHashType.CUSTOM,
                asset_hash=cache_key(name, "lambda", checkpointer=checkpointer),
                bundling=cdk.BundlingOptions(
                    image=runtime().bundling_image,
                    local=PipLayerBundling(name, checkpointer=checkpointer),
                    command=[
                        "bash",
                        "-c",
                        "pip install --no-compile --target /asset-output/python "
                        + " ".join(shlex.quote(r) for r in requirements)
                        + f" && {COMPILE} -b /asset-output/python"
                        + " && find /asset-output/python -name '*.py' -exec sh -c"
                        + ' \'test -f "${1%.py}.pyc" && rm "$1"\' _ {} \\;',
                    ],
                ),
            ),
            compatible_runtimes=[runtime()],
            compatible_architectures=[architecture()],
        )
