"""A Pydantic AI agent hosted by the runner: the same questions, answers, receipts and failures.

``examples.pydantic_ai_agent`` parks on ``DeferredToolRequests``; its history lives in the
checkpoint table (moto), and the runner drives it through the same seam as a LangGraph graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hosted_agents import ask, deliver, output
from service_events import body_of, reply_event

from agent_wait.errors import AnswerInvalidError
from agent_wait.policy import Policy
from examples.pydantic_ai_agent import REFUNDS
from wait_service.ledger import Ledger
from wait_service.runs.agent_state import RUN_ID_KEY, AgentStateStore
from wait_service.runs.graph import GraphLoadError, load_graph
from wait_service.runs.inbox import ResumeMessage, StartMessage
from wait_service.runs.runner import RUN_ID_KEY as RUNNER_RUN_ID_KEY
from wait_service.runs.runner import RunnerService, build_runner

if TYPE_CHECKING:
    from collections.abc import Callable

    from service_events import Aws, FakeClock

AGENT = "examples.pydantic_ai_agent:agent"
WRITES = ("PutItem", "UpdateItem", "BatchWriteItem", "TransactWriteItems")


class Faults:
    """Numbers every DynamoDB write of a client; fails the ``fail_at``-th one, once (throttled)."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.fail_at = fail_at
        self.writes: list[str] = []

    def watch(self, client: Any) -> Any:
        for operation in WRITES:

            def hook(params: dict[str, Any], _op: str = operation, **_: Any) -> None:
                self.writes.append(f"{_op}:{params.get('TableName', '')}")
                if len(self.writes) == self.fail_at:
                    response: Any = {
                        "Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
                        "ResponseMetadata": {"HTTPStatusCode": 400},
                    }
                    raise ClientError(response, _op)

            client.meta.events.register(f"provide-client-params.dynamodb.{operation}", hook)
        return client


def make_runner(aws: Aws, clock: FakeClock, faults: Faults | None = None) -> RunnerService:
    dynamodb = aws.dynamodb
    if faults is not None:
        dynamodb = faults.watch(boto3.client("dynamodb", region_name="us-east-1"))
    settings = aws.settings.model_copy(update={"graph": AGENT, "framework": "pydantic_ai"})
    return build_runner(settings, dynamodb=dynamodb, sns=aws.sns, sqs=aws.sqs, clock=clock)


@pytest.fixture
def runner(aws: Aws, clock: FakeClock) -> RunnerService:
    return make_runner(aws, clock)


@pytest.fixture
def ledger(aws: Aws, clock: FakeClock) -> Ledger:
    return Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)


def test_a_wait_tool_is_one_bound_question_and_the_history_is_in_the_checkpoint_table(
    aws: Aws, runner: RunnerService, ledger: Ledger
) -> None:
    [question_id] = ask(runner, "p-one", "refund 40 to c-one")

    question = ledger.get_question(question_id)
    asked: Any = question.question
    assert (asked["function"], asked["args"]) == ("issue_refund", {"customer": "c-one", "amount": 40})
    assert asked["args_schema"]["properties"]["amount"]["exclusiveMinimum"] == 0
    assert (question.policy["kind"], question.policy["bind"]) == ("approval", True)
    assert question.digest
    assert ledger.get_thread("p-one").pending == [question_id]
    state = AgentStateStore(aws.resources.checkpoint_table, aws.dynamodb).load("p-one")
    assert state is not None and [call["id"] for call in state.pending] == [question_id]
    assert RUN_ID_KEY == RUNNER_RUN_ID_KEY


def test_an_edit_runs_the_tool_with_the_edited_args_and_the_receipt_says_so(
    runner: RunnerService, ledger: Ledger
) -> None:
    [question_id] = ask(runner, "p-edit", "refund 40 to c-edit")
    ledger.record_answer(question_id, {"action": "approve", "args": {"amount": 25}}, answered_by="ann")

    outcome = runner.run(ResumeMessage(thread_id="p-edit", question_id=question_id))

    assert outcome.status == "done"
    assert REFUNDS.paid("c-edit") == [25]
    question = ledger.get_question(question_id)
    assert question.status == "resumed"
    assert question.receipt is not None
    assert (question.receipt["ran"], question.receipt["args"]) == (True, {"customer": "c-edit", "amount": 25})
    assert output(ledger, "p-edit") == 'issue_refund: {"refunded":25,"customer":"c-edit"}'


def test_an_expired_question_gives_the_tool_a_denial(runner: RunnerService, ledger: Ledger) -> None:
    [question_id] = ask(runner, "p-late", "refund 40 to c-late")
    ledger.record_expiry(question_id, {"action": "reject", "reason": "expired"}, rung=0)

    outcome = runner.run(ResumeMessage(thread_id="p-late", question_id=question_id))

    assert outcome.status == "done"
    assert REFUNDS.paid("c-late") == []
    question = ledger.get_question(question_id)
    assert question.receipt is not None and question.receipt["ran"] is False
    assert "expired" in output(ledger, "p-late")


def test_a_requires_approval_tool_is_asked_with_the_approval_policy_and_a_rejection_denies_it(
    runner: RunnerService, ledger: Ledger
) -> None:
    [question_id] = ask(runner, "p-note", "delete note n-1")
    question = ledger.get_question(question_id)
    assert question.question == {"function": "delete_note", "args": {"note": "n-1"}}
    assert question.policy["kind"] == "approval"

    ledger.record_answer(question_id, {"action": "reject", "reason": "keep it"}, answered_by="ann")
    assert runner.run(ResumeMessage(thread_id="p-note", question_id=question_id)).status == "done"
    assert output(ledger, "p-note") == "delete_note: keep it"

    [approved] = ask(runner, "p-note-2", "delete note n-2")
    ledger.record_answer(approved, {"action": "approve", "args": {"note": "n-3"}}, answered_by="ann")
    assert runner.run(ResumeMessage(thread_id="p-note-2", question_id=approved)).status == "done"
    assert output(ledger, "p-note-2") == "delete_note: deleted n-3"


def test_an_answer_of_the_wrong_shape_is_422_naming_the_field(
    aws: Aws, runner: RunnerService, ledger: Ledger, call: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    [question_id] = ask(runner, "p-bad", "refund 40 to c-bad")
    digest = ledger.get_question(question_id).digest

    response = call(
        reply_event(question_id, {"action": "approve", "args": {"amount": -1}}, if_match=f'"{digest}"')
    )

    assert response["statusCode"] == 422
    assert body_of(response)["field"] == "answer.args.amount"
    assert ledger.get_question(question_id).status in ("raised", "delivered")
    record = ledger.get_question(question_id)
    with pytest.raises(AnswerInvalidError) as refused:
        Policy.model_validate(record.policy).check_answer({"action": "maybe"}, record.question)
    assert refused.value.field == "answer.action"


def test_two_calls_deferred_at_once_resume_together_once_both_are_decided(
    runner: RunnerService, ledger: Ledger
) -> None:
    first, second = ask(runner, "p-two", "refund 40 to c-a2 and refund 5 to c-b2")

    # The second decided first: the thread keeps waiting on the first, nothing runs
    ledger.record_answer(second, {"action": "reject", "reason": "not this one"}, answered_by="bob")
    waiting = runner.run(ResumeMessage(thread_id="p-two", question_id=second))
    assert (waiting.status, waiting.pending) == ("interrupted", [first])
    assert ledger.get_thread("p-two").pending == [first]
    assert REFUNDS.paid("c-a2") == []

    ledger.record_answer(first, {"action": "approve"}, answered_by="ann")
    done = runner.run(ResumeMessage(thread_id="p-two", question_id=first))

    assert done.status == "done"
    assert (REFUNDS.paid("c-a2"), REFUNDS.paid("c-b2")) == ([40], [])
    assert [ledger.get_question(q).status for q in (first, second)] == ["resumed", "resumed"]
    assert "not this one" in output(ledger, "p-two")


def test_a_second_run_on_the_thread_goes_on_with_its_history(runner: RunnerService, ledger: Ledger) -> None:
    [first] = ask(runner, "p-chat", "refund 5 to c-chat")
    ledger.record_answer(first, {"action": "approve"}, answered_by="ann")
    assert runner.run(ResumeMessage(thread_id="p-chat", question_id=first)).status == "done"

    [second] = ask(runner, "p-chat", "refund 7 to c-chat")

    assert second != first
    store = runner.graph.store  # type: ignore[attr-defined]
    state = store.load("p-chat")
    assert state is not None and state.messages.count(b"refund 5 to c-chat") == 1


def test_a_failure_at_each_write_of_a_park_republishes_the_same_question_once(
    aws: Aws, clock: FakeClock, ledger: Ledger
) -> None:
    # Given every DynamoDB write a park makes, the agent's state first
    counting = Faults()
    ledger.queue_thread("p-count", "01PCOUNT")
    assert deliver(
        make_runner(aws, clock, counting),
        StartMessage(thread_id="p-count", input={"prompt": "refund 3 to c-count"}, run_id="01PCOUNT"),
    ) == ["interrupted"]
    checkpoint_table = aws.resources.checkpoint_table
    writes = counting.writes
    assert writes.index(f"PutItem:{checkpoint_table}") < writes.index("PutItem:u-ledger"), writes

    for index in range(1, len(counting.writes) + 1):
        # When that one write fails once (a crash after the state is saved, before the question
        # is recorded, among them) and the inbox redelivers the start
        thread_id, run_id = f"p-park-{index}", f"01PPARK{index}"
        ledger.queue_thread(thread_id, run_id)
        runner = make_runner(aws, clock, Faults(fail_at=index))
        message = StartMessage(thread_id=thread_id, input={"prompt": "refund 3 to c-park"}, run_id=run_id)
        outcomes = deliver(runner, message)

        # Then the thread is parked on one question the ledger holds, the one the state holds
        thread = ledger.get_thread(thread_id)
        assert (thread.run_status, outcomes[-1]) == ("interrupted", "interrupted"), (index, outcomes)
        [pending] = thread.pending
        ledger.get_question(pending)
        state = AgentStateStore(checkpoint_table, aws.dynamodb).load(thread_id)
        assert state is not None and [call["id"] for call in state.pending] == [pending]
        assert len(ledger.list_questions(thread_id=thread_id).items) == 1


def test_a_failure_at_each_write_of_a_resume_runs_the_tool_once_and_ends_done(
    aws: Aws, clock: FakeClock, ledger: Ledger
) -> None:
    plain = make_runner(aws, clock)

    def parked_and_answered(thread_id: str) -> str:
        [question_id] = ask(plain, thread_id, f"refund 9 to c-{thread_id}")
        ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
        return question_id

    counting = Faults()
    question_id = parked_and_answered("p-rcount")
    assert deliver(
        make_runner(aws, clock, counting), ResumeMessage(thread_id="p-rcount", question_id=question_id)
    ) == ["done"]

    for index in range(1, len(counting.writes) + 1):
        # When that one write fails once and the inbox redelivers the resume
        thread_id = f"p-resume-{index}"
        question_id = parked_and_answered(thread_id)
        runner = make_runner(aws, clock, Faults(fail_at=index))
        outcomes = deliver(runner, ResumeMessage(thread_id=thread_id, question_id=question_id))

        # Then the thread ends done, the answer applied once, its question resumed with its receipt
        assert (ledger.get_thread(thread_id).run_status, outcomes[-1]) == ("done", "done"), (index, outcomes)
        question = ledger.get_question(question_id)
        assert question.status == "resumed"
        assert question.receipt is not None and question.receipt["ran"] is True
        assert REFUNDS.paid(f"c-{thread_id}") == [9]


def test_the_framework_is_checked_against_the_object(aws: Aws) -> None:
    with pytest.raises(GraphLoadError, match="not a pydantic_ai.Agent"):
        load_graph("examples.refund_agent:build_graph", None, framework="pydantic_ai")
    with pytest.raises(GraphLoadError, match="AGENT_WAIT_FRAMEWORK='crewai'"):
        load_graph(AGENT, None, framework="crewai")
    detected = load_graph(AGENT, None)
    assert type(detected).__name__ == "PydanticAIGraph"
    assert detected.get_input_jsonschema()["properties"]["prompt"]["type"] == "string"
