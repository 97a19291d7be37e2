"""Strands Agents adapter (extra ``strands``): ``wait`` and ``publish_interrupts`` bound to it.

A ``@wait`` tool (declared ``@tool(context=True)``, so Strands passes its ``ToolContext``)
parks with ``tool_context.interrupt("agent_wait:<function>", reason=value)``: Strands catches the
``InterruptException``, stops the run with ``stop_reason == "interrupt"`` and lists the question in
``result.interrupts``, which ``publish_interrupts`` reads. The host resumes by calling the *same*
agent (or one restored by a session manager) with
``agent([{"interruptResponse": {"interruptId": id, "response": answer}}])``: Strands runs the
tool again without calling the model, ``interrupt`` returns the answer and the wrapper applies
the rules. Async mode reads the thread from ``agent(prompt, invocation_state={"thread_id": ...})``
or from the agent's state (``Agent(state={"thread_id": ...})``).

Examples
--------
>>> from strands import Agent, tool
>>> from strands.types.tools import ToolContext
>>> @tool(context=True)
... @wait("approval")
... def issue_refund(customer: str, amount: int, tool_context: ToolContext) -> dict:
...     return {"refunded": amount}
>>> sorted(issue_refund.tool_spec["inputSchema"]["json"]["properties"])
['amount', 'customer']
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

try:
    from strands.interrupt import InterruptException
    from strands.types.tools import ToolContext
except ImportError as exc:
    from agent_wait.errors import MissingExtraError

    raise MissingExtraError("strands", module="agent_wait.strands") from exc

from agent_wait.framework import Framework
from agent_wait.publish import make_publish_interrupts
from agent_wait.wait import make_wait

__all__ = ["INTERRUPT_NAME", "StrandsFramework", "interrupt_name", "publish_interrupts", "wait"]

INTERRUPT_NAME = "agent_wait"
"""Prefix of the Strands interrupt names this adapter raises (``"agent_wait:<function>"``)."""


def interrupt_name(function: str) -> str:
    """The Strands interrupt name of a ``@wait`` call of ``function``.

    Strands derives an interrupt's id from the tool call's id and the name alone, and hands a
    stored answer back to any later ``interrupt`` with the same id. The function is part of the
    name so that two ``@wait`` functions called from one tool call are asked separately, instead
    of the second silently receiving the first one's answer.

    Examples
    --------
    >>> interrupt_name("issue_refund")
    'agent_wait:issue_refund'
    """
    return f"{INTERRUPT_NAME}:{function}"


class StrandsFramework(Framework):
    """Parks a tool call with ``ToolContext.interrupt``; reads ``AgentResult.interrupts``.

    - ``interrupt``: ``tool_context.interrupt(interrupt_name(function), reason=value)``; on the
      resumed call Strands returns the ``interruptResponse`` answer.
    - ``interrupt_with_id``: also the tool context's id for that interrupt name, the id the
      question is published under.
    - ``is_control_flow``: ``InterruptException`` (an interrupt raised inside a body).
    - ``interrupts_in``: ``(Interrupt.id, Interrupt.reason)`` for each interrupt of the result,
      including interrupts raised by hooks (published as bare values).
    - ``current_thread_id``: ``tool_context.invocation_state["thread_id"]``, else
      ``tool_context.agent.state.get("thread_id")``.
    - hidden: ``tool_context``, ``agent`` and any parameter annotated ``ToolContext``.

    Examples
    --------
    >>> StrandsFramework().is_hidden("tool_context", None)
    True
    >>> StrandsFramework().interrupts_in(object())
    []
    """

    name = "strands"
    hidden_params = ("tool_context", "agent")

    def interrupt(self, value: Any, call_args: Mapping[str, Any]) -> Any:
        return _tool_context(call_args).interrupt(_name_of(value), reason=value)

    def interrupt_with_id(self, value: Any, call_args: Mapping[str, Any]) -> tuple[Any, str | None]:
        ctx = _tool_context(call_args)
        answer = ctx.interrupt(_name_of(value), reason=value)
        try:
            # How Strands names the interrupt of this tool call (the id it was published under).
            question_id = str(ctx._interrupt_id(_name_of(value)))
        except AttributeError:
            question_id = None
        return answer, question_id

    def is_control_flow(self, exc: BaseException) -> bool:
        return isinstance(exc, InterruptException)

    def interrupts_in(self, result: Any) -> list[tuple[str, Any]]:
        found = getattr(result, "interrupts", None) or []
        return [(str(item.id), item.reason) for item in found]

    def current_thread_id(self, call_args: Mapping[str, Any]) -> str:
        ctx = _tool_context(call_args)
        state = ctx.invocation_state or {}
        thread_id = state.get("thread_id")
        nested = state.get("invocation_state")
        if not thread_id and isinstance(nested, Mapping):
            # agent(prompt, invocation_state={...}, other_kwarg=...) nests the dict one level down.
            thread_id = nested.get("thread_id")
        agent_state = getattr(ctx.agent, "state", None)
        if not thread_id and agent_state is not None:
            thread_id = agent_state.get("thread_id")
        if not thread_id:
            raise RuntimeError(
                "@wait(mode='async') on Strands needs agent(..., invocation_state={'thread_id': ...}) "
                "or Agent(state={'thread_id': ...})"
            )
        return str(thread_id)

    def is_hidden(self, name: str, annotation: Any) -> bool:
        if name in self.hidden_params:
            return True
        if isinstance(annotation, str):
            return "ToolContext" in annotation
        origin = typing.get_origin(annotation) or annotation
        return isinstance(origin, type) and issubclass(origin, ToolContext)


def _name_of(value: Any) -> str:
    question = value.get("question") if isinstance(value, Mapping) else None
    function = question.get("function") if isinstance(question, Mapping) else None
    return interrupt_name(str(function)) if function else INTERRUPT_NAME


def _tool_context(call_args: Mapping[str, Any]) -> ToolContext:
    for value in call_args.values():
        if isinstance(value, ToolContext):
            return value
    raise TypeError("a Strands @wait tool must be declared @tool(context=True) and take the ToolContext")


wait = make_wait(StrandsFramework())
publish_interrupts = make_publish_interrupts(StrandsFramework())
