"""The checkpoint read ahead: taken once by the graph's next read of the same checkpoint, never stale."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from examples.refund_agent import build_graph
from wait_service.runs.checkpoint_prefetch import PrefetchingSaver

if TYPE_CHECKING:
    from collections.abc import Iterator

    from langchain_core.runnables import RunnableConfig

REFUND = {"customer": "c-17", "amount": 40}


class CountedReads(InMemorySaver):
    """An in-memory saver counting its ``get_tuple`` calls."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def get_tuple(self, config: RunnableConfig) -> Any:
        self.reads += 1
        return super().get_tuple(config)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=1) as executor:
        yield executor


def config(thread_id: str = "t-1") -> Any:
    return {"configurable": {"thread_id": thread_id}}


def test_the_graph_takes_the_read_ahead_instead_of_reading_again(pool: ThreadPoolExecutor) -> None:
    inner = CountedReads()
    saver = PrefetchingSaver(inner)
    graph = build_graph(saver)
    [interrupt] = graph.invoke(REFUND, config())["__interrupt__"]
    before = inner.reads

    # When the thread's checkpoint is read ahead, then the graph resumes
    saver.prefetch(config(), pool)
    result = graph.invoke(Command(resume={interrupt.id: {"action": "approve"}}), config())

    # Then the resume ran on what was read ahead: one read of the latest checkpoint, not two
    assert result["refund"]["amount"] == 40
    assert inner.reads == before + 1


def test_a_write_drops_the_read_ahead_so_nothing_stale_is_served(pool: ThreadPoolExecutor) -> None:
    inner = CountedReads()
    saver = PrefetchingSaver(inner)
    graph = build_graph(saver)
    saver.prefetch(config(), pool)
    # The read ahead saw no checkpoint; the run writes one
    graph.invoke(REFUND, config())
    saver.prefetch(config("t-2"), pool)

    # Then a later read of the thread sees the checkpoint written, not the empty read ahead
    assert saver.get_tuple(config()) is not None
    assert graph.get_state(config()).interrupts
    # and `discard` drops a read not taken (the end of a message)
    saver.discard()
    reads = inner.reads
    assert saver.get_tuple(config("t-2")) is None
    assert inner.reads == reads + 1


def test_only_a_threads_latest_checkpoint_is_read_ahead(pool: ThreadPoolExecutor) -> None:
    inner = CountedReads()
    saver = PrefetchingSaver(inner)
    graph = build_graph(saver)
    graph.invoke(REFUND, config())
    named = {
        "configurable": {
            "thread_id": "t-1",
            "checkpoint_id": graph.get_state(config()).config["configurable"]["checkpoint_id"],
        }
    }
    reads = inner.reads

    saver.prefetch(named, pool)

    assert inner.reads == reads
    assert saver.get_tuple(named) is not None
    # and attributes of the wrapped saver are its own
    assert saver.storage is inner.storage


def test_a_read_ahead_that_failed_raises_where_the_graph_reads() -> None:
    class Down(InMemorySaver):
        def get_tuple(self, config: RunnableConfig) -> Any:
            raise ConnectionError("checkpoints unreachable")

    saver = PrefetchingSaver(Down())
    with ThreadPoolExecutor(max_workers=1) as pool:
        saver.prefetch(config(), pool)
        with pytest.raises(ConnectionError):
            saver.get_tuple(config())
