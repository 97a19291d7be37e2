"""A refund agent that asks a human before it pays anything.

The "model" is a deterministic fake (no network, no API key): from ``{"customer", "amount"}`` it
proposes one call of ``issue_refund(customer, amount)``, which ``@wait("approval")`` parks until a
human answers. Approve runs it, approve with ``args`` runs it with the edited arguments, reject
returns the rejection in its place. A thread asks exactly one question: the single
``interrupt()`` lives in the ``act`` node (one per node, see the library's LangGraph notes).

``amount`` is typed (more than 0, at most 10 000), so the question carries that JSON Schema and
an edit such as ``{"amount": -1000}`` is refused. The refund is idempotent: ``@wait`` passes the
tool a stable ``operation_id`` (one per question), and :class:`RefundBook` pays once per id
however often the node runs (a LangGraph retry, a redelivered resume).

Examples
--------
>>> from langgraph.checkpoint.memory import InMemorySaver
>>> from langgraph.types import Command
>>> graph = build_graph(InMemorySaver())
>>> cfg = {"configurable": {"thread_id": "doc"}}
>>> parked = graph.invoke({"customer": "c-17", "amount": 40}, cfg)
>>> question = parked["__interrupt__"][0].value["question"]
>>> question["function"], question["args"]
('issue_refund', {'customer': 'c-17', 'amount': 40})
>>> question["args_schema"]["properties"]["amount"]["exclusiveMinimum"]
0
>>> qid = parked["__interrupt__"][0].id
>>> graph.invoke(Command(resume={qid: {"action": "approve", "args": {"amount": 25}}}), cfg)["refund"]
{'refund_id': 'rf-c-17-25', 'customer': 'c-17', 'amount': 25}
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

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


class RefundBook:
    """The payments ledger of the sample: one refund per operation id, whatever the retries.

    ``pay`` is a conditional write (put if absent) keyed on the operation id; on AWS the same
    shape is a DynamoDB ``put_item`` with ``ConditionExpression="attribute_not_exists(pk)"``,
    or the payment API's idempotency key.

    Examples
    --------
    >>> book = RefundBook()
    >>> book.pay("op-1", {"refund_id": "rf-1"}) is book.pay("op-1", {"refund_id": "rf-2"})
    True
    >>> len(book.refunds("op-1"))
    1
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paid: dict[str, dict[str, Any]] = {}

    def pay(self, operation_id: str, refund: dict[str, Any]) -> dict[str, Any]:
        """Record ``refund`` under ``operation_id`` unless one is there; return the recorded one."""
        with self._lock:
            return self._paid.setdefault(operation_id, refund)

    def refunds(self, operation_id: str) -> list[dict[str, Any]]:
        """The refunds paid under ``operation_id`` (at most one)."""
        with self._lock:
            return [self._paid[operation_id]] if operation_id in self._paid else []


REFUNDS = RefundBook()


@wait("approval")
def issue_refund(
    customer: str, amount: Annotated[float, Field(gt=0, le=10_000)], operation_id: str
) -> dict[str, Any]:
    """Pay ``amount`` back to ``customer``: the external effect a human approves, once per question."""
    refund = {"refund_id": f"rf-{customer}-{amount}", "customer": customer, "amount": amount}
    return dict(REFUNDS.pay(operation_id, refund))


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


def wire(graph: Any, act_node: Any) -> Any:
    """plan → ``act_node`` (asks) → respond, on ``graph``: the refund agent's shape."""
    graph.add_node("plan", plan)
    graph.add_node("act", act_node)
    graph.add_node("respond", respond)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "act")
    graph.add_edge("act", "respond")
    graph.add_edge("respond", END)
    return graph


def builder() -> StateGraph[RefundState, None, RefundInput, RefundState]:
    """The uncompiled graph: plan → act (asks) → respond."""
    graph: StateGraph[RefundState, None, RefundInput, RefundState] = wire(
        StateGraph(RefundState, input_schema=RefundInput), act
    )
    return graph


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> CompiledStateGraph[Any]:
    """The compiled refund agent; the runner passes the deployment's checkpointer.

    Examples
    --------
    >>> build_graph().get_graph().nodes.keys() >= {"plan", "act", "respond"}
    True
    """
    return builder().compile(checkpointer=checkpointer)
