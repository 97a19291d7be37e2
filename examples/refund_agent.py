"""A refund agent that asks a human before it pays anything.

The "model" is a deterministic fake (no network, no API key): from ``{"customer", "amount"}`` it
proposes one call of ``issue_refund(customer, amount)``, which ``@wait("approval")`` parks until a
human answers. Approve runs it, approve with ``args`` runs it with the edited arguments, reject
returns the rejection in its place. A thread asks exactly one question: the single
``interrupt()`` lives in the ``act`` node (one per node, see the library's LangGraph notes).

Examples
--------
>>> from langgraph.checkpoint.memory import InMemorySaver
>>> from langgraph.types import Command
>>> graph = build_graph(InMemorySaver())
>>> cfg = {"configurable": {"thread_id": "doc"}}
>>> parked = graph.invoke({"customer": "c-17", "amount": 40}, cfg)
>>> [i.value["question"] for i in parked["__interrupt__"]]
[{'function': 'issue_refund', 'args': {'customer': 'c-17', 'amount': 40}}]
>>> qid = parked["__interrupt__"][0].id
>>> graph.invoke(Command(resume={qid: {"action": "approve", "args": {"amount": 25}}}), cfg)["refund"]
{'refund_id': 'rf-c-17-25', 'customer': 'c-17', 'amount': 25}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, Field

from agent_wait.langgraph import wait

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph


class RefundInput(BaseModel):
    """What a run needs: the api checks a run's input against this schema before queueing it."""

    customer: str = Field(min_length=1, description="the customer to refund")
    amount: float = Field(gt=0, description="the amount to refund")


class RefundState(TypedDict, total=False):
    customer: str
    amount: float
    proposal: dict[str, Any]
    refund: dict[str, Any] | None
    rejection: dict[str, Any] | None
    reply: str


class FakeRefundModel:
    """Stands in for a chat model: the same input always yields the same proposal and reply."""

    def propose(self, customer: str, amount: float) -> dict[str, Any]:
        """The tool call a model would make for a refund request."""
        return {"tool": "issue_refund", "args": {"customer": customer, "amount": amount}}

    def summarize(self, state: RefundState) -> str:
        """The model's final message to the customer."""
        refund = state.get("refund")
        if refund:
            return f"Refunded {refund['amount']} to {refund['customer']} ({refund['refund_id']})."
        rejection = state.get("rejection") or {}
        reason = rejection.get("reason")
        return "The refund was not approved" + (f": {reason}." if reason else ".")


MODEL = FakeRefundModel()


@wait("approval")
def issue_refund(customer: str, amount: float) -> dict[str, Any]:
    """Pay ``amount`` back to ``customer``: the external effect a human approves."""
    return {"refund_id": f"rf-{customer}-{amount}", "customer": customer, "amount": amount}


def plan(state: RefundState) -> RefundState:
    return {"proposal": MODEL.propose(state["customer"], state["amount"])}


def act(state: RefundState) -> RefundState:
    # The only interrupt of the graph: issue_refund parks here until a human answers.
    outcome = issue_refund(**state["proposal"]["args"])
    if isinstance(outcome, dict) and "refund_id" in outcome:
        return {"refund": outcome, "rejection": None}
    return {"refund": None, "rejection": outcome if isinstance(outcome, dict) else {"answer": outcome}}


def respond(state: RefundState) -> RefundState:
    return {"reply": MODEL.summarize(state)}


def builder() -> StateGraph[RefundState, None, RefundInput, RefundState]:
    """The uncompiled graph: plan → act (asks) → respond."""
    graph = StateGraph(RefundState, input_schema=RefundInput)
    graph.add_node("plan", plan)
    graph.add_node("act", act)
    graph.add_node("respond", respond)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "act")
    graph.add_edge("act", "respond")
    graph.add_edge("respond", END)
    return graph


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> CompiledStateGraph[Any]:
    """The compiled refund agent; the runner passes the deployment's checkpointer.

    Examples
    --------
    >>> build_graph().get_graph().nodes.keys() >= {"plan", "act", "respond"}
    True
    """
    return builder().compile(checkpointer=checkpointer)
