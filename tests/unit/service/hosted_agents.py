"""What the tests of hosted agents (Pydantic AI, Strands) share: a start that parks, a thread's
output, and a message delivered as the inbox does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wait_service.resources import MAX_RECEIVE_COUNT
from wait_service.runs.inbox import ResumeMessage, StartMessage

if TYPE_CHECKING:
    from wait_service.ledger import Ledger
    from wait_service.runs.runner import RunnerService


def ask(runner: RunnerService, thread_id: str, prompt: str) -> list[str]:
    """Start ``thread_id`` with ``prompt``; the ids of the questions it parked on."""
    outcome = runner.run(StartMessage(thread_id=thread_id, input={"prompt": prompt}))
    assert outcome.status == "interrupted", outcome
    return outcome.pending


def output(ledger: Ledger, thread_id: str) -> str:
    """The final output of a thread that ended ``done``."""
    thread = ledger.get_thread(thread_id)
    assert thread.run_status == "done", thread
    result: Any = thread.output
    return str(result["output"])


def deliver(runner: RunnerService, message: StartMessage | ResumeMessage) -> list[str]:
    """Deliver ``message`` as the inbox does, up to ``maxReceiveCount`` times; the outcomes."""
    outcomes: list[str] = []
    for attempt in range(1, MAX_RECEIVE_COUNT + 1):
        try:
            outcomes.append(runner.run(message, receive_count=attempt).status)
            return outcomes
        except Exception as exc:
            outcomes.append(type(exc).__name__)
    return outcomes
