"""LangChain's HumanInTheLoopMiddleware hosted: one question per action request, one resume per batch.

The middleware interrupts once with ``{"action_requests": [...], "review_configs": [...]}`` and
resumes on ``{"decisions": [...]}``, one decision per request, in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from agent_wait.errors import AnswerInvalidError
from agent_wait.policy import Policy
from examples.middleware_agent import REFUNDS
from wait_service.ledger import Ledger
from wait_service.runs.inbox import ResumeMessage, StartMessage
from wait_service.runs.runner import RunnerService, build_runner

if TYPE_CHECKING:
    from service_events import Aws, FakeClock

GRAPH = "examples.middleware_agent:build_graph"


@pytest.fixture
def runner(aws: Aws, clock: FakeClock) -> RunnerService:
    settings = aws.settings.model_copy(update={"graph": GRAPH})
    return build_runner(
        settings, dynamodb=aws.dynamodb, sns=aws.sns, sqs=aws.sqs, checkpointer=InMemorySaver(), clock=clock
    )


@pytest.fixture
def ledger(aws: Aws, clock: FakeClock) -> Ledger:
    return Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)


def ask(runner: RunnerService, thread_id: str, text: str) -> list[str]:
    outcome = runner.run(
        StartMessage(thread_id=thread_id, input={"messages": [{"role": "user", "content": text}]})
    )
    assert outcome.status == "interrupted"
    return outcome.pending


def last_message(ledger: Ledger, thread_id: str) -> str:
    output: Any = ledger.get_thread(thread_id).output
    return str(output["messages"][-1]["content"])


def test_each_gated_call_is_one_bound_question_naming_the_tool(runner: RunnerService, ledger: Ledger) -> None:
    [question_id] = ask(runner, "t-one", "refund 40 to c-one")

    question = ledger.get_question(question_id)
    asked: Any = question.question
    assert asked["function"] == "issue_refund"
    assert asked["args"] == {"customer": "c-one", "amount": 40}
    assert asked["allowed_decisions"] == ["approve", "edit", "reject"]
    assert "A refund needs your approval" in asked["description"]
    assert question.policy["bind"] is True
    assert question.digest
    assert ledger.get_thread("t-one").pending == [question_id]


def test_an_edit_runs_the_tool_with_the_edited_args_and_the_receipt_says_so(
    runner: RunnerService, ledger: Ledger
) -> None:
    [question_id] = ask(runner, "t-edit", "refund 40 to c-edit")
    ledger.record_answer(question_id, {"action": "approve", "args": {"amount": 25}}, answered_by="ann")

    outcome = runner.run(ResumeMessage(thread_id="t-edit", question_id=question_id))

    assert outcome.status == "done"
    assert REFUNDS.paid("c-edit") == [25]
    question = ledger.get_question(question_id)
    assert question.status == "resumed"
    assert question.receipt is not None
    assert (question.receipt["ran"], question.receipt["args"]) == (True, {"customer": "c-edit", "amount": 25})
    assert "refunded 25 to c-edit" in last_message(ledger, "t-edit")


def test_an_expired_question_is_a_reject_with_the_reason(runner: RunnerService, ledger: Ledger) -> None:
    [question_id] = ask(runner, "t-late", "refund 40 to c-late")
    ledger.record_expiry(question_id, {"action": "reject", "reason": "expired"}, rung=0)

    outcome = runner.run(ResumeMessage(thread_id="t-late", question_id=question_id))

    assert outcome.status == "done"
    assert REFUNDS.paid("c-late") == []
    question = ledger.get_question(question_id)
    assert question.receipt is not None and question.receipt["ran"] is False
    assert "expired" in last_message(ledger, "t-late")


def test_a_batch_resumes_once_every_question_is_decided_in_the_middlewares_order(
    runner: RunnerService, ledger: Ledger
) -> None:
    first, second = ask(runner, "t-two", "refund 40 to c-a and refund 5 to c-b")
    assert first.rsplit("-", 1)[0] == second.rsplit("-", 1)[0]
    assert ledger.get_question(first).digest != ledger.get_question(second).digest

    # The second answered first: the thread keeps waiting on the first, nothing runs
    ledger.record_answer(second, {"action": "reject", "reason": "not this one"}, answered_by="bob")
    waiting = runner.run(ResumeMessage(thread_id="t-two", question_id=second))
    assert (waiting.status, waiting.pending) == ("interrupted", [first])
    assert ledger.get_thread("t-two").pending == [first]
    assert ledger.get_thread("t-two").run_status == "interrupted"
    assert REFUNDS.paid("c-a") == []

    # A redelivery of that resume changes nothing
    again = runner.run(ResumeMessage(thread_id="t-two", question_id=second))
    assert again.pending == [first]

    ledger.record_answer(first, {"action": "approve"}, answered_by="ann")
    done = runner.run(ResumeMessage(thread_id="t-two", question_id=first))

    assert done.status == "done"
    assert (REFUNDS.paid("c-a"), REFUNDS.paid("c-b")) == ([40], [])
    assert [ledger.get_question(q).status for q in (first, second)] == ["resumed", "resumed"]
    receipts = [ledger.get_question(q).receipt for q in (first, second)]
    assert receipts[0] is not None and receipts[0]["args"] == {"customer": "c-a", "amount": 40}
    assert receipts[1] is not None and receipts[1]["ran"] is False
    assert "not this one" in last_message(ledger, "t-two")
    # The resume already ran: the other message is refused
    assert runner.run(ResumeMessage(thread_id="t-two", question_id=second)).status == "refused"


def test_answers_follow_the_allowed_decisions(runner: RunnerService, ledger: Ledger) -> None:
    [question_id] = ask(runner, "t-rules", "refund 40 to c-rules")
    record = ledger.get_question(question_id)
    policy = Policy.model_validate(record.policy)
    question: Any = record.question

    policy.check_answer({"action": "approve", "args": {"amount": 1}}, question)
    with pytest.raises(AnswerInvalidError, match="'respond' is not allowed"):
        policy.check_answer({"action": "respond", "message": "hi"}, question)
    with pytest.raises(AnswerInvalidError) as refused:
        policy.check_answer({"action": "approve", "args": {"amonut": 1}}, question)
    assert refused.value.field == "answer.args.amonut"
    no_edit = {**question, "allowed_decisions": ["approve", "reject"]}
    with pytest.raises(AnswerInvalidError, match="not allowed"):
        policy.check_answer({"action": "approve", "args": {"amount": 1}}, no_edit)


def test_a_revoked_question_is_a_reject_with_the_revocation_reason(
    runner: RunnerService, ledger: Ledger
) -> None:
    [question_id] = ask(runner, "t-revoked", "refund 40 to c-revoked")
    ledger.record_revocation(question_id, "customer withdrew the claim", revoked_by="ops:dan")

    outcome = runner.run(ResumeMessage(thread_id="t-revoked", question_id=question_id))

    assert outcome.status == "done"
    assert REFUNDS.paid("c-revoked") == []
    assert "customer withdrew the claim" in last_message(ledger, "t-revoked")


def test_a_request_that_runs_out_of_time_is_a_reject_saying_so_and_its_batch_resumes(
    aws: Aws, clock: FakeClock
) -> None:
    from wait_service.lifecycle.timers import TimerEvent
    from wait_service.lifecycle.unanswered import build_lifecycle

    # Given the deployment's default ttl (the middleware sets none) and a batch of two requests
    settings = aws.settings.model_copy(update={"graph": GRAPH, "default_ttl": 60})
    runner = build_runner(
        settings, dynamodb=aws.dynamodb, sns=aws.sns, sqs=aws.sqs, checkpointer=InMemorySaver(), clock=clock
    )
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)
    lifecycle = build_lifecycle(
        settings, dynamodb=aws.dynamodb, sns=aws.sns, sqs=aws.sqs, scheduler=aws.scheduler, clock=clock
    )
    first, second = ask(runner, "t-ttl", "refund 40 to c-ttl-a and refund 5 to c-ttl-b")
    assert ledger.get_question(first).expires_at is not None

    # When one is approved and the other's time runs out
    ledger.record_answer(first, {"action": "approve"}, answered_by="ann")
    clock.advance(120)
    fired = lifecycle.handle(TimerEvent(question_id=second, timer="expire", n=0))

    # Then the expired one is a reject whose message is the reason, and the batch resumes
    assert fired == "expired"
    assert ledger.get_question(second).answer == {"action": "reject", "reason": "expired"}
    done = runner.run(ResumeMessage(thread_id="t-ttl", question_id=second))
    assert done.status == "done"
    assert (REFUNDS.paid("c-ttl-a"), REFUNDS.paid("c-ttl-b")) == ([40], [])
    assert "expired" in last_message(ledger, "t-ttl")
