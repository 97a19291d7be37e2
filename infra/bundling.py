"""Local (Docker-free) bundlers for the layers and the function code.

CDK calls ``try_bundle(output_dir, ...)`` during synth; returning ``True`` means the asset is ready
and Docker is never started. The ``image`` CDK also requires is only used if a bundler returns
``False``, which these never do: a failed pip install raises, so a broken layer fails the synth.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
import jsii

from infra.bytecode import compile_tree, find_interpreter
from infra.constants import PYTHON_VERSION, REPO_ROOT
from infra.requirements import LayerName, build_layer, copy_tree

if TYPE_CHECKING:
    from collections.abc import Iterable


@jsii.implements(cdk.ILocalBundling)
class PipLayerBundling:
    """Install a third-party layer for the Lambda platform into ``<output_dir>/python``.

    The wheels are fetched with ``pip install --platform manylinux2014_<arch> --only-binary=:all:
    --python-version 3.13 --implementation cp`` (see :func:`infra.requirements.pip_command`), trimmed,
    compiled by a Python 3.13 interpreter, and cached under ``cdk.out/.bundle-cache`` keyed on the
    requirements, so a second synth copies instead of downloading.

    Examples
    --------
    >>> bundling = cdk.BundlingOptions(image=cdk.DockerImage.from_registry("x"),
    ...                                local=PipLayerBundling("core"))  # doctest: +SKIP
    """

    def __init__(self, layer: LayerName, *, checkpointer: str = "aws") -> None:
        self.layer: LayerName = layer
        self.checkpointer = checkpointer

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **_: Any) -> bool:
        built = build_layer(self.layer, "lambda", checkpointer=self.checkpointer)
        copy_tree(built, Path(output_dir))
        return True


@jsii.implements(cdk.ILocalBundling)
class CopyBundling:
    """Copy files and folders of the repository into the asset, each at its destination path, compiled.

    ``sources`` maps a destination inside the asset (``""`` for the root) to a folder relative to the
    repository; the folder's contents are copied without ``__pycache__`` and without the top-level
    entries named in ``exclude``, then compiled by the runtime's Python version (unchecked-hash
    ``.pyc`` in ``__pycache__`` beside each source).

    Examples
    --------
    >>> CopyBundling({"": "functions/api", "wait_service": "functions/wait_service"})  # doctest: +SKIP
    """

    def __init__(self, sources: dict[str, str], exclude: Iterable[str] = ()) -> None:
        self.sources = dict(sources)
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


def _files(sources: dict[str, str], exclude: tuple[str, ...]) -> list[tuple[str, Path]]:
    files: list[tuple[str, Path]] = []
    for destination, relative in sorted(sources.items()):
        source = REPO_ROOT / relative
        if not source.is_dir():
            raise FileNotFoundError(f"asset source {relative!r} is not a folder of the repository")
        for path in sorted(source.rglob("*")):
            parts = path.relative_to(source).parts
            if not path.is_file() or "__pycache__" in parts or path.suffix == ".pyc" or parts[0] in exclude:
                continue
            files.append((str(Path(destination, *parts)), path))
    return files


def copy_sources(sources: dict[str, str], output_dir: Path, exclude: tuple[str, ...] = ()) -> None:
    """Copy ``sources`` (destination → repository path) into ``output_dir``."""
    for destination, source in _files(sources, exclude):
        target = output_dir / destination
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def tree_hash(sources: dict[str, str], exclude: tuple[str, ...] = (), *, salt: str = "") -> str:
    """sha256 over ``salt`` and the destination and contents of every file :func:`copy_sources` copies."""
    digest = hashlib.sha256(salt.encode())
    for destination, source in _files(sources, exclude):
        digest.update(destination.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()
