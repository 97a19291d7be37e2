"""A Pydantic AI refund agent that asks a human before it pays, hosted by the agent-wait runner.

The model is Pydantic AI's ``FunctionModel`` running a deterministic script (no network, no API
key): for a prompt such as ``"refund 40 to c-17"`` it calls ``issue_refund(customer, amount)``,
and once a tool returned it answers with one line saying what happened. ``issue_refund`` is a
``@wait`` tool (``agent_wait.pydantic_ai``): the run ends with ``DeferredToolRequests`` and the
runner publishes the question; the answer resumes the agent with ``DeferredToolResults``.
``delete_note`` is a plain Pydantic AI tool declared ``requires_approval=True``: the runner asks it
with the approval policy too. ``amount`` is typed (more than 0, at most 10 000), so the question
carries that JSON Schema and an edit such as ``{"amount": -1}`` is refused with a 422.

Deploy it with ``-c framework=pydantic_ai -c agent=examples.pydantic_ai_agent:agent``, or run it on
the local stack with ``agent-wait local --framework pydantic_ai --agent examples.pydantic_ai_agent:agent``;
a run's input is ``{"prompt": "refund 40 to c-17"}``.

Examples
--------
>>> result = agent.run_sync("refund 40 to c-17", deps={"thread_id": "doc"})
>>> [call.tool_name for call in result.output.approvals]
['issue_refund']
"""

from __future__ import annotations

import re
import threading
from typing import Annotated, Any

from pydantic import Field
from pydantic_ai import Agent, DeferredToolRequests, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent_wait.policy import approval
from agent_wait.pydantic_ai import wait

_REFUND = re.compile(r"refund (\d+) to (\S+)")
_DELETE = re.compile(r"delete note (\S+)")


class RefundLedger:
    """The refunds the sample paid: one per tool call id, whatever the redeliveries.

    The call's ``tool_call_id`` is the question's id and stays the same however often the call is
    resumed: a resume the inbox redelivers after the tool ran (its state write failed) pays
    nothing twice. On AWS the same shape is a conditional put keyed on the id, or the payment
    API's idempotency key.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paid: dict[str, tuple[str, Any]] = {}

    def pay(self, operation_id: str, customer: str, amount: Any) -> None:
        with self._lock:
            self._paid.setdefault(operation_id, (customer, amount))

    def paid(self, customer: str) -> list[Any]:
        """The amounts paid to ``customer``."""
        with self._lock:
            return [amount for who, amount in self._paid.values() if who == customer]


REFUNDS = RefundLedger()


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A fake model: the tool calls the latest prompt asks for, then one line on what they returned."""
    last = messages[-1]
    returned = [part for part in last.parts if isinstance(part, ToolReturnPart)]
    if returned:
        said = "; ".join(f"{part.tool_name}: {part.model_response_str()}" for part in returned)
        return ModelResponse(parts=[TextPart(said)])
    prompts = [part.content for part in last.parts if isinstance(part, UserPromptPart)]
    prompt = str(prompts[-1]) if prompts else ""
    # One call per refund asked for: "refund 40 to c-a and refund 5 to c-b" defers two calls at once.
    refunds = [
        ToolCallPart(tool_name="issue_refund", args={"customer": customer, "amount": int(amount)})
        for amount, customer in _REFUND.findall(prompt)
    ]
    if refunds:
        return ModelResponse(parts=list(refunds))
    if match := _DELETE.search(prompt):
        return ModelResponse(parts=[ToolCallPart(tool_name="delete_note", args={"note": match.group(1)})])
    return ModelResponse(parts=[TextPart(f"nothing to do for: {prompt}")])


agent: Agent[dict[str, str], str | DeferredToolRequests] = Agent(
    FunctionModel(scripted_model),
    deps_type=dict,
    output_type=[str, DeferredToolRequests],
    name="refund_agent",
)


@agent.tool
@wait(approval())
def issue_refund(
    ctx: RunContext[dict[str, str]],
    customer: Annotated[str, Field(min_length=1)],
    amount: Annotated[int, Field(gt=0, le=10_000)],
) -> dict[str, Any]:
    """Refund ``amount`` to ``customer`` (asks a human first)."""
    REFUNDS.pay(str(ctx.tool_call_id), customer, amount)
    return {"refunded": amount, "customer": customer}


@agent.tool_plain(requires_approval=True)
def delete_note(note: str) -> str:
    """Delete a note (Pydantic AI's own approval: the runner asks it with the approval policy)."""
    return f"deleted {note}"
