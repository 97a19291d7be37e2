"""The Lambda layers: third-party ``core`` and ``graph`` dependencies, and the ``agent_wait`` library."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from pathlib import Path

    from infra.bundling import Sources

# What the Docker fallbacks run (the bundling image's python is the runtime's); the local bundlers
# do the same through infra.bytecode.
COMPILE = "python -m compileall -q --invalidation-mode unchecked-hash"


def runtime() -> lambda_.Runtime:
    return lambda_.Runtime.PYTHON_3_13


def architecture() -> lambda_.Architecture:
    return lambda_.Architecture.ARM_64 if constants.ARCHITECTURE == "arm64" else lambda_.Architecture.X86_64


def code_asset(sources: Sources, *, exclude: tuple[str, ...] = ()) -> lambda_.Code:
    """An asset holding ``sources`` (minus top-level ``exclude`` entries), copied without Docker.

    Hashed on the files copied (a folder outside the repository, too). The Docker ``command`` does
    the same copy (such a folder mounted as a volume) but only runs if local bundling is
    unavailable, which :class:`~infra.bundling.CopyBundling` never reports.
    """
    bundler = CopyBundling(sources, exclude=exclude)
    steps = []
    volumes = []
    for index, (dest, src) in enumerate(bundler.sources):
        folder = f"/asset-input/{src}"
        if str(src).startswith("/"):
            folder = f"/asset-source-{index}"
            volumes.append(cdk.DockerVolume(host_path=str(src), container_path=folder))
        steps.append(f"mkdir -p /asset-output/{dest} && cp -r {folder}/. /asset-output/{dest}")
        steps += [f"rm -rf /asset-output/{dest}/{name}" for name in exclude]
    steps.append("find /asset-output -name __pycache__ -prune -exec rm -rf {} +")
    steps.append(f"{COMPILE} /asset-output")
    return lambda_.Code.from_asset(
        str(constants.REPO_ROOT),
        asset_hash_type=cdk.AssetHashType.CUSTOM,
        asset_hash=bundler.source_hash(),
        bundling=cdk.BundlingOptions(
            image=runtime().bundling_image,
            local=bundler,
            command=["bash", "-c", " && ".join(steps)],
            volumes=volumes or None,
        ),
    )


class Layers(Construct):
    """``core`` (api + runner), ``graph`` (runner) and ``agent_wait`` (api + runner) layers.

    Parameters
    ----------
    checkpointer
        ``dynamodb`` adds langgraph-checkpoint-dynamodb to the ``graph`` layer.
    graph_requirements
        A user's requirements file, installed into the ``graph`` layer with the runner's pins.
    framework
        The agent's framework: ``pydantic_ai`` adds its packages to the ``graph`` layer.
    own_agent
        The runner runs a user's agent (``graph_source`` or ``graph_requirements``): its ``graph``
        layer carries every AWS service's botocore model, since the agent may call any service.

    Examples
    --------
    >>> layers = Layers(stack, "Layers", checkpointer="aws")  # doctest: +SKIP
    >>> layers.for_api  # [core, agent_wait]  # doctest: +SKIP
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        checkpointer: str,
        graph_requirements: Path | None = None,
        own_agent: bool = False,
        framework: str = "langgraph",
    ) -> None:
        super().__init__(scope, construct_id)
        self.core = self._build_pip_layer("Core", "core", checkpointer)
        self.graph = self._build_pip_layer(
            "Graph", "graph", checkpointer, graph_requirements, own_agent, framework=framework
        )
        graph_resource = self.graph.node.default_child
        assert graph_resource is not None
        if graph_requirements is not None:
            graph_resource.node.add_metadata(constants.GRAPH_REQUIREMENTS_METADATA, str(graph_requirements))
        if own_agent:
            graph_resource.node.add_metadata(constants.EVERY_AWS_SERVICE_METADATA, True)
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

    def _build_pip_layer(
        self,
        construct_id: str,
        name: LayerName,
        checkpointer: str,
        requirements_file: Path | None = None,
        every_aws_service: bool = False,
        *,
        framework: str = "langgraph",
    ) -> lambda_.LayerVersion:
        requirements = layer_requirements(name, checkpointer=checkpointer, framework=framework)
        described = [*requirements, f"-r {requirements_file.name}"] if requirements_file else requirements
        # The Docker fallback (never used: the local bundler always builds) mounts the user's file.
        volumes, extra = [], ""
        if requirements_file is not None:
            volumes.append(
                cdk.DockerVolume(
                    host_path=str(requirements_file.parent), container_path="/graph-requirements"
                )
            )
            extra = " -r " + shlex.quote(f"/graph-requirements/{requirements_file.name}")
        return lambda_.LayerVersion(
            self,
            construct_id,
            description=f"agent-wait {name} dependencies: {', '.join(described)}"[:256],
            code=lambda_.Code.from_asset(
                str(constants.REPO_ROOT / "layers" / "deps"),
                asset_hash_type=cdk.AssetHashType.CUSTOM,
                asset_hash=cache_key(
                    name,
                    "lambda",
                    checkpointer=checkpointer,
                    requirements_file=requirements_file,
                    every_aws_service=every_aws_service,
                    framework=framework,
                ),
                bundling=cdk.BundlingOptions(
                    image=runtime().bundling_image,
                    local=PipLayerBundling(
                        name,
                        checkpointer=checkpointer,
                        requirements_file=requirements_file,
                        every_aws_service=every_aws_service,
                        framework=framework,
                    ),
                    volumes=volumes or None,
                    command=[
                        "bash",
                        "-c",
                        "pip install --no-compile --target /asset-output/python "
                        + " ".join(shlex.quote(r) for r in requirements)
                        + extra
                        + f" && {COMPILE} -b /asset-output/python"
                        + " && find /asset-output/python -name '*.py' -exec sh -c"
                        + ' \'test -f "${1%.py}.pyc" && rm "$1"\' _ {} \\;',
                    ],
                ),
            ),
            compatible_runtimes=[runtime()],
            compatible_architectures=[architecture()],
        )
