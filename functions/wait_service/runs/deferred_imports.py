"""Deferred imports: named packages' modules run their code at their first use, not at their import.

LangGraph's ``Pregel`` is a LangChain ``Runnable``, and ``langchain_core.runnables.base`` imports its
tracers, and through them the LangSmith SDK, at module level. Most of that SDK is never used unless
LangSmith tracing is on: ``langsmith.types`` alone (its generated REST API, about 150 modules) is
imported only because one module imports an enum from one of its submodules. Likewise
``langgraph.runtime`` imports one type from ``langgraph_sdk``, whose package imports the LangGraph
Platform HTTP client.

:class:`DeferredImports` is a ``sys.meta_path`` finder for the packages it names. It finds each of
their modules with the other finders, unchanged, and lets the import system create the real module
object as usual; only the execution of the module's code waits until something reads an attribute
it has not got yet (``from package.module import name``, ``module.name``). A package's
``__path__`` is set at import, so importing one of its submodules does not run the package's
``__init__``. Nothing in the installed packages is changed or replaced: once run, a module is the
plain module it would have been; until then it is that same module object, not yet executed.
Unlike ``importlib.util.LazyLoader``, which runs a package as soon as one of its submodules is
imported, this is what keeps ``langsmith.types`` from running.

The runner's handler installs it (:func:`defer_unless_tracing`) only when LangSmith tracing is off:
with tracing on, the SDK is needed from the first run, and the init loads it as before. If tracing
is turned on later (``langsmith.tracing_context``, an environment variable set by a secret), the
deferred modules run at their first use and trace as usual.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
import types
from importlib.machinery import SourceFileLoader, SourcelessFileLoader
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from importlib.machinery import ModuleSpec

# What the runner defers when LangSmith tracing is off: the LangSmith SDK, the LangGraph Platform SDK
# (its HTTP client; LangGraph imports one type from it), and the packages of
# ``langgraph-checkpoint-aws`` (their ``__init__`` imports every saver and store it ships; the runner
# imports the DynamoDB saver's own package).
RUNNER_DEFERRED = ("langsmith", "langgraph_sdk", "langgraph_checkpoint_aws")

# The variables LangSmith reads to turn tracing on (``langsmith.utils.tracing_is_enabled``): the
# first one set, in this order, decides; ``"true"`` means on.
TRACING_VARIABLES = ("LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING_V2", "LANGSMITH_TRACING", "LANGCHAIN_TRACING")

__all__ = [
    "RUNNER_DEFERRED",
    "TRACING_VARIABLES",
    "DeferredImports",
    "defer_unless_tracing",
    "executed",
    "langsmith_tracing",
]


class _Pending:
    """What a deferred module needs to run later: its real loader, and a lock for the first use."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader
        self.lock = threading.RLock()
        self.running = False


# Deferred modules not run yet, by name (an entry leaves when its module runs).
_pending: dict[str, _Pending] = {}


class _DeferredModule(types.ModuleType):
    """A module whose code has not run yet: the first attribute it lacks runs it."""

    def __getattr__(self, name: str) -> Any:
        spec: ModuleSpec = object.__getattribute__(self, "__spec__")
        pending = _pending.get(spec.name)
        if pending is None:  # another thread ran it meanwhile
            return getattr(self, name)
        with pending.lock:
            if _pending.get(spec.name) is pending:  # not run by another thread while this one waited
                if pending.running:
                    # Read back while it runs (a circular import): as the import system would answer.
                    raise AttributeError(
                        f"partially initialized module {spec.name!r} has no attribute {name!r}"
                    )
                pending.running = True
                spec.loader = pending.loader
                self.__loader__ = pending.loader
                try:
                    pending.loader.exec_module(self)
                finally:
                    object.__setattr__(self, "__class__", types.ModuleType)
                    del _pending[spec.name]
        return getattr(self, name)


class _DeferringLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: ModuleSpec) -> types.ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        _pending[module.__name__] = _Pending(self.loader)
        module.__class__ = _DeferredModule


class DeferredImports(importlib.abc.MetaPathFinder):
    """A ``sys.meta_path`` finder deferring the code of every module of ``packages``."""

    def __init__(self, packages: Sequence[str]) -> None:
        self.packages = tuple(packages)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname.partition(".")[0] not in self.packages:
            return None
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, DeferredImports):
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        # Only what the import system executes from source or bytecode (not builtins, extensions).
        if not isinstance(spec.loader, SourceFileLoader | SourcelessFileLoader):
            return spec
        spec.loader = _DeferringLoader(spec.loader)
        return spec

    def install(self) -> DeferredImports:
        """Put this finder first on ``sys.meta_path``; returns it, or the installed finder deferring
        the same packages (a handler imported twice installs one)."""
        for finder in sys.meta_path:
            if isinstance(finder, DeferredImports) and finder.packages == self.packages:
                return finder
        sys.meta_path.insert(0, self)
        return self

    def uninstall(self) -> None:
        """Stop deferring modules imported from now on (deferred ones still run at their first use)."""
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def executed(name: str) -> bool:
    """Whether the module ``name`` is imported and its code has run.

    Examples
    --------
    >>> executed("sys"), executed("no_such_module_here")
    (True, False)
    """
    return name in sys.modules and name not in _pending


def langsmith_tracing(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` turns LangSmith tracing on, as LangSmith reads it.

    Examples
    --------
    >>> langsmith_tracing({}), langsmith_tracing({"LANGSMITH_TRACING": "true"})
    (False, True)
    >>> langsmith_tracing({"LANGCHAIN_TRACING_V2": "false", "LANGSMITH_TRACING": "true"})
    False
    """
    for variable in TRACING_VARIABLES:
        value = environ.get(variable, "").strip()
        if value:
            return value == "true"
    return False


def defer_unless_tracing(
    environ: Mapping[str, str], packages: Sequence[str] = RUNNER_DEFERRED
) -> DeferredImports | None:
    """Install a :class:`DeferredImports` for ``packages`` unless ``environ`` turns LangSmith tracing on.

    Returns the installed finder, or ``None`` when tracing is on. Call it before anything imports
    the packages: modules imported before it ran their code already.
    """
    if langsmith_tracing(environ):
        return None
    return DeferredImports(packages).install()
