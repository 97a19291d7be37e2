"""Local (Docker-free) bundlers for the layers and the function code.

CDK calls ``try_bundle(output_dir, ...)`` during synth; returning ``True`` means the asset is ready
and Docker is never started. The ``image`` CDK also requires is only used if a bundler returns
``False``, which these never do: a failed pip install raises, so a broken layer fails the synth.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import aws_cdk as cdk
import jsii

from infra.bytecode import compile_tree, find_interpreter
from infra.constants import PYTHON_VERSION, REPO_ROOT
from infra.requirements import LayerName, build_layer, copy_tree

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import TypeAlias

    # A folder of the repository (relative) or any folder (absolute, e.g. a user's agent).
    SourceFolder: TypeAlias = str | Path
    # Destination inside the asset ("" for the root) -> folder; pairs put two folders at one destination.
    Sources: TypeAlias = Mapping[str, SourceFolder] | Sequence[tuple[str, SourceFolder]]
# Never copied from any folder, at any depth: caches, virtual environments, VCS and editor data.
SKIPPED_NAMES: frozenset[str] = frozenset(
    {
        "__pycache__",
        ".venv",
        "venv",
        ".git",
        ".hg",
        ".svn",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".idea",
        ".vscode",
        ".DS_Store",
        "node_modules",
        "cdk.out",
    }
)


@jsii.implements(cdk.ILocalBundling)
class PipLayerBundling:
    """Install a third-party layer for the Lambda platform into ``<output_dir>/python``.

    The wheels are fetched with ``pip install --platform manylinux2014_<arch> --only-binary=:all:
    --python-version 3.13 --implementation cp`` (see :func:`infra.requirements.pip_command`), trimmed,
    compiled by a Python 3.13 interpreter, and cached in :data:`infra.constants.BUNDLE_CACHE_DIR` keyed
    on the requirements, so a second synth (from any clone) copies instead of downloading.

    Examples
    --------
    >>> bundling = cdk.BundlingOptions(image=cdk.DockerImage.from_registry("x"),
    ...                                local=PipLayerBundling("core"))  # doctest: +SKIP
    """

    def __init__(
        self,
        layer: LayerName,
        *,
        checkpointer: str = "aws",
        requirements_file: Path | None = None,
        every_aws_service: bool = False,
        framework: str = "langgraph",
    ) -> None:
        self.layer: LayerName = layer
        self.framework = framework
        self.checkpointer = checkpointer
        self.requirements_file = requirements_file
        self.every_aws_service = every_aws_service

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **_: Any) -> bool:
        built = build_layer(
            self.layer,
            "lambda",
            checkpointer=self.checkpointer,
            requirements_file=self.requirements_file,
            every_aws_service=self.every_aws_service,
            framework=self.framework,
        )
        copy_tree(built, Path(output_dir))
        return True


@jsii.implements(cdk.ILocalBundling)
class CopyBundling:
    """Copy files and folders of the repository into the asset, each at its destination path, compiled.

    ``sources`` maps a destination inside the asset (``""`` for the root) to a folder: relative to the
    repository, or absolute (a user's agent); a list of pairs puts two folders at one destination.
    Each folder's contents are copied without :data:`SKIPPED_NAMES` (caches, virtual environments,
    VCS data) and without the top-level entries named in ``exclude``; two folders may not bring the
    same file (or a top-level name another folder owns). The copy is then compiled by the runtime's
    Python version (unchecked-hash ``.pyc`` in ``__pycache__`` beside each source).

    Examples
    --------
    >>> CopyBundling({"": "functions/api", "wait_service": "functions/wait_service"})  # doctest: +SKIP
    """

    def __init__(self, sources: Sources, exclude: Iterable[str] = ()) -> None:
        self.sources = source_pairs(sources)
        self.exclude = tuple(exclude)

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **_: Any) -> bool:
        copy_sources(self.sources, Path(output_dir), self.exclude)
        # Sources stay (tracebacks of our code show their lines); the bytecode beside them means a
        # cold start compiles nothing (see infra.bytecode).
        compile_tree(Path(output_dir), find_interpreter(PYTHON_VERSION))
        return True

    def source_hash(self) -> str:
        """A digest of every file copied, with its destination, and of the bytecode's format."""
        return tree_hash(self.sources, self.exclude, salt=f"bytecode {PYTHON_VERSION} unchecked-hash")


def source_pairs(sources: Sources) -> list[tuple[str, SourceFolder]]:
    """``sources`` as (destination, folder) pairs, in a stable order."""
    pairs: list[tuple[str, SourceFolder]] = (
        list(sources.items())
        if isinstance(sources, dict)
        else list(cast("Sequence[tuple[str, SourceFolder]]", sources))
    )
    return sorted(pairs, key=lambda pair: (pair[0], str(pair[1])))


def source_folder(source: SourceFolder) -> Path:
    """The folder on disk: relative paths are taken from the repository root."""
    return Path(source) if Path(source).is_absolute() else REPO_ROOT / source


def asset_files(sources: Sources, exclude: tuple[str, ...]) -> list[tuple[str, Path]]:
    """Every file the asset gets, with its destination; raises ``ValueError`` when two folders collide."""
    files: list[tuple[str, Path]] = []
    owners: dict[str, Path] = {}  # top-level entry of the asset -> the folder that brings it
    for destination, relative in source_pairs(sources):
        source = source_folder(relative)
        if not source.is_dir():
            raise FileNotFoundError(f"asset source {str(relative)!r} is not a folder")
        for path in sorted(source.rglob("*")):
            parts = path.relative_to(source).parts
            if not path.is_file() or path.suffix == ".pyc" or parts[0] in exclude:
                continue
            if SKIPPED_NAMES.intersection(parts) or any(part.endswith(".egg-info") for part in parts):
                continue
            target = Path(destination, *parts)
            owner = owners.setdefault(target.parts[0], source)
            if owner != source:
                raise ValueError(
                    f"{path} would replace {target.parts[0]!r} of {owner} in the asset; rename it"
                )
            files.append((str(target), path))
    return files


def copy_sources(sources: Sources, output_dir: Path, exclude: tuple[str, ...] = ()) -> None:
    """Copy ``sources`` (destination → folder) into ``output_dir``."""
    for destination, source in asset_files(sources, exclude):
        target = output_dir / destination
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def tree_hash(sources: Sources, exclude: tuple[str, ...] = (), *, salt: str = "") -> str:
    """sha256 over ``salt`` and the destination and contents of every file :func:`copy_sources` copies."""
    digest = hashlib.sha256(salt.encode())
    for destination, source in asset_files(sources, exclude):
        digest.update(destination.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()
