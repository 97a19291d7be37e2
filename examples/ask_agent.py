"""A graph that asks a free-text question with a bare ``interrupt(...)``.

No ``@wait`` here: the interrupt's value is published as the question with the default policy
(``kind="text"``, ``bind=False``), so a reply needs no ``If-Match`` and answers with a string or
``{"text": ...}``.

Examples
--------
>>> from langgraph.checkpoint.memory import InMemorySaver
>>> from langgraph.types import Command
>>> graph = build_graph(InMemorySaver())
>>> cfg = {"configurable": {"thread_id": "doc"}}
>>> parked = graph.invoke({"order": "o-9"}, cfg)
>>> parked["__interrupt__"][0].value
{'prompt': 'Where should order o-9 be shipped?', 'order': 'o-9'}
>>> graph.invoke(Command(resume={parked["__interrupt__"][0].id: {"text": "Main St 1"}}), cfg)["shipping_to"]
'Main St 1'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph


class AskState(TypedDict, total=False):
    order: str
    shipping_to: str
    reply: str


def ask(state: AskState) -> AskState:
    answer = interrupt(
        {"prompt": f"Where should order {state['order']} be shipped?", "order": state["order"]}
    )
    text = answer.get("text") if isinstance(answer, dict) else answer
    return {"shipping_to": str(text)}


def confirm(state: AskState) -> AskState:
    return {"reply": f"Order {state['order']} ships to {state['shipping_to']}."}


def builder() -> StateGraph[AskState]:
    graph = StateGraph(AskState)
    graph.add_node("ask", ask)
    graph.add_node("confirm", confirm)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "confirm")
    graph.add_edge("confirm", END)
    return graph


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> CompiledStateGraph[Any]:
    """The compiled ask agent.

    Examples
    --------
    >>> "ask" in build_graph().get_graph().nodes
    True
    """
    return builder().compile(checkpointer=checkpointer)
