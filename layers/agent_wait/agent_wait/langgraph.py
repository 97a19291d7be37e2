"""LangGraph adapter (extra ``langgraph``): ``wait`` and ``publish_interrupts`` bound to LangGraph.

Examples
--------
>>> from agent_wait.langgraph import wait, publish_interrupts  # doctest: +SKIP
>>> @wait("approval")  # doctest: +SKIP
... def issue_refund(customer: str, amount: int) -> dict: ...
>>> result = graph.invoke(inputs, {"configurable": {"thread_id": "t1"}})  # doctest: +SKIP
>>> publish_interrupts(result, "t1", announce)  # doctest: +SKIP
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Mapping, Sequence
from typing import Any

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.config import get_config
    from langgraph.errors import GraphBubbleUp
    from langgraph.runtime import Runtime
    from langgraph.store.base import BaseStore
    from langgraph.types import Interrupt, interrupt
except ImportError as exc:
    from agent_wait.errors import MissingExtraError

    raise MissingExtraError("langgraph", module="agent_wait.langgraph") from exc

from agent_wait.framework import Framework
from agent_wait.langchain_hitl import batch_questions, is_hitl_request
from agent_wait.publish import make_publish_interrupts
from agent_wait.wait import make_wait

__all__ = ["LangGraphFramework", "publish_interrupts", "question_ids", "wait"]

# Names LangGraph injects into nodes and ToolNode tools; never part of what a human approves.
_INJECTED_NAMES = ("state", "config", "runtime", "store", "writer", "tool_call_id")
# Fallback for annotations that could not be resolved (forward references under TYPE_CHECKING).
_INJECTED_ANNOTATION_NAMES = (
    "InjectedState",
    "InjectedStore",
    "InjectedToolCallId",
    "InjectedToolArg",
    "ToolRuntime",
    "RunnableConfig",
    "Runtime",
    "BaseStore",
    "StreamWriter",
)


class LangGraphFramework(Framework):
    """Parks a call with ``langgraph.types.interrupt``; reads ``result["__interrupt__"]``.

    - ``interrupt``: ``interrupt(value)``; on the resume re-run LangGraph returns the answer.
    - ``interrupt_with_id``: also the answered interrupt's id, recomputed the way LangGraph
      computes ``Interrupt.id`` (checkpoint namespace and the answer's slot in the task's resume
      values; pinned by ``tests/unit/langgraph``).
    - ``is_control_flow``: ``GraphBubbleUp`` (an interrupt or a ``Command`` from inside a body).
    - ``interrupts_in``: ``(Interrupt.id, Interrupt.value)`` for each interrupt in the result
      (a dict with ``__interrupt__``, an object with ``.interrupts``, or a list of Interrupts);
      the batched interrupt of LangChain's ``HumanInTheLoopMiddleware`` gives one pair per
      action request (``agent_wait.langchain_hitl``).
    - ``current_thread_id``: ``get_config()["configurable"]["thread_id"]``.
    - hidden: ``state``, ``config``, ``runtime``, ``store``, ``writer``, ``tool_call_id``, and any
      parameter annotated ``InjectedState`` / ``InjectedStore`` / ``InjectedToolCallId`` (any
      ``InjectedToolArg``), ``ToolRuntime``, ``RunnableConfig``, ``Runtime`` or ``BaseStore``.

    Examples
    --------
    >>> LangGraphFramework().interrupts_in({"messages": []})
    []
    """

    name = "langgraph"
    hidden_params = _INJECTED_NAMES

    def interrupt(self, value: Any, call_args: Mapping[str, Any]) -> Any:
        return interrupt(value)

    def interrupt_with_id(self, value: Any, call_args: Mapping[str, Any]) -> tuple[Any, str | None]:
        answer = interrupt(value)
        return answer, _answered_interrupt_id(answer)

    def is_control_flow(self, exc: BaseException) -> bool:
        return isinstance(exc, GraphBubbleUp)

    def interrupts_in(self, result: Any) -> list[tuple[str, Any]]:
        if isinstance(result, Mapping):
            found: Any = result.get("__interrupt__", ())
        elif isinstance(result, Sequence) and not isinstance(result, str):
            found = result
        else:
            found = getattr(result, "interrupts", ()) or ()
        pairs: list[tuple[str, Any]] = []
        for item in found:
            if not isinstance(item, Interrupt):
                continue
            if is_hitl_request(item.value):
                # LangChain's HumanInTheLoopMiddleware: one question per action request.
                pairs += batch_questions(item.id, item.value)
            else:
                pairs.append((item.id, item.value))
        return pairs

    def current_thread_id(self, call_args: Mapping[str, Any]) -> str:
        config = call_args.get("config")
        if not isinstance(config, Mapping):
            config = get_config()
        thread_id = config.get("configurable", {}).get("thread_id")
        if not thread_id:
            raise RuntimeError("@wait(mode='async') needs a thread_id in the run's configurable")
        return str(thread_id)

    def is_hidden(self, name: str, annotation: Any) -> bool:
        if name in self.hidden_params:
            return True
        if isinstance(annotation, str):
            return any(marker in annotation for marker in _INJECTED_ANNOTATION_NAMES)
        return _is_injected(annotation)


def _answered_interrupt_id(answer: Any) -> str | None:
    """The ``Interrupt.id`` of the interrupt ``answer`` was just returned for, or ``None``.

    LangGraph 1.2 gives the interrupt raised while a task holds ``n`` answers the id
    ``_interrupt_id(checkpoint_ns, n)`` and hands answers back by slot, from the task's scratchpad
    list of resume values; the answer ``interrupt()`` returned is the very object in its slot.
    These are LangGraph internals: any change makes this return ``None`` (the pinned tests fail),
    never a wrong id silently.
    """
    try:
        from langgraph._internal._constants import CONFIG_KEY_CHECKPOINT_NS, CONFIG_KEY_SCRATCHPAD
        from langgraph.types import _interrupt_id

        configurable = get_config()["configurable"]
        namespace = configurable[CONFIG_KEY_CHECKPOINT_NS]
        resume = configurable[CONFIG_KEY_SCRATCHPAD].resume
    except (ImportError, KeyError, AttributeError, RuntimeError):
        return None
    slots = [index for index, item in enumerate(resume) if item is answer]
    if len(slots) != 1:
        return None  # not found, or one object answering several slots: ambiguous
    return str(_interrupt_id(namespace, slots[0]))


def _injected_tool_arg() -> type | None:
    """langchain_core's ``InjectedToolArg``, or ``None`` while its module is not loaded.

    An annotation can only carry an ``InjectedToolArg`` (or a subclass, ``InjectedState``...) once
    ``langchain_core.tools.base`` is loaded, so the check needs no import of its own, and a graph
    that never uses LangChain tools does not pay for loading them.
    """
    marker = getattr(sys.modules.get("langchain_core.tools.base"), "InjectedToolArg", None)
    return marker if isinstance(marker, type) else None


def _is_injected(annotation: Any) -> bool:
    if annotation is None:
        return False
    candidates = [annotation]
    if typing.get_origin(annotation) is typing.Annotated:
        base, *metadata = typing.get_args(annotation)
        marker = _injected_tool_arg()
        if marker is not None and any(
            isinstance(meta, marker) or (isinstance(meta, type) and issubclass(meta, marker))
            for meta in metadata
        ):
            return True
        candidates.append(base)
    for candidate in candidates:
        origin = typing.get_origin(candidate) or candidate
        if candidate is RunnableConfig or origin is RunnableConfig:
            return True
        if isinstance(origin, type) and (
            issubclass(origin, (Runtime, BaseStore)) or _is_directly_injected(origin)
        ):
            return True
    return False


def _is_directly_injected(cls: type) -> bool:
    # ToolRuntime derives from langchain_core's private _DirectlyInjectedToolArg; match by name so
    # a rename inside langchain_core degrades to the parameter-name rule instead of an ImportError.
    return any(base.__name__ == "_DirectlyInjectedToolArg" for base in cls.__mro__)


def question_ids(interrupts: Any) -> list[str]:
    """The question ids the interrupts of a result or state stand for (a batch gives several)."""
    return [question_id for question_id, _ in LangGraphFramework().interrupts_in(interrupts)]


wait = make_wait(LangGraphFramework())
publish_interrupts = make_publish_interrupts(LangGraphFramework())
