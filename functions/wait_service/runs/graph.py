"""Load the agent the runner runs from ``AGENT_WAIT_GRAPH=module:attribute``.

``AGENT_WAIT_FRAMEWORK`` names its framework (``langgraph``, ``pydantic_ai``, ``strands``); unset,
it is detected from the attribute. A Pydantic AI ``Agent`` is hosted by
:class:`wait_service.runs.hosted_pydantic_ai.PydanticAIGraph`, its state in the checkpoint table; a
factory ``build_agent(session_manager=...)`` of a Strands ``Agent`` by
:class:`wait_service.runs.hosted_strands.StrandsGraph`, its session in the checkpoint bucket.

For LangGraph, the attribute may be a factory taking ``checkpointer=`` and returning a compiled graph (the
recommended form: the deployment chooses the checkpointer) or a ``StateGraph`` to compile with the
checkpointer. An already compiled graph is refused with an error that says so: it cannot be
re-compiled onto the deployment's checkpointer, and without it a parked thread could not resume.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from langgraph.checkpoint.base import BaseCheckpointSaver

    from wait_service.runs.agent_state import AgentStateStore

VARIABLE = "AGENT_WAIT_GRAPH"
FRAMEWORK_VARIABLE = "AGENT_WAIT_FRAMEWORK"
# The frameworks the runner hosts.
FRAMEWORKS: tuple[str, ...] = ("langgraph", "pydantic_ai", "strands")


class GraphLoadError(RuntimeError):
    """``AGENT_WAIT_GRAPH`` does not name a usable graph; the message says why."""


def detect_framework(target: Any) -> str:
    """The framework of an imported attribute: ``pydantic_ai`` for a Pydantic AI ``Agent``, else LangGraph.

    Examples
    --------
    >>> detect_framework(object())
    'langgraph'
    """
    pydantic_ai = sys.modules.get("pydantic_ai")
    if pydantic_ai is not None and isinstance(target, pydantic_ai.Agent):
        return "pydantic_ai"
    strands = sys.modules.get("strands")
    if strands is not None and isinstance(target, strands.Agent):
        return "strands"
    if callable(target) and not isinstance(target, type):
        try:
            if "session_manager" in inspect.signature(target).parameters:
                return "strands"
        except (TypeError, ValueError):
            pass
    return "langgraph"


def load_graph(
    spec: str,
    checkpointer: BaseCheckpointSaver[Any] | None,
    *,
    framework: str | None = None,
    store: AgentStateStore | None = None,
    sessions: Callable[[str], Any] | None = None,
) -> Any:
    """Import ``module:attribute`` and turn it into what the runner invokes.

    ``framework`` (``None``: detected) decides how: a LangGraph graph is compiled with
    ``checkpointer``; a Pydantic AI agent is hosted with ``store``, a Strands agent factory with
    ``sessions`` (a thread id's session manager); ``None``: to read the input schema only.

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

    if framework is not None and framework not in FRAMEWORKS:
        raise GraphLoadError(f"{FRAMEWORK_VARIABLE}={framework!r}: expected one of {', '.join(FRAMEWORKS)}")
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

    found = detect_framework(target)
    if framework is not None and framework != found:
        what = {
            "pydantic_ai": "a pydantic_ai.Agent",
            "strands": "a factory taking session_manager= and returning a strands.Agent",
        }.get(framework, "a LangGraph graph or factory")
        raise GraphLoadError(
            f"{VARIABLE}={spec!r} is a {type(target).__name__}, not {what} "
            f"({FRAMEWORK_VARIABLE}={framework}): name the agent's object, or the framework it is written in"
        )
    if found == "pydantic_ai":
        from wait_service.runs.hosted_pydantic_ai import PydanticAIGraph

        return PydanticAIGraph(target, store)
    if found == "strands":
        if not callable(target) or type(target).__module__.startswith("strands"):
            raise GraphLoadError(
                f"{VARIABLE}={spec!r} is a strands.Agent: export a factory taking session_manager= "
                "instead (each thread's agent is built with its own session)"
            )
        from wait_service.runs.hosted_strands import StrandsGraph

        return StrandsGraph(target, sessions)
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
        return built
    raise GraphLoadError(
        f"{VARIABLE}={spec!r} is a {type(target).__name__}: expected a factory taking checkpointer= "
        "or a StateGraph"
    )
