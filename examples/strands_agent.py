"""A Strands refund agent that asks a human before it pays, hosted by the agent-wait runner.

The model is :class:`ScriptedModel`, a ``strands.models.Model`` streaming a deterministic script
(no network, no API key): for a prompt such as ``"refund 40 to c-17"`` it asks for
``issue_refund(customer, amount)``, and once the conversation holds the tool's result it answers
with that result. ``issue_refund`` is a ``@wait`` tool (``agent_wait.strands``): Strands stops the
run with an interrupt, the runner publishes the question, and the answer resumes the agent with an
``interruptResponse``. ``amount`` is an integer, so an edit such as ``{"amount": "lots"}`` is
refused with a 422.

The runner builds one agent per thread with Strands' ``S3SessionManager`` (the thread's session,
in the checkpoint bucket), so what it imports is the factory :func:`build_agent`. Deploy it with
``-c framework=strands -c agent=examples.strands_agent:build_agent``, or run it on the local stack
with ``agent-wait local --framework strands --agent examples.strands_agent:build_agent``; a run's
input is ``{"prompt": "refund 40 to c-17"}``.

Examples
--------
>>> result = build_agent()("refund 40 to c-17", invocation_state={"thread_id": "doc"})
>>> result.stop_reason, [item.reason["question"]["args"] for item in result.interrupts]
('interrupt', [{'customer': 'c-17', 'amount': 40}])
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from typing import TYPE_CHECKING, Any

from strands import Agent, tool
from strands.models import Model

# At run time: Strands reads the tool's annotations to find its ToolContext parameter.
from strands.types.tools import ToolContext  # noqa: TC002

from agent_wait.policy import approval
from agent_wait.strands import wait

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from strands.session import SessionManager
    from strands.types.content import Messages
    from strands.types.streaming import StreamEvent
    from strands.types.tools import ToolSpec

_REFUND = re.compile(r"refund (\d+) to (\S+)")


class RefundLedger:
    """The refunds the sample paid: one per tool use id, whatever the redeliveries."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paid: dict[str, tuple[str, Any]] = {}

    def pay(self, tool_use_id: str, customer: str, amount: Any) -> None:
        with self._lock:
            self._paid.setdefault(tool_use_id, (customer, amount))

    def paid(self, customer: str) -> list[Any]:
        """The amounts paid to ``customer``."""
        with self._lock:
            return [amount for who, amount in self._paid.values() if who == customer]


REFUNDS = RefundLedger()


class ScriptedModel(Model):
    """A fake model: the tool calls the latest prompt asks for, then the tools' results as text."""

    def update_config(self, **model_config: Any) -> None:
        """Nothing to configure."""

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model answers in text only")

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[StreamEvent]:
        last = messages[-1]["content"]
        results = [block["toolResult"] for block in last if "toolResult" in block]
        yield {"messageStart": {"role": "assistant"}}
        if results:
            said = "; ".join(str(item.get("text", "")) for result in results for item in result["content"])
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": said}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            return
        prompt = " ".join(str(block.get("text", "")) for block in last)
        for amount, customer in _REFUND.findall(prompt):
            # Unique tool use ids: Strands derives the interrupt's id (the question's) from it.
            tool_use_id = f"tooluse_{uuid.uuid4().hex}"
            yield {
                "contentBlockStart": {
                    "start": {"toolUse": {"name": "issue_refund", "toolUseId": tool_use_id}}
                }
            }
            arguments = json.dumps({"customer": customer, "amount": int(amount)})
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": arguments}}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}


@tool(context=True)
@wait(approval())
def issue_refund(
    customer: str,
    amount: int,
    tool_context: ToolContext,
) -> dict[str, Any]:
    """Refund ``amount`` to ``customer`` (asks a human first)."""
    REFUNDS.pay(str(tool_context.tool_use["toolUseId"]), customer, amount)
    return {"refunded": amount, "customer": customer}


def build_agent(session_manager: SessionManager | None = None) -> Agent:
    """The refund agent, its session kept by ``session_manager`` (the runner passes the thread's)."""
    return Agent(
        model=ScriptedModel(),
        tools=[issue_refund],
        agent_id="refund_agent",
        callback_handler=None,
        session_manager=session_manager,
    )
