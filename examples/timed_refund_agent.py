"""The refund agent, with the approval's lifecycle chosen per run: ttl, default, ladder, reminders.

Same graph as :mod:`examples.refund_agent` (plan → act, which asks → respond), but ``act`` builds
its ``@wait`` from the run's ``policy`` input, so one deployment can show every way a wait ends:

- ``{"ttl": 5, "on_expiry": {"action": "default", "answer": {"action": "reject", "reason": "late"}}}``
- ``{"ttl": 5}`` (expires with a rejection)
- ``{"ttl": 5, "on_expiry": {"action": "escalate", "to": ["managers", "directors"]}}``
- ``{"ttl": 60, "reminders": [10, 30]}``

Examples
--------
>>> from langgraph.checkpoint.memory import InMemorySaver
>>> graph = build_graph(InMemorySaver())
>>> cfg = {"configurable": {"thread_id": "doc"}}
>>> parked = graph.invoke({"customer": "c-17", "amount": 40, "policy": {"ttl": 60}}, cfg)
>>> parked["__interrupt__"][0].value["__wait__"]["ttl"]
60
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph.graph import StateGraph
from pydantic import Field

from agent_wait import approval
from agent_wait.langgraph import wait
from examples.refund_agent import RefundInput, RefundState, wire

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph


class TimedRefundInput(RefundInput):
    """The refund's input, and the keyword arguments of the ``approval(...)`` its question uses."""

    policy: dict[str, Any] = Field(default_factory=dict, description="e.g. {'ttl': 5, 'reminders': [1]}")


class TimedRefundState(RefundState, total=False):
    policy: dict[str, Any]


def issue_refund(customer: str, amount: float) -> dict[str, Any]:
    """Pay ``amount`` back to ``customer``: the external effect a human approves."""
    return {"refund_id": f"rf-{customer}-{amount}", "customer": customer, "amount": amount}


def act(state: TimedRefundState) -> TimedRefundState:
    # The policy is the run's: `approval(**policy)` refuses one that makes no sense.
    ask_first = wait(approval(**state.get("policy", {})))(issue_refund)
    outcome = ask_first(**state["proposal"]["args"])
    if isinstance(outcome, dict) and "refund_id" in outcome:
        return {"refund": outcome, "rejection": None}
    return {"refund": None, "rejection": outcome if isinstance(outcome, dict) else {"answer": outcome}}


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> CompiledStateGraph[Any]:
    """The compiled agent; the runner passes the deployment's checkpointer."""
    graph = wire(StateGraph(TimedRefundState, input_schema=TimedRefundInput), act)
    compiled: CompiledStateGraph[Any] = graph.compile(checkpointer=checkpointer)
    return compiled
