"""Binding on a real LangGraph graph: question ids, receipts across worker threads, one refund.

Seed 003's retry finding, quoted: "`pregel/_retry.py:run_with_retry` re-invokes a task on matching
retry policies within limits, clears task writes before attempts ... Neither inspected function
supplies application sender deduplication" and "preserved graph state cannot establish exactly one
external effect". These tests show the sample refund paying once anyway. Runs with InMemorySaver.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import InjectedToolArg, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, RetryPolicy

from agent_wait import collect_receipts, operation_id_for
from agent_wait.errors import AnswerInvalidError
from agent_wait.langgraph import wait
from examples.refund_agent import REFUNDS, build_graph, issue_refund

APPROVE = {"action": "approve"}


def _cfg(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


class _State(TypedDict, total=False):
    done: Annotated[list[Any], operator.add]


@wait("approval")
def first(amount: float) -> str:
    return f"first:{amount}"


@wait("approval")
def second(amount: float) -> str:
    return f"second:{amount}"


def test_receipt_question_id_is_the_published_interrupt_id_for_each_wait_of_a_node() -> None:
    """Two @wait calls in one node: the second interrupt is keyed by the answers the task holds."""

    def both(state: _State) -> _State:
        return {"done": [first(1), second(2)]}

    builder = StateGraph(_State)
    builder.add_node("both", both)
    builder.add_edge(START, "both")
    builder.add_edge("both", END)
    graph, cfg = builder.compile(checkpointer=InMemorySaver()), _cfg("two-waits")

    q1 = graph.invoke({}, cfg)["__interrupt__"][0].id
    q2 = graph.invoke(Command(resume={q1: APPROVE}), cfg)["__interrupt__"][0].id
    assert q1 != q2
    with collect_receipts() as receipts:
        done = graph.invoke(Command(resume={q2: APPROVE}), cfg)
    assert done["done"] == ["first:1", "second:2"]
    assert [(r.question_id, r.ran) for r in receipts] == [(q1, True), (q2, True)]


def test_receipt_collected_from_tools_run_on_worker_threads() -> None:
    """ToolNode runs tool calls on an executor; receipts emitted there reach the collector."""

    @tool
    @wait("approval")
    def pay(amount: float) -> str:
        """Pay."""
        return f"paid:{amount}"

    def agent(state: MessagesState) -> dict[str, Any]:
        if state["messages"]:
            return {}
        return {
            "messages": [
                AIMessage(content="", tool_calls=[{"name": "pay", "args": {"amount": 5}, "id": "c1"}])
            ]
        }

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([pay]))
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tools")
    builder.add_edge("tools", END)
    graph, cfg = builder.compile(checkpointer=InMemorySaver()), _cfg("tool-thread")

    qid = graph.invoke({"messages": []}, cfg)["__interrupt__"][0].id
    with collect_receipts() as receipts:
        graph.invoke(Command(resume={qid: {"action": "approve", "args": {"amount": 3}}}), cfg)
    assert [(r.question_id, r.ran, r.args, r.outcome) for r in receipts] == [
        (qid, True, {"amount": 3}, "returned")
    ]


def test_receipt_rejection_on_the_sample_does_not_run() -> None:
    graph, cfg = build_graph(InMemorySaver()), _cfg("sample-reject")
    qid = graph.invoke({"customer": "c-17", "amount": 40}, cfg)["__interrupt__"][0].id
    with collect_receipts() as receipts:
        done = graph.invoke(Command(resume={qid: {"action": "reject", "reason": "no"}}), cfg)
    assert done["refund"] is None
    assert [(r.question_id, r.ran, r.args) for r in receipts] == [(qid, False, None)]
    assert REFUNDS.refunds(operation_id_for(qid)) == []


def test_typed_edits_sample_refuses_a_negative_amount_at_resume() -> None:
    graph, cfg = build_graph(InMemorySaver()), _cfg("sample-negative")
    qid = graph.invoke({"customer": "c-17", "amount": 40}, cfg)["__interrupt__"][0].id
    with pytest.raises(AnswerInvalidError) as refused:
        graph.invoke(Command(resume={qid: {"action": "approve", "args": {"amount": -1000}}}), cfg)
    assert refused.value.field == "answer.args.amount"
    assert REFUNDS.refunds(operation_id_for(qid)) == []


def _retrying_refund_graph(failures: list[str]) -> Any:
    """The sample tool in a node that fails once after paying; a RetryPolicy re-runs the node."""

    class State(TypedDict, total=False):
        refund: dict[str, Any]

    def act(state: State) -> State:
        refund = issue_refund("c-17", 40)
        if failures:
            raise ConnectionError(failures.pop())  # the effect happened; the node did not finish
        return {"refund": refund}

    builder = StateGraph(State)
    builder.add_node("act", act, retry_policy=RetryPolicy(max_attempts=3, initial_interval=0, jitter=False))
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=InMemorySaver())


def test_one_external_effect_when_a_retry_policy_re_runs_the_node_after_the_refund() -> None:
    """Seed 003: "Retry ... Conditional re-invocation distinguished from interrupt/resume;
    external-effect deduplication unresolved" — resolved here by the operation id."""
    graph, cfg = _retrying_refund_graph(["response lost"]), _cfg("retry-after-effect")
    qid = graph.invoke({}, cfg)["__interrupt__"][0].id
    with collect_receipts() as receipts:
        done = graph.invoke(Command(resume={qid: APPROVE}), cfg)
    op = operation_id_for(qid)
    assert done["refund"] == {"refund_id": "rf-c-17-40", "customer": "c-17", "amount": 40}
    assert len(REFUNDS.refunds(op)) == 1
    # The body ran twice (the retry), both times under the same question; one refund.
    assert [(r.question_id, r.ran, r.outcome) for r in receipts] == [(qid, True, "returned")] * 2


def test_one_external_effect_when_the_resume_is_delivered_twice() -> None:
    """The first delivery paid, then its run died before the checkpoint; the message comes again."""
    graph, cfg = _retrying_refund_graph([]), _cfg("redelivered")
    qid = graph.invoke({}, cfg)["__interrupt__"][0].id
    op = operation_id_for(qid)
    crash = ["worker died after paying"]

    def crashing_act_graph() -> Any:
        class State(TypedDict, total=False):
            refund: dict[str, Any]

        def act(state: State) -> State:
            refund = issue_refund("c-17", 40)
            if crash:
                raise RuntimeError(crash.pop())
            return {"refund": refund}

        builder = StateGraph(State)
        builder.add_node("act", act)
        builder.add_edge(START, "act")
        builder.add_edge("act", END)
        return builder

    # Same thread, same checkpoints, the node without a retry policy: the first delivery fails.
    graph = crashing_act_graph().compile(checkpointer=graph.checkpointer)
    with pytest.raises(RuntimeError, match="worker died"):
        graph.invoke(Command(resume={qid: APPROVE}), cfg)
    assert len(REFUNDS.refunds(op)) == 1
    assert graph.get_state(cfg).next == ("act",)  # the node did not finish: it will run again
    # Redelivered: the thread still waits on the same question, the node re-runs, no new refund.
    with collect_receipts() as receipts:
        done = graph.invoke(Command(resume={qid: APPROVE}), cfg)
    assert done["refund"] == {"refund_id": "rf-c-17-40", "customer": "c-17", "amount": 40}
    assert len(REFUNDS.refunds(op)) == 1
    assert [(r.question_id, r.ran) for r in receipts] == [(qid, True)]


def test_one_external_effect_different_questions_pay_separately() -> None:
    ops = []
    for thread in ("sep-1", "sep-2"):
        graph, cfg = build_graph(InMemorySaver()), _cfg(thread)
        qid = graph.invoke({"customer": "c-17", "amount": 40}, cfg)["__interrupt__"][0].id
        graph.invoke(Command(resume={qid: APPROVE}), cfg)
        ops.append(operation_id_for(qid))
    # The interrupt id hashes the task (its checkpoint), not the args: two questions, two refunds.
    assert ops[0] != ops[1]
    assert all(len(REFUNDS.refunds(op)) == 1 for op in ops)


def test_receipt_question_id_inside_a_subgraph_is_the_published_interrupt_id() -> None:
    """A subgraph's interrupt id hashes the nested checkpoint namespace; the receipt names it too."""

    def inner(state: _State) -> _State:
        return {"done": [first(7)]}

    sub = StateGraph(_State)
    sub.add_node("inner", inner)
    sub.add_edge(START, "inner")
    sub.add_edge("inner", END)
    outer = StateGraph(_State)
    outer.add_node("sub", sub.compile())
    outer.add_edge(START, "sub")
    outer.add_edge("sub", END)
    graph, cfg = outer.compile(checkpointer=InMemorySaver()), _cfg("subgraph")

    qid = graph.invoke({}, cfg)["__interrupt__"][0].id
    with collect_receipts() as receipts:
        graph.invoke(Command(resume={qid: APPROVE}), cfg)
    assert [(r.question_id, r.ran) for r in receipts] == [(qid, True)]


def test_one_external_effect_tool_hides_operation_id_from_the_model() -> None:
    """A model-facing tool declares operation_id as an injected arg: the model never sees it."""
    seen: list[str] = []

    @tool
    @wait("approval")
    def refund(amount: float, operation_id: Annotated[str, InjectedToolArg] = "") -> str:
        """Refund."""
        seen.append(operation_id)
        return "ok"

    assert set(refund.tool_call_schema.model_json_schema()["properties"]) == {"amount"}

    def agent(state: MessagesState) -> dict[str, Any]:
        if state["messages"]:
            return {}
        call = {"name": "refund", "args": {"amount": 5}, "id": "c1"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([refund]))
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tools")
    builder.add_edge("tools", END)
    graph, cfg = builder.compile(checkpointer=InMemorySaver()), _cfg("tool-op")

    parked = graph.invoke({"messages": []}, cfg)["__interrupt__"][0]
    assert "operation_id" not in parked.value["question"]["args"]
    graph.invoke(Command(resume={parked.id: APPROVE}), cfg)
    assert seen == [operation_id_for(parked.id)]
