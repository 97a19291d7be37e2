"""Conformance suites: one abstract pytest class per interface, subclassed by every implementor.

:class:`AnnounceConformance` checks a :class:`~agent_wait.announce.base.BaseAnnounce`;
:class:`FrameworkConformance` checks a :class:`~agent_wait.framework.Framework` driven through a
real host (a graph, an agent). :class:`~agent_wait.announce.memory.InMemoryAnnounce` is the
reference implementation. Needs pytest (not a dependency of the library itself).

Examples
--------
>>> from agent_wait import InMemoryAnnounce
>>> class TestInMemory(AnnounceConformance):  # in a test module
...     def make_announce(self):
...         return InMemoryAnnounce()
...     def delivered(self, announce):
...         return announce.envelopes
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from agent_wait.announce.base import BaseAnnounce
from agent_wait.announce.memory import InMemoryAnnounce
from agent_wait.envelope import Envelope, Question, async_question_id, build_envelope
from agent_wait.policy import Policy, approval
from agent_wait.publish import make_publish_interrupts
from agent_wait.receipts import collect_receipts
from agent_wait.wait import make_wait

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_wait.framework import Framework

__all__ = ["AnnounceConformance", "FrameworkConformance"]

FIXED_NOW = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)


def sample_envelope(
    question_id: str = "q-1",
    thread_id: str = "thread-1",
    *,
    question: Any = None,
    policy: Policy | None = None,
) -> Envelope:
    """An envelope with a realistic question, for announcer tests.

    Examples
    --------
    >>> sample_envelope().dedupe_key
    'wait.created:q-1'
    """
    return build_envelope(
        thread_id,
        Question(
            question_id=question_id,
            question=question
            if question is not None
            else {
                "function": "issue_refund",
                "args": {"customer": "c-17", "amount": 40.5, "note": "café ☕"},
            },
            policy=policy or approval(ttl=86400, prompt="Refund?"),
            source={"function": "issue_refund", "module": "examples.refund_agent"},
        ),
        reply_url="https://api.example.com/questions/{question_id}/reply",
        now=FIXED_NOW,
    )


class AnnounceConformance(ABC):
    """What every announcer must do. Subclass it as ``Test<YourAnnouncer>``.

    Implement :meth:`make_announce` and :meth:`delivered`; implement :meth:`make_broken` to run
    the failure test. Set :attr:`deduplicates` when the sink keeps one copy per ``dedupe_key``.

    Examples
    --------
    See the module docstring.
    """

    deduplicates: ClassVar[bool] = False
    """True when the sink keeps a single copy per dedupe_key (FIFO queue, ledger item)."""

    @abstractmethod
    def make_announce(self) -> BaseAnnounce:
        """A fresh announcer whose sink is empty."""

    @abstractmethod
    def delivered(self, announce: BaseAnnounce) -> list[Envelope]:
        """The envelopes the sink of ``announce`` holds, oldest first, parsed back."""

    def make_broken(self) -> BaseAnnounce | None:
        """An announcer whose sink fails on every delivery; ``None`` skips the failure test."""
        return None

    def test_is_a_named_base_announce(self) -> None:
        announce = self.make_announce()
        assert isinstance(announce, BaseAnnounce)
        assert isinstance(announce.name, str) and announce.name

    def test_announce_delivers_the_envelope_unchanged(self) -> None:
        announce = self.make_announce()
        envelope = sample_envelope()
        assert announce.announce(envelope) is True
        assert self.delivered(announce) == [envelope]

    def test_call_is_announce(self) -> None:
        announce = self.make_announce()
        envelope = sample_envelope("q-call")
        assert announce(envelope) is True
        assert [e.dedupe_key for e in self.delivered(announce)] == ["wait.created:q-call"]

    def test_distinct_questions_are_delivered_separately(self) -> None:
        announce = self.make_announce()
        first, second = sample_envelope("q-a", "thread-a"), sample_envelope("q-b", "thread-b")
        assert announce.announce(first) and announce.announce(second)
        got = {e.dedupe_key: e for e in self.delivered(announce)}
        assert got == {first.dedupe_key: first, second.dedupe_key: second}

    def test_republished_question(self) -> None:
        """ "Consumers deduplicate on dedupe_key. The same question is published again whenever a
        start message is redelivered" (seed 000, Identity)."""
        announce = self.make_announce()
        first, again = sample_envelope("q-r"), sample_envelope("q-r")
        assert first.event_id != again.event_id and first.dedupe_key == again.dedupe_key
        assert announce.announce(first) and announce.announce(again)
        got = self.delivered(announce)
        if self.deduplicates:
            assert got == [first]
        else:
            assert got == [first, again]

    def test_failure_is_logged_never_raised(self, caplog: pytest.LogCaptureFixture) -> None:
        """ "A failing sink never fails a run that has already parked" (DESIGN.md, Library)."""
        broken = self.make_broken()
        if broken is None:
            pytest.skip("this announcer's test provides no failing sink")
        envelope = sample_envelope("q-broken")
        with caplog.at_level(logging.ERROR, logger="agent_wait"):
            assert broken.announce(envelope) is False
        records = [r for r in caplog.records if r.name == "agent_wait" and r.levelno >= logging.ERROR]
        assert records, "the failure must be logged on the agent_wait logger"
        assert any(getattr(r, "question_id", None) == "q-broken" for r in records)


class FrameworkConformance(ABC):
    """What every :class:`Framework` must do, driven through its real host.

    The suite's tools take ``customer: str, amount: int`` plus ``**context``: the host calls a
    tool as ``tool(customer=..., amount=..., **<the framework's injected context>)`` (e.g.
    ``ctx=ctx`` for Pydantic AI, nothing for LangGraph). Implement:

    - :meth:`make_framework`: the framework under test;
    - :meth:`start`: host one call of ``tool`` with ``args`` on a fresh thread; return the result;
    - :meth:`resume`: answer ``question_id`` of that run with ``answer``; return the new result;
    - :meth:`returned`: what the tool call returned in a finished run.

    Examples
    --------
    See ``tests/integration/core/test_core_framework_langgraph.py``.
    """

    ARGS: ClassVar[dict[str, Any]] = {"customer": "c-17", "amount": 40}

    @abstractmethod
    def make_framework(self) -> Framework:
        """The framework under test."""

    @abstractmethod
    def start(self, tool: Callable[..., Any], args: dict[str, Any], thread_id: str) -> Any:
        """Run one call of ``tool`` with ``args`` on a new thread ``thread_id``; return the result."""

    @abstractmethod
    def resume(self, result: Any, question_id: str, answer: Any) -> Any:
        """Answer the pending ``question_id`` of ``result`` with ``answer``; return the new result."""

    @abstractmethod
    def returned(self, result: Any) -> Any:
        """What the tool call returned in the finished run ``result``."""

    # -- helpers ---------------------------------------------------------------------------------

    def _refund_tool(self, calls: list[tuple[str, int]], **wait_kwargs: Any) -> Callable[..., Any]:
        wait = make_wait(self.make_framework())

        @wait(approval(), **wait_kwargs)
        def issue_refund(customer: str, amount: int, **context: Any) -> dict[str, Any]:
            calls.append((customer, amount))
            return {"refunded": amount, "customer": customer}

        return issue_refund

    def _parked(self, tool: Callable[..., Any], thread_id: str) -> tuple[Any, str, Any]:
        framework = self.make_framework()
        result = self.start(tool, dict(self.ARGS), thread_id)
        pending = framework.interrupts_in(result)
        assert len(pending) == 1, pending
        question_id, value = pending[0]
        return result, question_id, value

    # -- the suite -------------------------------------------------------------------------------

    def test_interrupt_surfaces_function_args_policy_and_source(self) -> None:
        """ "the wrapper raises the interrupt with {"function", "args"} before the body" (seed 000)."""
        calls: list[tuple[str, int]] = []
        _, question_id, value = self._parked(self._refund_tool(calls), "conf-surface")
        assert question_id
        assert {k: v for k, v in value["question"].items() if k != "args_schema"} == {
            "function": "issue_refund",
            "args": self.ARGS,
        }
        assert value["question"]["args_schema"]["type"] == "object"
        assert value["__wait__"] == approval().model_dump(mode="json")
        assert value["__source__"]["function"].endswith("issue_refund")
        assert calls == []

    def test_publish_interrupts_builds_one_envelope_per_interrupt(self) -> None:
        framework = self.make_framework()
        result, question_id, _ = self._parked(self._refund_tool([]), "conf-publish")
        sink = InMemoryAnnounce()
        envelopes = make_publish_interrupts(framework)(result, "conf-publish", sink)
        assert [e.question_id for e in envelopes] == [question_id]
        assert sink.envelopes == envelopes
        question = envelopes[0].question
        assert isinstance(question, dict)
        assert (question["function"], question["args"]) == ("issue_refund", self.ARGS)
        assert "args_schema" in question
        assert envelopes[0].policy == approval()

    def test_approve_runs_the_body_with_the_original_args(self) -> None:
        """ "{"action": "approve"} runs it" (seed 000)."""
        calls: list[tuple[str, int]] = []
        result, question_id, _ = self._parked(self._refund_tool(calls), "conf-approve")
        final = self.resume(result, question_id, {"action": "approve"})
        assert self.returned(final) == {"refunded": 40, "customer": "c-17"}
        assert calls == [("c-17", 40)]
        assert self.make_framework().interrupts_in(final) == []

    def test_receipt_names_the_published_question_and_the_args_used(self) -> None:
        """A resumed call's receipt carries the id the question was published under."""
        calls: list[tuple[str, int]] = []
        result, question_id, _ = self._parked(self._refund_tool(calls), "conf-receipt")
        with collect_receipts() as receipts:
            self.resume(result, question_id, {"action": "approve", "args": {"amount": 25}})
        assert [(r.question_id, r.ran, r.args, r.outcome) for r in receipts] == [
            (question_id, True, {**self.ARGS, "amount": 25}, "returned")
        ]

    def test_approve_with_args_runs_the_body_with_them_merged(self) -> None:
        """ "{"action": "approve", "args": {…}} runs it with those" (seed 000)."""
        calls: list[tuple[str, int]] = []
        result, question_id, _ = self._parked(self._refund_tool(calls), "conf-edit")
        final = self.resume(result, question_id, {"action": "approve", "args": {"amount": 25}})
        assert self.returned(final) == {"refunded": 25, "customer": "c-17"}
        assert calls == [("c-17", 25)]

    def test_anything_else_is_returned_in_its_place_unexecuted(self) -> None:
        """ "anything else is returned in its place, unexecuted" (seed 000)."""
        calls: list[tuple[str, int]] = []
        result, question_id, _ = self._parked(self._refund_tool(calls), "conf-reject")
        answer = {"action": "reject", "reason": "not eligible"}
        final = self.resume(result, question_id, answer)
        assert self.returned(final) == answer
        assert calls == []

    def test_decision_parameter_always_runs_and_receives_the_answer(self) -> None:
        """ "If the function declares a decision parameter it always runs and receives the answer"."""
        wait = make_wait(self.make_framework())
        seen: list[Any] = []

        @wait("approval")
        def issue_refund(customer: str, amount: int, decision: Any = None, **context: Any) -> dict[str, Any]:
            seen.append(decision)
            return {"decision": decision}

        result, question_id, value = self._parked(issue_refund, "conf-decision")
        assert "decision" not in value["question"]["args"]
        answer = {"action": "reject", "reason": "no"}
        final = self.resume(result, question_id, answer)
        assert self.returned(final) == {"decision": answer}
        assert seen == [answer]

    def test_when_false_runs_the_body_without_a_question(self) -> None:
        """ "unless when= is given and returns false … no question is raised at all" (seed 000)."""
        calls: list[tuple[str, int]] = []
        tool = self._refund_tool(calls, when=lambda args: args["amount"] > 100)
        result = self.start(tool, dict(self.ARGS), "conf-when")
        assert self.make_framework().interrupts_in(result) == []
        assert self.returned(result) == {"refunded": 40, "customer": "c-17"}
        assert calls == [("c-17", 40)]

    def test_async_mode_announces_and_returns_pending(self) -> None:
        """ "Async: the wrapper is the publisher … returns {"status": "pending_approval",
        "question_id"} without running the body" (seed 000)."""
        calls: list[tuple[str, int]] = []
        sink = InMemoryAnnounce()
        tool = self._refund_tool(calls, mode="async", announce=sink)
        result = self.start(tool, dict(self.ARGS), "conf-async")
        question_id = async_question_id("conf-async", tool.__qualname__, self.ARGS)
        assert self.make_framework().interrupts_in(result) == []
        assert self.returned(result) == {"status": "pending_approval", "question_id": question_id}
        assert [(e.question_id, e.thread_id) for e in sink.envelopes] == [(question_id, "conf-async")]
        assert calls == []
