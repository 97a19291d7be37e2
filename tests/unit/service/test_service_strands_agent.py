"""A Strands agent hosted by the runner: the same questions, answers, receipts and failures.

``examples.strands_agent`` stops on an interrupt; Strands' own ``SnapshotSessionManager`` keeps
each thread's session in the checkpoint bucket (moto, one object per thread), and the runner drives
the agent through the same seam as a LangGraph graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hosted_agents import ask, deliver, output
from service_events import body_of, reply_event

from examples.strands_agent import REFUNDS
from wait_service.ledger import Ledger
from wait_service.runs.graph import GraphLoadError, load_graph
from wait_service.runs.hosted_strands import S3Sessions
from wait_service.runs.inbox import ResumeMessage, StartMessage
from wait_service.runs.runner import RunnerService, build_runner
from wait_service.settings import SettingsError

if TYPE_CHECKING:
    from collections.abc import Callable

    from service_events import Aws, FakeClock

AGENT = "examples.strands_agent:build_agent"
BUCKET = "u-strands-sessions"
WRITES = {"dynamodb": ("PutItem", "UpdateItem", "BatchWriteItem", "TransactWriteItems"), "s3": ("PutObject",)}


class Faults:
    """Numbers every write (DynamoDB items, S3 objects); fails the ``fail_at``-th one, once."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.fail_at = fail_at
        self.writes: list[str] = []

    def hook(self, service: str, operation: str) -> Callable[..., None]:
        def hit(params: dict[str, Any], **_: Any) -> None:
            self.writes.append(f"{service}:{operation}")
            if len(self.writes) == self.fail_at:
                response: Any = {
                    "Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                }
                raise ClientError(response, operation)

        return hit

    def session(self) -> boto3.Session:
        session = boto3.Session(region_name="us-east-1")
        for service, operations in WRITES.items():
            for operation in operations:
                session.events.register(
                    f"provide-client-params.{service}.{operation}", self.hook(service, operation)
                )
        return session


def make_runner(aws: Aws, clock: FakeClock, faults: Faults | None = None) -> RunnerService:
    session = (faults or Faults()).session()
    settings = aws.settings.model_copy(
        update={"graph": AGENT, "framework": "strands", "checkpoint_bucket": BUCKET}
    )
    runner = build_runner(
        settings, dynamodb=session.client("dynamodb"), sns=aws.sns, sqs=aws.sqs, clock=clock
    )
    runner.graph.sessions = S3Sessions(BUCKET, session)  # type: ignore[attr-defined]
    return runner


@pytest.fixture
def bucket(aws: Aws) -> str:
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
    return BUCKET


@pytest.fixture
def runner(aws: Aws, clock: FakeClock, bucket: str) -> RunnerService:
    return make_runner(aws, clock)


@pytest.fixture
def ledger(aws: Aws, clock: FakeClock) -> Ledger:
    return Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)


def test_a_wait_tool_is_one_bound_question_and_the_session_is_in_the_bucket(
    runner: RunnerService, ledger: Ledger, bucket: str
) -> None:
    [question_id] = ask(runner, "s-one", "refund 40 to c-s-one")

    question = ledger.get_question(question_id)
    asked: Any = question.question
    assert (asked["function"], asked["args"]) == ("issue_refund", {"customer": "c-s-one", "amount": 40})
    assert (question.policy["kind"], question.policy["bind"]) == ("approval", True)
    assert ledger.get_thread("s-one").pending == [question_id]
    keys = [
        o["Key"]
        for o in boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=bucket)["Contents"]
    ]
    assert any(key.startswith("strands/") and "s-one" in key for key in keys), keys


def test_an_edit_runs_the_tool_with_the_edited_args_and_the_receipt_says_so(
    runner: RunnerService, ledger: Ledger
) -> None:
    [question_id] = ask(runner, "s-edit", "refund 40 to c-s-edit")
    ledger.record_answer(question_id, {"action": "approve", "args": {"amount": 25}}, answered_by="ann")

    assert runner.run(ResumeMessage(thread_id="s-edit", question_id=question_id)).status == "done"

    assert REFUNDS.paid("c-s-edit") == [25]
    question = ledger.get_question(question_id)
    assert question.status == "resumed"
    assert question.receipt is not None
    assert (question.receipt["ran"], question.receipt["args"]) == (
        True,
        {"customer": "c-s-edit", "amount": 25},
    )
    assert output(ledger, "s-edit") == '{"refunded": 25, "customer": "c-s-edit"}'


def test_an_expired_question_gives_the_tool_a_denial(runner: RunnerService, ledger: Ledger) -> None:
    [question_id] = ask(runner, "s-late", "refund 40 to c-s-late")
    ledger.record_expiry(question_id, {"action": "reject", "reason": "expired"}, rung=0)

    assert runner.run(ResumeMessage(thread_id="s-late", question_id=question_id)).status == "done"

    assert REFUNDS.paid("c-s-late") == []
    question = ledger.get_question(question_id)
    assert question.receipt is not None and question.receipt["ran"] is False
    assert "expired" in output(ledger, "s-late")


def test_an_answer_of_the_wrong_shape_is_422_naming_the_field(
    runner: RunnerService, ledger: Ledger, call: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    [question_id] = ask(runner, "s-bad", "refund 40 to c-s-bad")
    digest = ledger.get_question(question_id).digest
    bad = {"action": "approve", "args": {"amount": "lots"}}

    response = call(reply_event(question_id, bad, if_match=f'"{digest}"'))

    assert response["statusCode"] == 422
    assert body_of(response)["field"] == "answer.args.amount"


def test_two_interrupts_resume_together_once_both_are_decided(runner: RunnerService, ledger: Ledger) -> None:
    first, second = ask(runner, "s-two", "refund 40 to c-s-a and refund 5 to c-s-b")

    ledger.record_answer(second, {"action": "reject", "reason": "not this one"}, answered_by="bob")
    waiting = runner.run(ResumeMessage(thread_id="s-two", question_id=second))
    assert (waiting.status, waiting.pending) == ("interrupted", [first])
    assert REFUNDS.paid("c-s-a") == []

    ledger.record_answer(first, {"action": "approve"}, answered_by="ann")
    assert runner.run(ResumeMessage(thread_id="s-two", question_id=first)).status == "done"

    assert (REFUNDS.paid("c-s-a"), REFUNDS.paid("c-s-b")) == ([40], [])
    assert [ledger.get_question(q).status for q in (first, second)] == ["resumed", "resumed"]
    assert "not this one" in output(ledger, "s-two")


def test_a_failure_at_each_write_of_a_park_republishes_the_same_question_once(
    aws: Aws, clock: FakeClock, ledger: Ledger, bucket: str
) -> None:
    counting = Faults()
    ledger.queue_thread("s-count", "01SCOUNT")
    start = StartMessage(thread_id="s-count", input={"prompt": "refund 3 to c-s-count"}, run_id="01SCOUNT")
    assert deliver(make_runner(aws, clock, counting), start) == ["interrupted"]
    writes = counting.writes
    assert writes.index("s3:PutObject") < writes.index("dynamodb:PutItem"), writes

    for index in range(1, len(writes) + 1):
        # When that one write fails once (the session saved, the question not yet recorded, among
        # them) and the inbox redelivers the start
        thread_id, run_id = f"s-park-{index}", f"01SPARK{index}"
        ledger.queue_thread(thread_id, run_id)
        runner = make_runner(aws, clock, Faults(fail_at=index))
        message = StartMessage(thread_id=thread_id, input={"prompt": "refund 3 to c-s-park"}, run_id=run_id)
        outcomes = deliver(runner, message)

        # Then the thread is parked on one question the ledger holds
        thread = ledger.get_thread(thread_id)
        assert (thread.run_status, outcomes[-1]) == ("interrupted", "interrupted"), (index, outcomes)
        [pending] = thread.pending
        ledger.get_question(pending)
        assert len(ledger.list_questions(thread_id=thread_id).items) == 1, (index, outcomes)


def test_a_failure_at_each_write_of_a_resume_runs_the_tool_once_and_ends_done(
    aws: Aws, clock: FakeClock, ledger: Ledger, runner: RunnerService
) -> None:
    def parked_and_answered(thread_id: str) -> str:
        [question_id] = ask(runner, thread_id, f"refund 9 to c-{thread_id}")
        ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
        return question_id

    counting = Faults()
    question_id = parked_and_answered("s-rcount")
    message = ResumeMessage(thread_id="s-rcount", question_id=question_id)
    assert deliver(make_runner(aws, clock, counting), message) == ["done"]

    for index in range(1, len(counting.writes) + 1):
        thread_id = f"s-resume-{index}"
        question_id = parked_and_answered(thread_id)
        faulty = make_runner(aws, clock, Faults(fail_at=index))
        outcomes = deliver(faulty, ResumeMessage(thread_id=thread_id, question_id=question_id))

        assert (ledger.get_thread(thread_id).run_status, outcomes[-1]) == ("done", "done"), (index, outcomes)
        question = ledger.get_question(question_id)
        assert question.status == "resumed"
        assert question.receipt is not None and question.receipt["ran"] is True
        assert REFUNDS.paid(f"c-{thread_id}") == [9]


def test_a_strands_agent_needs_a_factory_and_the_bucket(aws: Aws, clock: FakeClock) -> None:
    import examples.strands_agent as module
    from examples.strands_agent import build_agent

    module.AGENT_INSTANCE = build_agent()  # type: ignore[attr-defined]
    try:
        with pytest.raises(GraphLoadError, match="export a factory taking session_manager="):
            load_graph("examples.strands_agent:AGENT_INSTANCE", None)
    finally:
        del module.AGENT_INSTANCE  # type: ignore[attr-defined]
    assert type(load_graph(AGENT, None)).__name__ == "StrandsGraph"
    settings = aws.settings.model_copy(
        update={"graph": AGENT, "framework": "strands", "checkpoint_bucket": None}
    )
    with pytest.raises(SettingsError, match="AGENT_WAIT_CHECKPOINT_BUCKET"):
        build_runner(settings, dynamodb=aws.dynamodb, sns=aws.sns, sqs=aws.sqs, clock=clock)


def test_a_strands_runner_loads_without_pydantic_ai_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Strands deployment's layer carries ``strands-agents``, not ``pydantic-ai``: hosting a Strands
    agent never imports Pydantic AI."""
    import importlib
    import importlib.abc
    import sys

    class NoPydanticAI(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
            if name == "pydantic_ai" or name.startswith("pydantic_ai."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    for name in [
        n for n in sys.modules if n.startswith("pydantic_ai") or "hosted_" in n or n.endswith("agent_state")
    ]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [NoPydanticAI(), *sys.meta_path])
    hosted = importlib.import_module("wait_service.runs.hosted_strands")
    assert hosted.StrandsGraph and "pydantic_ai" not in sys.modules
