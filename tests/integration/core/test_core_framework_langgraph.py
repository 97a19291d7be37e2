"""LangGraphFramework passes the Framework conformance suite, driven through a real graph."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Annotated, Any, TypedDict
from unittest.mock import ANY

import pytest
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, InjectedStore, ToolNode, ToolRuntime
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from agent_wait import InMemoryAnnounce, async_question_id
from agent_wait.langgraph import LangGraphFramework, publish_interrupts, wait
from agent_wait.testing import FrameworkConformance


class _State(TypedDict, total=False):
    returned: Any


class TestLangGraphFramework(FrameworkConformance):
    def make_framework(self) -> LangGraphFramework:
        return LangGraphFramework()

    def start(self, tool: Any, args: dict[str, Any], thread_id: str) -> Any:
        def call(state: _State) -> _State:
            return {"returned": tool(**args)}

        builder = StateGraph(_State)
        builder.add_node("call", call)
        builder.add_edge(START, "call")
        builder.add_edge("call", END)
        self.graph = builder.compile(checkpointer=InMemorySaver())
        self.config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        return self.graph.invoke({}, self.config)

    def resume(self, result: Any, question_id: str, answer: Any) -> Any:
        return self.graph.invoke(Command(resume={question_id: answer}), self.config)

    def returned(self, result: Any) -> Any:
        return result["returned"]


def _tool_node_graph(tools: list[Any], calls: list[dict[str, Any]]) -> Any:
    """agent (fixed AIMessage with ``calls``) → ToolNode(tools) → END, with an in-memory saver."""

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content="", tool_calls=calls)]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tools")
    builder.add_edge("tools", END)
    return builder.compile(checkpointer=InMemorySaver(), store=InMemoryStore())


def test_injected_tool_params_are_kept_out_of_the_published_args() -> None:
    """ "hidden/injected parameters (LangGraph state, config, runtime; a framework's context) are
    kept out of the published args"."""
    seen: dict[str, Any] = {}

    @tool
    @wait("approval")
    def issue_refund(
        customer: str,
        amount: int,
        state: Annotated[dict[str, Any], InjectedState],
        call_id: Annotated[str, InjectedToolCallId],
        kv: Annotated[Any, InjectedStore()],
        runtime: ToolRuntime,
        config: RunnableConfig,
    ) -> str:
        """Refund a customer."""
        seen.update(
            store=kv is not None, call_id=call_id, has_state="messages" in state, runtime=runtime is not None
        )
        return f"refunded {amount}"

    graph = _tool_node_graph(
        [issue_refund], [{"name": "issue_refund", "args": {"customer": "c-17", "amount": 40}, "id": "call-1"}]
    )
    config: RunnableConfig = {"configurable": {"thread_id": "hidden-1"}}
    result = graph.invoke({"messages": []}, config)

    [envelope] = publish_interrupts(result, "hidden-1", None)
    assert envelope.question == {
        "function": "issue_refund",
        "args": {"customer": "c-17", "amount": 40},
        "args_schema": ANY,
    }

    final = graph.invoke(Command(resume={envelope.question_id: {"action": "approve"}}), config)
    assert final["messages"][-1].content == "refunded 40"
    assert seen == {"store": True, "call_id": "call-1", "has_state": True, "runtime": True}


def test_node_params_state_config_runtime_are_hidden() -> None:
    from langgraph.runtime import Runtime

    framework = LangGraphFramework()
    for name in ("state", "config", "runtime", "store", "writer", "tool_call_id"):
        assert framework.is_hidden(name, None)
    assert framework.is_hidden("rt", Runtime)
    assert framework.is_hidden("cfg", RunnableConfig)
    assert framework.is_hidden("st", "Annotated[dict, InjectedState]")
    assert not framework.is_hidden("customer", str)
    assert not framework.is_hidden("amount", Annotated[int, "a note"])


def test_injected_markers_are_recognised_without_loading_langchain_tools_first() -> None:
    """The adapter itself does not load ``langchain_core.tools``; a marker annotation still hides."""
    code = textwrap.dedent(
        """
        import sys
        from typing import Annotated
        from agent_wait.langgraph import LangGraphFramework
        assert "langchain_core.tools.base" not in sys.modules
        framework = LangGraphFramework()
        assert not framework.is_hidden("amount", Annotated[int, "a note"])
        from langgraph.prebuilt import InjectedState
        from langchain_core.tools import InjectedToolArg
        assert framework.is_hidden("st", Annotated[dict, InjectedState])
        assert framework.is_hidden("op", Annotated[str, InjectedToolArg()])
        assert not framework.is_hidden("amount", Annotated[int, "a note"])
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_async_mode_reads_the_thread_from_the_run_config() -> None:
    sink = InMemoryAnnounce()

    @wait("approval", mode="async", announce=sink)
    def issue_refund(customer: str, amount: int) -> str:
        raise AssertionError("async mode never runs the body")

    def call(state: _State) -> _State:
        return {"returned": issue_refund("c-17", 40)}

    builder = StateGraph(_State)
    builder.add_node("call", call)
    builder.add_edge(START, "call")
    graph = builder.compile(checkpointer=InMemorySaver())
    result = graph.invoke({}, {"configurable": {"thread_id": "async-7"}})

    expected = async_question_id("async-7", issue_refund.__qualname__, {"customer": "c-17", "amount": 40})
    assert result["returned"] == {"status": "pending_approval", "question_id": expected}
    assert [e.thread_id for e in sink.envelopes] == ["async-7"]
    assert "__interrupt__" not in result


@pytest.mark.parametrize("shape", ["dict", "list", "attribute"])
def test_interrupts_in_reads_every_result_shape(shape: str) -> None:
    from langgraph.types import Interrupt

    found = [Interrupt(value={"x": 1}, id="i-1")]
    result: Any = {"dict": {"__interrupt__": found}, "list": found}.get(shape)
    if shape == "attribute":
        result = type("Output", (), {"interrupts": found})()
    assert LangGraphFramework().interrupts_in(result) == [("i-1", {"x": 1})]
