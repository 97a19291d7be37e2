"""PydanticAIFramework passes the Framework conformance suite, driven through a real Agent.

The model is pydantic-ai's FunctionModel: it calls the tool once with fixed arguments, then
answers with text once the tool returned, so the runs are deterministic and need no network.
"""

from __future__ import annotations

from typing import Any
from unittest.mock import ANY

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, RunContext, ToolApproved, ToolDenied
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from agent_wait.pydantic_ai import PydanticAIFramework, publish_interrupts, wait
from agent_wait.testing import FrameworkConformance


def _calls_tool_once(name: str, args: dict[str, Any]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [
            part for message in messages for part in message.parts if isinstance(part, ToolReturnPart)
        ]
        if returned:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart(tool_name=name, args=args, tool_call_id="call-1")])

    return FunctionModel(respond)


class TestPydanticAIFramework(FrameworkConformance):
    def make_framework(self) -> PydanticAIFramework:
        return PydanticAIFramework()

    def start(self, tool: Any, args: dict[str, Any], thread_id: str) -> Any:
        self.values: list[Any] = []
        self.deps = {"thread_id": thread_id}
        self.agent: Agent[dict[str, str], str | DeferredToolRequests] = Agent(
            _calls_tool_once("issue_refund", args),
            deps_type=dict,
            output_type=[str, DeferredToolRequests],
        )

        @self.agent.tool
        def issue_refund(ctx: RunContext[dict[str, str]], customer: str, amount: int) -> Any:
            value = tool(customer=customer, amount=amount, ctx=ctx)
            self.values.append(value)
            return value

        return self.agent.run_sync("refund c-17", deps=self.deps)

    def resume(self, result: Any, question_id: str, answer: Any) -> Any:
        # The answer rides in metadata, not override_args: the wrapper applies the rules (seed 000).
        return self.agent.run_sync(
            message_history=result.all_messages(),
            deferred_tool_results=DeferredToolResults(
                approvals={question_id: ToolApproved()}, metadata={question_id: answer}
            ),
            deps=self.deps,
        )

    def returned(self, result: Any) -> Any:
        assert result.output == "done"
        return self.values[-1]


def test_tool_decorated_directly_hides_ctx_and_denial_skips_the_body() -> None:
    """ "ToolDenied makes the framework skip the tool and hand the model the denial message"
    (seed 000, Pydantic AI)."""
    calls: list[int] = []
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        _calls_tool_once("issue_refund", {"customer": "c-17", "amount": 40}),
        output_type=[str, DeferredToolRequests],
    )

    @agent.tool
    @wait("approval")
    def issue_refund(ctx: RunContext[None], customer: str, amount: int) -> str:
        calls.append(amount)
        return f"refunded {amount}"

    result = agent.run_sync("refund")
    [envelope] = publish_interrupts(result, "pai-1", None)
    assert envelope.question == {
        "function": "issue_refund",
        "args": {"customer": "c-17", "amount": 40},
        "args_schema": ANY,
    }
    assert envelope.question_id == "call-1"

    denied = agent.run_sync(
        message_history=result.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"call-1": ToolDenied("no")}),
    )
    assert denied.output == "done"
    assert calls == []


def test_with_test_model_and_no_answer_metadata_approve_is_assumed() -> None:
    """ "on the re-run (ctx.tool_call_approved) it returns ctx.tool_call_metadata, or
    {"action": "approve"} if none" (seed 000, Pydantic AI)."""
    calls: list[int] = []
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        TestModel(call_tools=["double"]), output_type=[str, DeferredToolRequests]
    )

    @agent.tool
    @wait("approval")
    def double(ctx: RunContext[None], x: int) -> int:
        calls.append(x)
        return 2 * x

    result = agent.run_sync("go")
    [(question_id, value)] = PydanticAIFramework().interrupts_in(result)
    assert value["question"]["function"] == "double"
    assert set(value["question"]["args"]) == {"x"}

    final = agent.run_sync(
        message_history=result.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={question_id: True}),
    )
    assert isinstance(final.output, str)
    assert calls == [value["question"]["args"]["x"]]


def test_requires_approval_tool_without_metadata_is_published_as_a_bare_value() -> None:
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        _calls_tool_once("delete", {"path": "/tmp/x"}), output_type=[str, DeferredToolRequests]
    )

    @agent.tool_plain(requires_approval=True)
    def delete(path: str) -> str:
        return "deleted"

    [envelope] = publish_interrupts(agent.run_sync("go"), "pai-2", None)
    assert envelope.question == {"function": "delete", "args": {"path": "/tmp/x"}}
    assert envelope.policy.kind == "text" and envelope.policy.bind is False


def test_finished_run_and_plain_values_have_no_interrupts() -> None:
    framework = PydanticAIFramework()
    assert framework.interrupts_in(object()) == []
    assert framework.interrupts_in(DeferredToolRequests()) == []
    assert framework.is_hidden("context", RunContext[None])
    assert framework.is_hidden("c", "RunContext[Deps]")
    assert not framework.is_hidden("customer", str)
