"""Strands Agents adapter (extra ``strands``): ``wait`` and ``publish_interrupts`` bound to it.

A ``@wait`` tool (declared ``@tool(context=True)``, so Strands passes its ``ToolContext``)
parks with ``tool_context.interrupt("agent_wait", reason=value)``; the run stops with
``stop_reason == "interrupt"`` and ``result.interrupts``, which ``publish_interrupts`` reads.
The host resumes with ``agent([{"interruptResponse": {"interruptId": id, "response": answer}}])``;
Strands runs the tool again, ``interrupt`` returns the answer and the wrapper applies the rules.
Async mode reads the thread from ``invocation_state["thread_id"]`` (``agent(prompt,
thread_id=...)``) or the agent's state.

Examples
--------
>>> from strands import Agent, tool  # doctest: +SKIP
>>> from agent_wait.strands import wait, publish_interrupts  # doctest: +SKIP
>>> @tool(context=True)  # doctest: +SKIP
... @wait("approval")
... def issue_refund(customer: str, amount: int, tool_context: ToolContext) -> dict: ...
"""

from __future__ import annotations

import typing
from typing import Any

try:
    from strands.types.tools import ToolContext
except ImportError as exc:
    from agent_wait.errors import MissingExtraError

    raise MissingExtraError("strands", module="agent_wait.strands") from exc

from agent_wait.framework import Framework
from agent_wait.publish import make_publish_interrupts
from agent_wait.wait import make_wait

if typing.TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["INTERRUPT_NAME", "StrandsFramework", "publish_interrupts", "wait"]

INTERRUPT_NAME = "agent_wait"
"""The Strands interrupt name; its id is derived from the tool call's id and this name."""


class StrandsFramework(Framework):
    """Parks a tool call with ``ToolContext.interrupt``; reads ``AgentResult.interrupts``.

    - ``interrupt``: ``tool_context.interrupt("agent_wait", reason=value)``.
    - ``interrupts_in``: ``(Interrupt.id, Interrupt.reason)`` for each interrupt of the result.
    - ``current_thread_id``: ``tool_context.invocation_state["thread_id"]``, else
      ``tool_context.agent.state.get("thread_id")``.
    - hidden: ``tool_context``, ``agent`` and any parameter annotated ``ToolContext``.

    Examples
    --------
    >>> StrandsFramework().is_hidden("tool_context", None)  # doctest: +SKIP
    True
    """

    name = "strands"
    hidden_params = ("tool_context", "agent")

    def interrupt(self, value: Any, call_args: Mapping[str, Any]) -> Any:
        return _tool_context(call_args).interrupt(INTERRUPT_NAME, reason=value)

    def interrupts_in(self, result: Any) -> list[tuple[str, Any]]:
        found = getattr(result, "interrupts", None) or []
        return [(str(item.id), item.reason) for item in found]

    def current_thread_id(self, call_args: Mapping[str, Any]) -> str:
        ctx = _tool_context(call_args)
        thread_id = (ctx.invocation_state or {}).get("thread_id")
        if not thread_id and ctx.agent is not None:
            thread_id = ctx.agent.state.get("thread_id")
        if not thread_id:
            raise RuntimeError(
                "@wait(mode='async') on Strands needs agent(..., thread_id=...) or agent.state['thread_id']"
            )
        return str(thread_id)

    def is_hidden(self, name: str, annotation: Any) -> bool:
        if name in self.hidden_params:
            return True
        if isinstance(annotation, str):
            return "ToolContext" in annotation
        origin = typing.get_origin(annotation) or annotation
        return isinstance(origin, type) and issubclass(origin, ToolContext)


def _tool_context(call_args: Mapping[str, Any]) -> ToolContext:
    for value in call_args.values():
        if isinstance(value, ToolContext):
            return value
    raise TypeError("a Strands @wait tool must be declared @tool(context=True) and take the ToolContext")


wait = make_wait(StrandsFramework())
publish_interrupts = make_publish_interrupts(StrandsFramework())
