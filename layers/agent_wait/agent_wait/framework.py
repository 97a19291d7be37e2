"""The one interface the core is written against: a framework that can park a call.

``@wait`` and ``publish_interrupts`` never import a framework. They ask a :class:`Framework` to
park on a value, to list the parked questions in a run's result, and (async mode) to name the
current thread. Each adapter (``agent_wait.langgraph``, ``agent_wait.pydantic_ai``,
``agent_wait.strands``) is one implementor; ``agent_wait.testing.FrameworkConformance`` is the
suite every implementor passes.

Examples
--------
>>> class Immediate(Framework):
...     name = "immediate"
...     def interrupt(self, value, call_args):
...         return {"action": "approve"}
...     def interrupts_in(self, result):
...         return []
...     def current_thread_id(self, call_args):
...         return "t1"
>>> Immediate().is_hidden("self", None)
False
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Framework"]


class Framework(ABC):
    """How a framework parks a call and reports what is parked.

    Attributes
    ----------
    name:
        Short name, e.g. ``"langgraph"``.
    hidden_params:
        Parameter names the framework injects (state, config, a run context ...). They are kept
        out of the published arguments: a human approves the proposal, not the plumbing.

    Examples
    --------
    See the module docstring.
    """

    name: str = "framework"
    hidden_params: tuple[str, ...] = ()

    @abstractmethod
    def interrupt(self, value: Any, call_args: Mapping[str, Any]) -> Any:
        """Park the call on ``value``; when the call is re-run with an answer, return the answer.

        ``call_args`` are the call's bound arguments, hidden ones included, so an adapter can
        find its own context object among them.
        """

    @abstractmethod
    def interrupts_in(self, result: Any) -> list[tuple[str, Any]]:
        """The ``(question id, interrupt value)`` pairs in what a run returned; empty when done."""

    @abstractmethod
    def current_thread_id(self, call_args: Mapping[str, Any]) -> str:
        """The thread the current call runs on (async mode only)."""

    def interrupt_with_id(self, value: Any, call_args: Mapping[str, Any]) -> tuple[Any, str | None]:
        """Like :meth:`interrupt`, and also the id the answered question was published under.

        ``@wait`` uses the id to emit a :class:`~agent_wait.receipts.Receipt` and to derive a
        declared ``operation_id``. The default returns ``None`` for the id (unknown): such a
        framework emits no receipts, and refuses ``@wait`` functions declaring ``operation_id``.
        """
        return self.interrupt(value, call_args), None

    def is_control_flow(self, exc: BaseException) -> bool:
        """Whether ``exc``, raised by a ``@wait`` body, parks or reroutes the run rather than failing it.

        Such an exception (LangGraph's ``GraphBubbleUp``, ...) is re-raised without a receipt: the
        call has not finished. The default is ``False``.
        """
        return False

    def is_hidden(self, name: str, annotation: Any) -> bool:
        """Whether parameter ``name`` (annotated ``annotation``) is injected by the framework.

        The default checks :attr:`hidden_params`; adapters also recognise their injection
        annotations. ``annotation`` may be a string when it could not be resolved.
        """
        return name in self.hidden_params
