"""A graph whose question does not park it: ``@wait(mode="async")`` on a newsletter send.

The ``draft`` node asks for approval of the send and the run carries on: it ends with the send
``pending_approval``. No ``announce=`` is given: inside the agent-wait runner (deployed or local)
the question goes out through the deployment's announcers and lands in the ledger like any other.
The decision comes back as a new run on the thread whose input is ``{"agent_wait_answer":
{"question_id", "answer", "answered_by"}}``; ``handle_answer`` sends on an approval (with edited
args if the answer carries them) and records anything else as not sent.

A second question in interrupt mode, ``confirm_audience``, parks the thread when the input asks
for it (``"confirm": true``): an async answer that arrives meanwhile waits for that run to end.

Examples
--------
>>> from langgraph.checkpoint.memory import InMemorySaver
>>> from agent_wait import AsyncHost, InMemoryAnnounce, hosting_async_waits
>>> graph, sink = build_graph(InMemorySaver()), InMemoryAnnounce()
>>> cfg = {"configurable": {"thread_id": "doc"}}
>>> with hosting_async_waits(AsyncHost(announce=sink)):
...     first = graph.invoke({"audience": "all"}, cfg)
>>> first["send"]["status"], sink.envelopes[0].question["function"]
('pending_approval', 'send_newsletter')
>>> answer = {"question_id": first["send"]["question_id"], "answer": {"action": "approve"}}
>>> graph.invoke({"agent_wait_answer": answer | {"answered_by": "ann"}}, cfg)["outcome"]
'sent to all (approved by ann)'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from agent_wait import approval
from agent_wait.langgraph import wait

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph


class NewsletterState(TypedDict, total=False):
    audience: str
    confirm: bool
    send: dict[str, Any]
    confirmed: Any
    outcome: str
    # The answer to the async question, when a run carries one (agent_wait.ASYNC_ANSWER_KEY).
    agent_wait_answer: dict[str, Any] | None


@wait(approval(), mode="async")
def send_newsletter(audience: str) -> str:
    return f"sent to {audience}"


@wait(approval())
def confirm_audience(audience: str) -> str:
    return f"confirmed {audience}"


def route(state: NewsletterState) -> str:
    return "handle_answer" if state.get("agent_wait_answer") else "draft"


def draft(state: NewsletterState) -> NewsletterState:
    return {"send": send_newsletter(state["audience"]), "outcome": "waiting for approval"}


def confirm(state: NewsletterState) -> NewsletterState:
    if not state.get("confirm"):
        return {}
    return {"confirmed": confirm_audience(state["audience"])}


def handle_answer(state: NewsletterState) -> NewsletterState:
    reply = state.get("agent_wait_answer") or {}
    answer, by = reply.get("answer"), reply.get("answered_by")
    if isinstance(answer, dict) and answer.get("action") == "approve":
        audience = (answer.get("args") or {}).get("audience", state["audience"])
        # The body of the decorated function is what the approval authorises.
        outcome = f"{send_newsletter.__wrapped__(audience)} (approved by {by})"
    else:
        reason = answer.get("reason") if isinstance(answer, dict) else answer
        outcome = f"not sent: {reason} ({by})"
    # Cleared, so the thread's next run is not mistaken for another answer.
    return {"outcome": outcome, "agent_wait_answer": None}


def builder() -> StateGraph[NewsletterState]:
    graph = StateGraph(NewsletterState)
    graph.add_node("draft", draft)
    graph.add_node("confirm", confirm)
    graph.add_node("handle_answer", handle_answer)
    graph.add_conditional_edges(START, route, ["draft", "handle_answer"])
    graph.add_edge("draft", "confirm")
    graph.add_edge("confirm", END)
    graph.add_edge("handle_answer", END)
    return graph


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> CompiledStateGraph[Any]:
    """The compiled newsletter agent.

    Examples
    --------
    >>> sorted(n for n in build_graph().get_graph().nodes if not n.startswith("__"))
    ['confirm', 'draft', 'handle_answer']
    """
    return builder().compile(checkpointer=checkpointer)
