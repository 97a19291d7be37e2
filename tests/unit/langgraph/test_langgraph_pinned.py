"""LangGraph behaviour agent-wait relies on, pinned for the version the project pins.

Each test asserts what the pinned LangGraph does today, so an upgrade that changes it fails here
and the docs (docs/your-own-agent.md, "LangGraph behaviour agent-wait relies on", and seed 000's
notes) get revisited. Runs with InMemorySaver.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any, TypedDict

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt

from agent_wait.langgraph import publish_interrupts

PINNED = "1.2.24"


def test_the_pinned_version_is_installed() -> None:
    assert importlib.metadata.version("langgraph") == PINNED


def _cfg(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


# -- two interrupting tools in one ToolNode (#6624, #6626) -----------------------------------------


@tool
def tool_a(x: str) -> str:
    """First interrupting tool."""
    return f"a:{interrupt({'which': 'a', 'x': x})}"


@tool
def tool_b(x: str) -> str:
    """Second interrupting tool."""
    return f"b:{interrupt({'which': 'b', 'x': x})}"


def _two_tool_graph() -> Any:
    def agent(state: MessagesState) -> dict[str, Any]:
        if state["messages"]:
            return {}
        calls = [
            {"name": "tool_a", "args": {"x": "1"}, "id": "call-a"},
            {"name": "tool_b", "args": {"x": "2"}, "id": "call-b"},
        ]
        return {"messages": [AIMessage(content="", tool_calls=calls)]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([tool_a, tool_b]))
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tools")
    builder.add_edge("tools", END)
    return builder.compile(checkpointer=InMemorySaver())


def test_two_interrupting_tools_in_one_tool_node_surface_one_interrupt_per_run() -> None:
    """Seed 000: "Only one surfaces per run (#6624)". Still true on 1.2.24."""
    graph, cfg = _two_tool_graph(), _cfg("two-tools")

    first = graph.invoke({"messages": []}, cfg)
    assert [i.value for i in first["__interrupt__"]] == [{"which": "a", "x": "1"}]

    second = graph.invoke(Command(resume={first["__interrupt__"][0].id: "ok-a"}), cfg)
    assert [i.value for i in second["__interrupt__"]] == [{"which": "b", "x": "2"}]

    done = graph.invoke(Command(resume={second["__interrupt__"][0].id: "ok-b"}), cfg)
    assert "__interrupt__" not in done
    assert [m.content for m in done["messages"][1:]] == ["a:ok-a", "b:ok-b"]


def test_the_second_interrupt_of_a_tool_node_has_its_own_id() -> None:
    """Seed 000 recorded on 1.2.11 that "the second carries the same id as the first (#6626)".
    On 1.2.24 the ids differ, so the two questions get distinct dedupe keys. If this fails, #6626
    is back: restore the limitation in docs/your-own-agent.md and the seed notes."""
    graph, cfg = _two_tool_graph(), _cfg("two-ids")
    first = graph.invoke({"messages": []}, cfg)
    second = graph.invoke(Command(resume={first["__interrupt__"][0].id: "ok"}), cfg)
    [env_a] = publish_interrupts(first, "two-ids", None)
    [env_b] = publish_interrupts(second, "two-ids", None)
    assert env_a.question_id != env_b.question_id
    assert env_a.dedupe_key != env_b.dedupe_key


# -- duplicate and stale answers; re-entry ---------------------------------------------------------


class _S(TypedDict, total=False):
    n: int
    answer: Any
    second: Any


def _counting_graph(runs: dict[str, int], *, second_question: bool = False) -> Any:
    def prep(state: _S) -> _S:
        runs["prep"] += 1
        return {"n": 1}

    def ask(state: _S) -> _S:
        runs["ask"] += 1
        return {"answer": interrupt({"q": "first?"})}

    def ask_again(state: _S) -> _S:
        runs["ask_again"] += 1
        return {"second": interrupt({"q": "second?"})}

    def after(state: _S) -> _S:
        runs["after"] += 1
        return {"n": state["n"] + 1}

    builder = StateGraph(_S)
    builder.add_node("prep", prep)
    builder.add_node("ask", ask)
    builder.add_node("after", after)
    builder.add_edge(START, "prep")
    builder.add_edge("prep", "ask")
    if second_question:
        builder.add_node("ask_again", ask_again)
        builder.add_edge("ask", "ask_again")
        builder.add_edge("ask_again", "after")
    else:
        builder.add_edge("ask", "after")
    builder.add_edge("after", END)
    return builder.compile(checkpointer=InMemorySaver())


@pytest.fixture
def runs() -> dict[str, int]:
    return {"prep": 0, "ask": 0, "ask_again": 0, "after": 0}


@pytest.mark.parametrize("late_answer", [{"same": "yes"}, {"different": "no"}])
def test_a_resume_for_a_question_the_finished_thread_moved_past_re_runs_nothing(
    runs: dict[str, int], late_answer: dict[str, str]
) -> None:
    """Seed 000: "A Command(resume=…) for a question the thread has already moved past re-runs no
    node and returns the current state … the first stands"."""
    graph, cfg = _counting_graph(runs), _cfg("stale")
    question_id = graph.invoke({"n": 0}, cfg)["__interrupt__"][0].id
    done = graph.invoke(Command(resume={question_id: "yes"}), cfg)
    counts = dict(runs)

    again = graph.invoke(Command(resume={question_id: next(iter(late_answer.values()))}), cfg)

    assert runs == counts
    assert again == done == {"n": 2, "answer": "yes"}


def test_a_stale_resume_while_parked_on_a_later_question_re_enters_that_node_and_keeps_its_id(
    runs: dict[str, int],
) -> None:
    """When the thread is parked on a *later* question, a duplicate answer to the earlier one does
    not answer the later one, but the parked node runs again up to its interrupt() and surfaces the
    same Interrupt.id: code before interrupt() in a node must be idempotent."""
    graph, cfg = _counting_graph(runs, second_question=True), _cfg("stale-parked")
    first_id = graph.invoke({"n": 0}, cfg)["__interrupt__"][0].id
    parked = graph.invoke(Command(resume={first_id: "yes"}), cfg)
    second_id = parked["__interrupt__"][0].id
    assert second_id != first_id and runs["ask_again"] == 1

    again = graph.invoke(Command(resume={first_id: "yes"}), cfg)

    assert [i.id for i in again["__interrupt__"]] == [second_id]
    assert (runs["ask"], runs["ask_again"], runs["after"]) == (2, 2, 0)
    assert graph.get_state(cfg).values == {"n": 1, "answer": "yes"}


def test_re_entering_a_parked_thread_surfaces_the_same_interrupt_id(runs: dict[str, int]) -> None:
    """Seed 000: "LangGraph hands back the same Interrupt.id on re-entry". A re-run of the parked
    task (invoke(None)) republishes under the same dedupe_key."""
    graph, cfg = _counting_graph(runs), _cfg("reentry")
    first = graph.invoke({"n": 0}, cfg)
    again = graph.invoke(None, cfg)
    [env_first] = publish_interrupts(first, "reentry", None)
    [env_again] = publish_interrupts(again, "reentry", None)
    assert env_first.dedupe_key == env_again.dedupe_key
    assert env_first.event_id != env_again.event_id
    assert (runs["prep"], runs["ask"]) == (1, 2)


def test_redelivering_a_start_input_to_a_parked_thread_starts_a_new_run_with_a_new_id(
    runs: dict[str, int],
) -> None:
    """Pinned hazard: invoking a parked thread again *with its start input* (a redelivered start
    message) is a new run from START: earlier nodes run again and the interrupt gets a new id,
    so the first question can no longer be answered. The runner must not re-run a start message
    for a thread that is already parked."""
    graph, cfg = _counting_graph(runs), _cfg("redelivered-start")
    first = graph.invoke({"n": 0}, cfg)["__interrupt__"][0].id
    second = graph.invoke({"n": 0}, cfg)["__interrupt__"][0].id
    assert first != second
    assert runs["prep"] == 2

    late = graph.invoke(Command(resume={first: "yes"}), cfg)
    assert [i.id for i in late["__interrupt__"]] == [second]
    assert runs["after"] == 0
