"""``checkpointer=dynamodb``'s saver: what it adds to langgraph-checkpoint-dynamodb and what it refuses.

On moto's in-process ``mock_aws`` (no network), over tables created from the stack's specs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

import boto3
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from moto import mock_aws

from wait_service.resources import create_resources
from wait_service.runs.checkpoint_dynamodb import (
    UNPROCESSED_ATTEMPTS,
    ExpiringDynamoDBSaver,
    NamespaceUnsupportedError,
    UnprocessedWritesError,
    refuse_subgraphs,
)
from wait_service.runs.checkpointer import make_checkpointer
from wait_service.runs.runner import is_infrastructure_failure
from wait_service.settings import Settings, SettingsError

if TYPE_CHECKING:
    from collections.abc import Iterator

NOW = 1_800_000_000


class State(TypedDict, total=False):
    topic: str
    answer: str


def ask(state: State) -> State:
    return {"answer": str(interrupt({"prompt": state["topic"]}))}


def build(saver: Any, *, subgraph: bool = False) -> Any:
    graph = StateGraph(State)
    if subgraph:
        inner = StateGraph(State)
        inner.add_node("ask", ask)
        inner.add_edge(START, "ask")
        inner.add_edge("ask", END)
        graph.add_node("inner", inner.compile())
        graph.add_edge(START, "inner")
        graph.add_edge("inner", END)
    else:
        graph.add_node("ask", ask)
        graph.add_edge(START, "ask")
        graph.add_edge("ask", END)
    return graph.compile(checkpointer=saver)


@pytest.fixture
def tables() -> Iterator[tuple[str, str, Any]]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        sqs, sns = boto3.client("sqs", region_name="us-east-1"), boto3.client("sns", region_name="us-east-1")
        resources = create_resources(client, sqs, sns, prefix="u-", checkpointer="dynamodb")
        assert resources.checkpoint_writes_table is not None
        yield resources.checkpoint_table, resources.checkpoint_writes_table, client


def saver_for(tables: tuple[str, str, Any], **kwargs: Any) -> ExpiringDynamoDBSaver:
    checkpoints, writes, _ = tables
    options: dict[str, Any] = {"ttl_seconds": 3600, "clock": lambda: NOW} | kwargs
    return ExpiringDynamoDBSaver(checkpoints_table_name=checkpoints, writes_table_name=writes, **options)


def test_the_factory_builds_it_with_the_ledger_ttl(tables: tuple[str, str, Any]) -> None:
    checkpoints, writes, _ = tables
    settings = Settings(checkpointer="dynamodb", checkpoint_table=checkpoints, checkpoint_writes_table=writes)
    saver = make_checkpointer(settings)
    assert isinstance(saver, ExpiringDynamoDBSaver)
    assert saver.ttl_seconds == settings.checkpoint_ttl_seconds == 90 * 24 * 3600


@pytest.mark.parametrize("durability", ["exit", "async", "sync"])
def test_a_thread_parks_and_resumes_with_every_durability(
    tables: tuple[str, str, Any], durability: Any
) -> None:
    graph = build(saver_for(tables))
    config: Any = {"configurable": {"thread_id": f"t-{durability}"}}
    parked = graph.invoke({"topic": "shipping"}, config, durability=durability)
    [question] = parked["__interrupt__"]
    # A fresh saver (the next Lambda invocation) reads the parked thread back.
    graph = build(saver_for(tables))
    assert [i.id for i in graph.get_state(config).interrupts] == [question.id]

    done = graph.invoke(Command(resume={question.id: "by sea"}), config, durability=durability)

    assert done == {"topic": "shipping", "answer": "by sea"}
    assert graph.get_state(config).next == ()
    # Every item, checkpoint and write, expires ttl_seconds after it was written.
    checkpoints, writes, client = tables
    for table in (checkpoints, writes):
        items = client.scan(TableName=table)["Items"]
        assert items and {item["ttl"]["N"] for item in items} == {str(NOW + 3600)}, table


def test_a_subgraph_checkpoint_is_refused_naming_checkpointer_aws(tables: tuple[str, str, Any]) -> None:
    graph = build(saver_for(tables), subgraph=True)

    with pytest.raises(NamespaceUnsupportedError, match="checkpointer=aws") as raised:
        graph.invoke({"topic": "shipping"}, {"configurable": {"thread_id": "t-sub"}})

    assert "inner:" in str(raised.value)
    # Nothing of the subgraph was mixed into the thread's partition.
    checkpoints, _, client = tables
    items = client.scan(TableName=checkpoints)["Items"]
    assert all(item.get("checkpoint_ns", {}).get("S", "") == "" for item in items)


def build_with_subgraph(checkpointer: Any = None) -> Any:
    """``AGENT_WAIT_GRAPH`` factory: a graph whose node runs a checkpointed subgraph."""
    return build(checkpointer, subgraph=True)


def test_a_graph_with_a_checkpointed_subgraph_is_refused_when_the_runner_is_built(
    tables: tuple[str, str, Any],
) -> None:
    from wait_service.runs.runner import build_runner

    checkpoints, writes, _ = tables
    settings = Settings(
        checkpointer="dynamodb",
        checkpoint_table=checkpoints,
        checkpoint_writes_table=writes,
        ledger_table="l",
        inbox_url="https://sqs.us-east-1.amazonaws.com/123456789012/i.fifo",
        outbox_url="https://sqs.us-east-1.amazonaws.com/123456789012/o.fifo",
        topic_arn="arn:aws:sns:us-east-1:123456789012:t",
        graph="test_checkpoint_dynamodb:build_with_subgraph",
    )

    with pytest.raises(SettingsError, match=r"node\(s\) inner .*checkpointer=aws.*checkpointer=False"):
        build_runner(settings)


def test_a_subgraph_without_checkpoints_passes_and_runs(tables: tuple[str, str, Any]) -> None:
    # A subgraph compiled with checkpointer=False keeps no checkpoints (and so cannot pause itself):
    # the question is asked by the parent graph.
    inner = StateGraph(State)
    inner.add_node("shout", lambda state: {"topic": state["topic"].upper()})
    inner.add_edge(START, "shout")
    inner.add_edge("shout", END)
    graph = StateGraph(State)
    graph.add_node("enrich", inner.compile(checkpointer=False))
    graph.add_node("ask", ask)
    graph.add_edge(START, "enrich")
    graph.add_edge("enrich", "ask")
    graph.add_edge("ask", END)
    compiled = graph.compile(checkpointer=saver_for(tables))
    refuse_subgraphs(build(None), "flat")
    refuse_subgraphs(compiled, "no-checkpoints")

    config: Any = {"configurable": {"thread_id": "t-flat-sub"}}
    [question] = compiled.invoke({"topic": "shipping"}, config)["__interrupt__"]
    assert question.value == {"prompt": "SHIPPING"}
    assert compiled.invoke(Command(resume={question.id: "by air"}), config)["answer"] == "by air"


class Unprocessing:
    """A DynamoDB client whose BatchWriteItem hands back the first ``refusals`` items it is sent."""

    def __init__(self, client: Any, refusals: int) -> None:
        self.client = client
        self.refusals = refusals
        self.sent: list[int] = []

    def batch_write_item(self, RequestItems: dict[str, list[Any]]) -> dict[str, Any]:  # noqa: N803
        [(table, requests)] = RequestItems.items()
        self.sent.append(len(requests))
        if self.refusals:
            kept, self.refusals = requests[: self.refusals], max(0, self.refusals - len(requests))
            done = requests[len(kept) :]
            if done:
                self.client.batch_write_item(RequestItems={table: done})
            return {"UnprocessedItems": {table: kept}}
        self.client.batch_write_item(RequestItems={table: requests})
        return {"UnprocessedItems": {}}


def _stored_config(saver: ExpiringDynamoDBSaver) -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    return saver.put({"configurable": {"thread_id": "t-w"}}, empty_checkpoint(), {}, {})


def test_unprocessed_writes_are_sent_again_until_none_is_left(tables: tuple[str, str, Any]) -> None:
    waits: list[float] = []
    saver = saver_for(tables, sleep=waits.append)
    saver.client = Unprocessing(saver.client, refusals=3)
    config = _stored_config(saver)

    saver.put_writes(config, [(f"c{i}", i) for i in range(30)], "task-1")

    # 25 then 5 items; the first batch's 3 refused items go again, after a short wait.
    assert saver.client.sent == [25, 3, 5]
    assert waits == [0.05]
    writes = saver.get_tuple(config)
    assert writes is not None
    assert sorted(w[1] for w in writes.pending_writes) == sorted(f"c{i}" for i in range(30))


def test_writes_still_unprocessed_after_every_attempt_fail_the_run(tables: tuple[str, str, Any]) -> None:
    waits: list[float] = []
    saver = saver_for(tables, sleep=waits.append)
    saver.client = Unprocessing(saver.client, refusals=10**6)
    config = _stored_config(saver)

    with pytest.raises(UnprocessedWritesError, match="2 checkpoint write"):
        saver.put_writes(config, [("a", 1), ("b", 2)], "task-1")

    assert len(saver.client.sent) == UNPROCESSED_ATTEMPTS
    assert waits == [0.05 * 2**n for n in range(UNPROCESSED_ATTEMPTS - 1)]
    # The runner retries the message (backoff, then the DLQ) rather than failing the thread.
    assert is_infrastructure_failure(UnprocessedWritesError("left"))
