"""StrandsFramework against strands-agents, when the ``strands`` extra is installed.

strands-agents is not in the dev extra, so this module is skipped unless it is installed; the
adapter follows Strands' documented interrupt API (ToolContext.interrupt, AgentResult.interrupts,
``interruptResponse`` content blocks).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("strands")

from strands.types.tools import ToolContext  # noqa: E402

from agent_wait.strands import INTERRUPT_NAME, StrandsFramework  # noqa: E402


class _Interrupt:
    def __init__(self, id: str, reason: Any) -> None:
        self.id, self.name, self.reason = id, INTERRUPT_NAME, reason


def test_interrupts_in_reads_agent_result_interrupts() -> None:
    result = type("AgentResult", (), {"interrupts": [_Interrupt("v1:tool_call:t1:x", {"q": 1})]})()
    assert StrandsFramework().interrupts_in(result) == [("v1:tool_call:t1:x", {"q": 1})]
    assert StrandsFramework().interrupts_in(object()) == []


def test_tool_context_is_hidden() -> None:
    framework = StrandsFramework()
    assert framework.is_hidden("tool_context", None)
    assert framework.is_hidden("ctx", ToolContext)
    assert not framework.is_hidden("amount", int)
