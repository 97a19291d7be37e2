"""Load the graph the runner runs from ``AGENT_WAIT_GRAPH=module:attribute``.

The attribute may be a factory taking ``checkpointer=`` and returning a compiled graph (the
recommended form: the deployment chooses the checkpointer) or a ``StateGraph`` to compile with the
checkpointer. An already compiled graph is refused with an error that says so: it cannot be
re-compiled onto the deployment's checkpointer, and without it a parked thread could not resume.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph

VARIABLE = "AGENT_WAIT_GRAPH"


class GraphLoadError(RuntimeError):
    """``AGENT_WAIT_GRAPH`` does not name a usable graph; the message says why."""


def load_graph(spec: str, checkpointer: BaseCheckpointSaver[Any] | None) -> CompiledStateGraph[Any]:
    """Import ``module:attribute`` and turn it into a compiled graph using ``checkpointer``.

    Raises
    ------
    GraphLoadError
        The spec is malformed, the module or attribute is missing, the factory fails or returns
        something else, or the attribute is an already compiled graph.

    Examples
    --------
    >>> graph = load_graph("examples.refund_agent:build_graph", InMemorySaver())  # doctest: +SKIP
    """
    from langgraph.graph import StateGraph
    from langgraph.pregel import Pregel

    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise GraphLoadError(f"{VARIABLE}={spec!r}: expected 'module:attribute'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise GraphLoadError(f"{VARIABLE}={spec!r}: cannot import {module_name!r}: {exc}") from exc
    try:
        target = getattr(module, attribute)
    except AttributeError as exc:
        raise GraphLoadError(f"{VARIABLE}={spec!r}: {module_name!r} has no attribute {attribute!r}") from exc

    if isinstance(target, StateGraph):
        return target.compile(checkpointer=checkpointer)
    if isinstance(target, Pregel):
        raise GraphLoadError(
            f"{VARIABLE}={spec!r} is an already compiled graph, which cannot be re-compiled onto the "
            "deployment's checkpointer: export a factory taking checkpointer= or the StateGraph instead"
        )
    if callable(target):
        try:
            built = target(checkpointer=checkpointer)
        except TypeError as exc:
            raise GraphLoadError(
                f"{VARIABLE}={spec!r}: the factory must accept checkpointer=: {exc}"
            ) from exc
        if isinstance(built, StateGraph):
            return built.compile(checkpointer=checkpointer)
        if not isinstance(built, Pregel):
            raise GraphLoadError(
                f"{VARIABLE}={spec!r}: the factory returned {type(built).__name__}, not a compiled graph"
            )
        return built  # type: ignore[return-value]
    raise GraphLoadError(
        f"{VARIABLE}={spec!r} is a {type(target).__name__}: expected a factory taking checkpointer= "
        "or a StateGraph"
    )
