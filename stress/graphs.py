"""The graph the stress run deploys: one free-text question, then one effect it counts.

``ask`` parks on a bare ``interrupt``; ``pay`` appends one line per execution to
``$STRESS_EFFECTS/<thread_id>`` (the effect the answer authorizes) and, for a thread whose id starts
with ``kill-``, kills its own process the first time it runs, as a crash or an OOM of the runner
would (``$STRESS_EFFECTS/<thread_id>.killed`` remembers that it did).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph


class StressState(TypedDict, total=False):
    item: str
    answer: str
    paid: bool


def ask(state: StressState) -> StressState:
    return {"answer": str(interrupt({"prompt": f"Pay for {state.get('item', '?')}?"}))}


def pay(state: StressState) -> StressState:
    thread_id = str(get_config()["configurable"]["thread_id"])
    effects = Path(os.environ.get("STRESS_EFFECTS", "."))
    killed = effects / f"{thread_id}.killed"
    if thread_id.startswith("kill-") and not killed.exists():
        killed.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    with (effects / thread_id).open("a", encoding="utf-8") as effect:
        effect.write(f"{state.get('answer')}\n")
    return {"paid": True}


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> CompiledStateGraph[Any]:
    graph = StateGraph(StressState)
    graph.add_node("ask", ask)
    graph.add_node("pay", pay)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "pay")
    graph.add_edge("pay", END)
    return graph.compile(checkpointer=checkpointer)
