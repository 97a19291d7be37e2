"""A graph that keeps a free-text answer twice in its state and returns only its size.

Its checkpoint after the resume holds the answer in the resume write and twice in the state, so a
250 KiB answer makes a checkpoint over DynamoDB's 400 KB item limit: it resumes only when the
checkpointer offloads to S3. The output (``output_schema``) stays small, so the thread's ledger item
holds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph


class NoteState(TypedDict, total=False):
    topic: str
    note: str
    copy: str
    note_bytes: int


class NoteOutput(TypedDict, total=False):
    note_bytes: int


def ask(state: NoteState) -> NoteState:
    note = str(interrupt({"prompt": f"Write the note on {state['topic']}"}))
    return {"note": note, "copy": note}


def measure(state: NoteState) -> NoteState:
    return {"note_bytes": len(state["note"].encode()) + len(state["copy"].encode())}


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> CompiledStateGraph[Any]:
    graph = StateGraph(NoteState, output_schema=NoteOutput)
    graph.add_node("ask", ask)
    graph.add_node("measure", measure)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "measure")
    graph.add_edge("measure", END)
    return graph.compile(checkpointer=checkpointer)
