"""StrandsFramework against real strands-agents Agents, driven by a scripted model.

``ScriptedModel`` is a ``strands.models.Model`` that streams the events a provider would: one
assistant turn of tool uses, then, once the conversation holds a tool result, a text answer. The
runs are deterministic and touch no network; everything else (tool decoration, input validation,
ToolContext injection, the interrupt state, resuming with ``interruptResponse`` blocks, session
persistence) is Strands' own.
"""

from __future__ import annotations

import json
import warnings
from typing import TYPE_CHECKING, Any
from unittest.mock import ANY

import pytest
from strands import Agent, tool
from strands.hooks import BeforeToolCallEvent, HookProvider, HookRegistry
from strands.models import Model
from strands.session.file_session_manager import FileSessionManager
from strands.types.tools import ToolContext

from agent_wait.announce import InMemoryAnnounce
from agent_wait.envelope import async_question_id
from agent_wait.policy import approval
from agent_wait.strands import INTERRUPT_NAME, StrandsFramework, interrupt_name, publish_interrupts, wait
from agent_wait.testing import FrameworkConformance

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from strands.agent import AgentResult
    from strands.types.content import Messages
    from strands.types.streaming import StreamEvent
    from strands.types.tools import ToolSpec

ToolUses = list[tuple[str, dict[str, Any]]]


class ScriptedModel(Model):
    """Asks for ``uses`` (tool name, input) as call-0, call-1, ...; answers "done" after a tool result."""

    def __init__(self, uses: ToolUses) -> None:
        self.uses = uses
        self.turns = 0
        self.seen_specs: list[ToolSpec] = []

    def update_config(self, **model_config: Any) -> None:
        raise NotImplementedError

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[StreamEvent]:
        self.turns += 1
        self.seen_specs = list(tool_specs or [])
        answered = not self.uses or any(
            "toolResult" in block for message in messages for block in message["content"]
        )
        yield {"messageStart": {"role": "assistant"}}
        if answered:
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": "done"}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            return
        for index, (name, tool_input) in enumerate(self.uses):
            yield {"contentBlockStart": {"start": {"toolUse": {"name": name, "toolUseId": f"call-{index}"}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(tool_input)}}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}


def _agent(uses: ToolUses, tools: list[Any], **kwargs: Any) -> Agent:
    return Agent(model=ScriptedModel(uses), tools=tools, callback_handler=None, **kwargs)


def _answer(question_id: str, answer: Any) -> list[Any]:
    return [{"interruptResponse": {"interruptId": question_id, "response": answer}}]


def _tool_results(agent: Agent) -> dict[str, Any]:
    """toolUseId -> the JSON the tool returned, as Strands put it in the conversation."""
    found: dict[str, Any] = {}
    for message in agent.messages:
        for block in message["content"]:
            if "toolResult" in block:
                result = block["toolResult"]
                text = result["content"][0].get("text", "")
                try:
                    # Strands JSON-encodes a returned dict/list and passes a returned str through.
                    found[result["toolUseId"]] = json.loads(text) if result["status"] == "success" else text
                except json.JSONDecodeError:
                    found[result["toolUseId"]] = text
    return found


def _customer(question: Any) -> str:
    return str(question["args"]["customer"])


ARGS = {"customer": "c-17", "amount": 40}


class TestStrandsFramework(FrameworkConformance):
    """The suite's ``**context`` tool is called from a ``@tool(context=True)`` Strands tool."""

    def make_framework(self) -> StrandsFramework:
        return StrandsFramework()

    def start(self, tool_fn: Callable[..., Any], args: dict[str, Any], thread_id: str) -> Any:
        @tool(context=True)
        def issue_refund(customer: str, amount: int, tool_context: ToolContext) -> Any:
            return tool_fn(customer=customer, amount=amount, tool_context=tool_context)

        self.thread_id = thread_id
        self.agent = _agent([("issue_refund", args)], [issue_refund])
        result = self.agent("refund c-17", invocation_state={"thread_id": thread_id})
        if self.make_framework().interrupts_in(result):
            assert result.stop_reason == "interrupt"
        return result

    def resume(self, result: Any, question_id: str, answer: Any) -> Any:
        return self.agent(_answer(question_id, answer), invocation_state={"thread_id": self.thread_id})

    def returned(self, result: Any) -> Any:
        assert result.stop_reason == "end_turn"
        assert str(result).strip() == "done"
        return _tool_results(self.agent)["call-0"]


# -- a @wait tool decorated directly, as a user writes it -------------------------------------------


def _refund_agent(calls: list[tuple[str, int]]) -> Agent:
    @tool(context=True)
    @wait("approval")
    def issue_refund(customer: str, amount: int, tool_context: ToolContext) -> dict[str, Any]:
        """Refund a customer."""
        calls.append((customer, amount))
        return {"refunded": amount, "customer": customer}

    return _agent([("issue_refund", ARGS)], [issue_refund])


def test_direct_tool_parks_and_publishes_one_envelope_without_the_tool_context() -> None:
    calls: list[tuple[str, int]] = []
    agent = _refund_agent(calls)
    result = agent("refund c-17")

    assert result.stop_reason == "interrupt"
    [interrupt] = result.interrupts or []
    assert interrupt.name == interrupt_name("issue_refund") == f"{INTERRUPT_NAME}:issue_refund"
    assert interrupt.id.startswith("v1:tool_call:call-0:")
    sink = InMemoryAnnounce()
    [envelope] = publish_interrupts(result, "strands-1", sink)
    assert sink.envelopes == [envelope]
    assert envelope.question_id == interrupt.id
    assert envelope.question == {"function": "issue_refund", "args": ARGS, "args_schema": ANY}
    assert envelope.policy == approval()
    assert envelope.source is not None and str(envelope.source["function"]).endswith("issue_refund")
    assert calls == []
    # The model is offered the tool without the injected context.
    [spec] = agent.model.seen_specs  # type: ignore[attr-defined]
    assert set(spec["inputSchema"]["json"]["properties"]) == {"customer", "amount"}


@pytest.mark.parametrize(
    ("answer", "expected_calls", "expected_result"),
    [
        ({"action": "approve"}, [("c-17", 40)], {"refunded": 40, "customer": "c-17"}),
        ({"action": "approve", "args": {"amount": 25}}, [("c-17", 25)], {"refunded": 25, "customer": "c-17"}),
        ({"action": "reject", "reason": "no"}, [], {"action": "reject", "reason": "no"}),
    ],
    ids=["approve", "approve-with-args", "reject"],
)
def test_direct_tool_resumes_with_the_answer(
    answer: dict[str, Any], expected_calls: list[tuple[str, int]], expected_result: dict[str, Any]
) -> None:
    calls: list[tuple[str, int]] = []
    agent = _refund_agent(calls)
    [interrupt] = agent("refund c-17").interrupts or []
    model_turns = agent.model.turns  # type: ignore[attr-defined]

    final = agent(_answer(interrupt.id, answer))

    assert final.stop_reason == "end_turn" and not final.interrupts
    assert calls == expected_calls
    assert _tool_results(agent) == {"call-0": expected_result}
    # The tool is re-run from the stored tool use; the model is asked once more, for the reply.
    assert agent.model.turns == model_turns + 1  # type: ignore[attr-defined]
    assert publish_interrupts(final, "strands-1", None) == []


def test_a_second_answer_to_a_finished_question_is_refused_by_strands() -> None:
    calls: list[tuple[str, int]] = []
    agent = _refund_agent(calls)
    [interrupt] = agent("refund c-17").interrupts or []
    agent(_answer(interrupt.id, {"action": "approve"}))
    with pytest.raises(ValueError, match="not in interrupt state"):
        agent(_answer(interrupt.id, {"action": "approve"}))
    assert calls == [("c-17", 40)]


def test_an_edit_of_an_unpublished_argument_is_an_error_tool_result() -> None:
    calls: list[tuple[str, int]] = []
    agent = _refund_agent(calls)
    [interrupt] = agent("refund c-17").interrupts or []
    final = agent(_answer(interrupt.id, {"action": "approve", "args": {"tool_context": None}}))
    assert calls == []
    assert "AnswerInvalidError" in _tool_results(agent)["call-0"]
    assert final.stop_reason == "end_turn"


def test_resume_on_a_fresh_agent_restored_from_the_session(tmp_path: Path) -> None:
    """The host on Lambda rebuilds the agent per request: the interrupt state rides in the session."""
    calls: list[tuple[str, int]] = []

    def build() -> Agent:
        @tool(context=True)
        @wait("approval")
        def issue_refund(customer: str, amount: int, tool_context: ToolContext) -> dict[str, Any]:
            calls.append((customer, amount))
            return {"refunded": amount}

        return _agent(
            [("issue_refund", ARGS)],
            [issue_refund],
            session_manager=FileSessionManager(session_id="thread-7", storage_dir=str(tmp_path)),
        )

    [envelope] = publish_interrupts(build()("refund c-17"), "thread-7", None)
    restored = build()
    final = restored(_answer(envelope.question_id, {"action": "approve", "args": {"amount": 30}}))
    assert final.stop_reason == "end_turn"
    assert calls == [("c-17", 30)]
    assert _tool_results(restored)["call-0"] == {"refunded": 30}


def test_parallel_calls_park_separately_and_a_partial_answer_keeps_the_rest_parked() -> None:
    calls: list[Any] = []

    @tool(context=True)
    @wait("approval")
    def issue_refund(customer: str, amount: int, tool_context: ToolContext) -> dict[str, Any]:
        calls.append((customer, amount))
        return {"refunded": amount}

    @tool
    def lookup(customer: str) -> str:
        calls.append(("lookup", customer))
        return "found"

    uses: ToolUses = [
        ("issue_refund", {"customer": "a", "amount": 1}),
        ("issue_refund", {"customer": "b", "amount": 2}),
        ("lookup", {"customer": "a"}),
    ]
    agent = _agent(uses, [issue_refund, lookup])
    first = publish_interrupts(agent("refund both"), "strands-par", None)
    by_customer = {_customer(e.question): e.question_id for e in first}
    assert sorted(by_customer) == ["a", "b"]
    assert calls == [("lookup", "a")]

    partial = agent(_answer(by_customer["a"], {"action": "approve"}))
    assert partial.stop_reason == "interrupt"
    # The unanswered question is published again under the same id: consumers dedupe on it.
    [again] = publish_interrupts(partial, "strands-par", None)
    assert again.dedupe_key == f"wait.created:{by_customer['b']}"
    assert calls == [("lookup", "a"), ("a", 1)]

    final = agent(_answer(by_customer["b"], {"action": "reject"}))
    assert final.stop_reason == "end_turn"
    assert calls == [("lookup", "a"), ("a", 1)]
    assert _tool_results(agent) == {
        "call-0": {"refunded": 1},
        "call-1": {"action": "reject"},
        "call-2": "found",
    }


def test_two_wait_functions_in_one_tool_call_are_asked_separately() -> None:
    """Strands keys an interrupt on (tool call id, name): one shared name would hand the first
    answer to the second function without asking."""
    done: list[str] = []

    @wait("approval")
    def refund(amount: int, tool_context: ToolContext) -> str:
        done.append("refund")
        return "refunded"

    @wait("approval")
    def close_account(customer: str, tool_context: ToolContext) -> str:
        done.append("close")
        return "closed"

    @tool(context=True)
    def offboard(customer: str, tool_context: ToolContext) -> list[str]:
        return [refund(10, tool_context=tool_context), close_account(customer, tool_context=tool_context)]

    agent = _agent([("offboard", {"customer": "c-17"})], [offboard])
    [first] = publish_interrupts(agent("offboard c-17"), "strands-two", None)
    assert first.question == {"function": "refund", "args": {"amount": 10}, "args_schema": ANY}

    second_run = agent(_answer(first.question_id, {"action": "approve"}))
    [second] = publish_interrupts(second_run, "strands-two", None)
    assert second.question == {"function": "close_account", "args": {"customer": "c-17"}, "args_schema": ANY}
    assert second.question_id != first.question_id
    assert done == ["refund"]

    final = agent(_answer(second.question_id, {"action": "reject"}))
    assert final.stop_reason == "end_turn"
    assert _tool_results(agent)["call-0"] == ["refunded", {"action": "reject"}]
    # The first body ran again on the second resume: the tool call is re-run from the top.
    assert done == ["refund", "refund"]


def test_async_tool_function_parks_and_resumes() -> None:
    calls: list[int] = []

    @tool(context=True)
    @wait("approval")
    async def issue_refund(customer: str, amount: int, tool_context: ToolContext) -> dict[str, Any]:
        calls.append(amount)
        return {"refunded": amount}

    agent = _agent([("issue_refund", ARGS)], [issue_refund])
    [envelope] = publish_interrupts(agent("refund"), "strands-async-def", None)
    agent(_answer(envelope.question_id, {"action": "approve", "args": {"amount": 5}}))
    assert calls == [5]


def test_a_hook_interrupt_is_published_as_a_bare_value() -> None:
    class Confirm(HookProvider):
        def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
            registry.add_callback(BeforeToolCallEvent, self.confirm)

        def confirm(self, event: BeforeToolCallEvent) -> None:
            if event.interrupt("confirm", reason="Really look up?") != "yes":
                event.cancel_tool = "not confirmed"

    @tool
    def lookup(customer: str) -> str:
        return "found"

    agent = _agent([("lookup", {"customer": "a"})], [lookup], hooks=[Confirm()])
    [envelope] = publish_interrupts(agent("look up a"), "strands-hook", None)
    assert envelope.question == "Really look up?"
    assert envelope.policy.kind == "text" and envelope.policy.bind is False
    agent(_answer(envelope.question_id, "yes"))
    assert _tool_results(agent) == {"call-0": "found"}


# -- async mode: the thread id ---------------------------------------------------------------------


def _async_refund(sink: InMemoryAnnounce, calls: list[int]) -> Any:
    @tool(context=True)
    @wait("approval", mode="async", announce=sink)
    def issue_refund(customer: str, amount: int, tool_context: ToolContext) -> dict[str, Any]:
        calls.append(amount)
        return {"refunded": amount}

    return issue_refund


def test_async_mode_reads_the_thread_from_invocation_state_or_agent_state() -> None:
    sink, calls = InMemoryAnnounce(), list[int]()
    _agent([("issue_refund", ARGS)], [_async_refund(sink, calls)])(
        "go", invocation_state={"thread_id": "t-inv"}
    )
    _agent([("issue_refund", ARGS)], [_async_refund(sink, calls)], state={"thread_id": "t-state"})("go")
    with warnings.catch_warnings():
        # Strands deprecates agent(prompt, **kwargs); mixing both nests invocation_state one level down.
        warnings.simplefilter("ignore", UserWarning)
        _agent([("issue_refund", ARGS)], [_async_refund(sink, calls)])(
            "go", invocation_state={"thread_id": "t-nested"}, request_id="r-1"
        )
    assert [e.thread_id for e in sink.envelopes] == ["t-inv", "t-state", "t-nested"]
    assert [e.question_id for e in sink.envelopes] == [
        async_question_id(t, "_async_refund.<locals>.issue_refund", ARGS)
        for t in ("t-inv", "t-state", "t-nested")
    ]
    assert calls == []


def test_async_mode_without_a_thread_fails_the_tool_call_and_publishes_nothing() -> None:
    sink, calls = InMemoryAnnounce(), list[int]()
    agent = _agent([("issue_refund", ARGS)], [_async_refund(sink, calls)])
    result = agent("go")
    assert result.stop_reason == "end_turn"
    assert "invocation_state" in _tool_results(agent)["call-0"]
    assert sink.envelopes == [] and calls == []


# -- the framework object ----------------------------------------------------------------------------


def test_tool_context_and_agent_are_hidden() -> None:
    framework = StrandsFramework()
    assert framework.is_hidden("tool_context", None)
    assert framework.is_hidden("agent", None)
    assert framework.is_hidden("ctx", ToolContext)
    assert framework.is_hidden("ctx", "ToolContext[Agent]")
    assert not framework.is_hidden("amount", int)
    assert not framework.is_hidden("amount", "int")


def test_a_wait_call_without_a_tool_context_is_refused() -> None:
    @wait("approval")
    def refund(amount: int) -> int:
        return amount

    with pytest.raises(TypeError, match="context=True"):
        refund(10)


def test_finished_runs_and_other_objects_have_no_interrupts() -> None:
    agent = _agent([], [])
    result: AgentResult = agent("hello")
    assert result.stop_reason == "end_turn"
    assert StrandsFramework().interrupts_in(result) == []
    assert StrandsFramework().interrupts_in(object()) == []
