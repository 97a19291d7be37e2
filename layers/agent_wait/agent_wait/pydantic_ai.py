"""Pydantic AI adapter (extra ``pydantic-ai``): ``wait`` and ``publish_interrupts`` bound to it.

A ``@wait`` tool raises ``ApprovalRequired(metadata=value)``; the run ends with a
``DeferredToolRequests`` output, which ``publish_interrupts`` reads. The host resumes with
``DeferredToolResults(approvals={id: ToolApproved()}, metadata={id: answer})``: the framework
calls the tool again with ``ctx.tool_call_approved`` and the wrapper applies the answer rules.
Pydantic AI has no thread of its own: async mode reads ``ctx.deps.thread_id`` (or
``ctx.deps["thread_id"]``).

Examples
--------
>>> from pydantic_ai import Agent, RunContext  # doctest: +SKIP
>>> from agent_wait.pydantic_ai import wait, publish_interrupts  # doctest: +SKIP
>>> @agent.tool  # doctest: +SKIP
... @wait("approval")
... def issue_refund(ctx: RunContext[Deps], customer: str, amount: int) -> dict: ...
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

try:
    from pydantic_ai import ApprovalRequired, CallDeferred, DeferredToolRequests, RunContext
except ImportError as exc:
    from agent_wait.errors import MissingExtraError

    raise MissingExtraError("pydantic-ai", module="agent_wait.pydantic_ai") from exc

from agent_wait.framework import Framework
from agent_wait.publish import make_publish_interrupts
from agent_wait.wait import make_wait

__all__ = ["PydanticAIFramework", "publish_interrupts", "wait"]

APPROVE: dict[str, Any] = {"action": "approve"}


class PydanticAIFramework(Framework):
    """Parks a tool call with ``ApprovalRequired``; reads ``DeferredToolRequests``.

    - ``interrupt``: on the approved re-run returns ``ctx.tool_call_metadata`` (the answer), or
      ``{"action": "approve"}`` when the host sent none; otherwise raises ``ApprovalRequired``.
    - ``interrupt_with_id``: also ``ctx.tool_call_id``, the id the question is published under.
    - ``interrupts_in``: ``(tool_call_id, metadata[id])`` for every approval and deferred call
      of a ``DeferredToolRequests`` output; a call without metadata is published as a bare
      ``{"function", "args"}`` value.
    - ``current_thread_id``: ``ctx.deps.thread_id`` or ``ctx.deps["thread_id"]``.
    - hidden: ``ctx`` and any parameter annotated ``RunContext``.

    Examples
    --------
    >>> PydanticAIFramework().is_hidden("ctx", None)
    True
    """

    name = "pydantic-ai"
    hidden_params = ("ctx",)

    def interrupt(self, value: Any, call_args: Mapping[str, Any]) -> Any:
        ctx = _run_context(call_args)
        if ctx.tool_call_approved:
            return ctx.tool_call_metadata if ctx.tool_call_metadata is not None else dict(APPROVE)
        raise ApprovalRequired(metadata=value)

    def interrupt_with_id(self, value: Any, call_args: Mapping[str, Any]) -> tuple[Any, str | None]:
        answer = self.interrupt(value, call_args)
        tool_call_id = _run_context(call_args).tool_call_id
        return answer, str(tool_call_id) if tool_call_id else None

    def is_control_flow(self, exc: BaseException) -> bool:
        return isinstance(exc, (ApprovalRequired, CallDeferred))

    def interrupts_in(self, result: Any) -> list[tuple[str, Any]]:
        output = result if isinstance(result, DeferredToolRequests) else getattr(result, "output", None)
        if not isinstance(output, DeferredToolRequests):
            return []
        found: list[tuple[str, Any]] = []
        for call in [*output.approvals, *output.calls]:
            value = output.metadata.get(call.tool_call_id)
            if value is None:
                value = {"function": call.tool_name, "args": call.args_as_dict()}
            found.append((call.tool_call_id, value))
        return found

    def current_thread_id(self, call_args: Mapping[str, Any]) -> str:
        deps = _run_context(call_args).deps
        thread_id = deps.get("thread_id") if isinstance(deps, Mapping) else getattr(deps, "thread_id", None)
        if not thread_id:
            raise RuntimeError(
                "@wait(mode='async') on Pydantic AI needs ctx.deps.thread_id (or deps['thread_id'])"
            )
        return str(thread_id)

    def is_hidden(self, name: str, annotation: Any) -> bool:
        if name in self.hidden_params:
            return True
        if isinstance(annotation, str):
            return annotation.startswith("RunContext")
        origin = typing.get_origin(annotation) or annotation
        return isinstance(origin, type) and issubclass(origin, RunContext)


def _run_context(call_args: Mapping[str, Any]) -> RunContext[Any]:
    for value in call_args.values():
        if isinstance(value, RunContext):
            return value
    raise TypeError("a Pydantic AI @wait tool must take the RunContext (ctx: RunContext[...]) as a parameter")


wait = make_wait(PydanticAIFramework())
publish_interrupts = make_publish_interrupts(PydanticAIFramework())
