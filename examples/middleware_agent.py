"""A LangChain v1 agent asking approval with ``HumanInTheLoopMiddleware``, hosted as is.

``create_agent`` with two tools: ``lookup_order`` runs freely, ``issue_refund`` needs a human
(approve, edit or reject). The "model" is a deterministic fake (no network, no API key): from a
message such as ``"refund 40 to c-17"`` it calls both tools in one turn (``issue_refund`` once
per refund asked: ``"refund 40 to c-17 and refund 5 to c-18"`` makes a batch of two), then sums up what the
tools returned. The middleware parks the thread with one interrupt holding the batch of calls it
gates; deployed on agent-wait, each becomes its own question (here: one, ``issue_refund``).

Examples
--------
>>> from langgraph.checkpoint.memory import InMemorySaver
>>> from langgraph.types import Command
>>> graph = build_graph(InMemorySaver())
>>> cfg = {"configurable": {"thread_id": "doc"}}
>>> parked = graph.invoke({"messages": [{"role": "user", "content": "refund 40 to c-17"}]}, cfg)
>>> [r["name"] for r in parked["__interrupt__"][0].value["action_requests"]]
['issue_refund']
>>> done = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg)
>>> REFUNDS.paid("c-17")
[40]
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph

_ASK = re.compile(r"refund\s+(?P<amount>\d+)\s+to\s+(?P<customer>[\w-]+)", re.IGNORECASE)


class RefundLedger:
    """The refunds paid, per customer (what the tool actually ran with)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paid: dict[str, list[int]] = {}

    def pay(self, customer: str, amount: int) -> None:
        with self._lock:
            self._paid.setdefault(customer, []).append(amount)

    def paid(self, customer: str) -> list[int]:
        with self._lock:
            return list(self._paid.get(customer, []))


REFUNDS = RefundLedger()


@tool
def lookup_order(customer: str) -> str:
    """Look up the customer's last order."""
    return f"order o-1 of {customer}: 1 item"


@tool
def issue_refund(customer: str, amount: int) -> str:
    """Refund ``amount`` to ``customer``."""
    REFUNDS.pay(customer, amount)
    return f"refunded {amount} to {customer}"


class ScriptedModel(BaseChatModel):
    """A fake chat model: calls both tools for a refund request, then reports the tools' results."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if results:
            text = "; ".join(str(m.content) for m in results)
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=f"Done: {text}"))])
        asked = next((str(m.content) for m in messages if isinstance(m, HumanMessage)), "")
        asks = list(_ASK.finditer(asked))
        if not asks:
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content="Nothing to refund."))])
        calls: list[dict[str, Any]] = [
            {
                "name": "lookup_order",
                "args": {"customer": asks[0]["customer"]},
                "id": "call-lookup",
                "type": "tool_call",
            }
        ]
        for index, found in enumerate(asks):
            calls.append(
                {
                    "name": "issue_refund",
                    "args": {"customer": found["customer"], "amount": int(found["amount"])},
                    "id": f"call-refund-{index}",
                    "type": "tool_call",
                }
            )
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="", tool_calls=calls))])


def build_graph(
    checkpointer: BaseCheckpointSaver[Any] | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The agent; the runner passes the deployment's checkpointer."""
    return create_agent(
        ScriptedModel(),
        tools=[lookup_order, issue_refund],
        middleware=[
            HumanInTheLoopMiddleware(
                interrupt_on={"issue_refund": {"allowed_decisions": ["approve", "edit", "reject"]}},
                description_prefix="A refund needs your approval",
            )
        ],
        checkpointer=checkpointer,
    )
