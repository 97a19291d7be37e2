"""No wedged thread: a failure at any write of the runner leaves a thread a client can act on.

Every write a park makes (checkpoints, ledger items, topic, outbox, timers) is counted on a good
run; then, for each of them in turn, that one write fails (throttled, as AWS fails) and the inbox
redelivers as it would. Afterwards the thread is ``interrupted`` on questions that each resolve
(``GET /questions/{id}``: 200), never on an id the ledger lacks, and exactly one question stands.
Failures that last (a sink down, the ledger refusing the question) end the same way or ``failed``.

A resume is held to the same: a failure at any of its writes, then the redelivery, ends the thread
done with the answer recorded applied; its question and its end are written together or not at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError
from langgraph.checkpoint.memory import InMemorySaver

from examples.refund_agent import build_graph
from wait_service.inbox import ResumeMessage, StartMessage
from wait_service.ledger import Ledger
from wait_service.resources import MAX_RECEIVE_COUNT
from wait_service.runner import RunnerService, build_announce
from wait_service.timers import build_timers

if TYPE_CHECKING:
    from service_events import Aws, FakeClock

REFUND = {"customer": "c-17", "amount": 40}
WRITES = {
    "dynamodb": ("PutItem", "UpdateItem", "BatchWriteItem", "TransactWriteItems"),
    "sns": ("Publish",),
    "sqs": ("SendMessage",),
    "scheduler": ("CreateSchedule", "DeleteSchedule"),
}


def throttled(operation: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        },
        operation,
    )


class Faults:
    """Numbers every write; fails the ``fail_at``-th (once), or every write ``always`` names."""

    def __init__(self, fail_at: int | None = None, always: str | None = None) -> None:
        self.fail_at = fail_at
        self.always = always
        self.writes: list[str] = []

    def hit(self, name: str) -> None:
        self.writes.append(name)
        if len(self.writes) == self.fail_at or name == self.always:
            raise throttled(name)

    def watch(self, client: Any, service: str) -> Any:
        for operation in WRITES[service]:

            def hook(params: dict[str, Any], _op: str = operation, **_: Any) -> None:
                table = params.get("TableName") or params.get("QueueUrl") or params.get("TopicArn") or ""
                self.hit(f"{service}:{_op}:{str(table).rsplit('/', 1)[-1].rsplit(':', 1)[-1]}")

            client.meta.events.register(f"provide-client-params.{service}.{operation}", hook)
        return client


class FailingSaver(InMemorySaver):
    """An in-memory checkpointer whose writes go through :class:`Faults` as `checkpoint` writes."""

    def __init__(self, faults: Faults) -> None:
        super().__init__()
        self.faults = faults

    def put(self, *args: Any, **kwargs: Any) -> Any:
        self.faults.hit("checkpoint:put")
        return super().put(*args, **kwargs)

    def put_writes(self, *args: Any, **kwargs: Any) -> Any:
        self.faults.hit("checkpoint:put_writes")
        return super().put_writes(*args, **kwargs)


def runner_with(
    aws: Aws, clock: FakeClock, faults: Faults, saver: FailingSaver | None = None
) -> RunnerService:
    """A runner whose writes go through ``faults``; ``saver`` keeps checkpoints from an earlier runner."""
    import boto3

    if saver is None:
        saver = FailingSaver(faults)
    saver.faults = faults

    def client(service: str) -> Any:
        return faults.watch(boto3.client(service, region_name="us-east-1"), service)  # type: ignore[call-overload]

    dynamodb = client("dynamodb")
    return RunnerService(
        build_graph(saver),
        build_announce(aws.settings, dynamodb=dynamodb, sns=client("sns"), sqs=client("sqs")),
        Ledger(aws.resources.ledger_table, dynamodb, clock=clock),
        default_ttl=600,
        clock=clock,
        timers=build_timers(aws.settings, client("scheduler"), clock=clock),
    )


def deliver_until_done(runner: RunnerService, message: StartMessage | ResumeMessage) -> list[str]:
    """Deliver ``message`` as the inbox does, up to ``maxReceiveCount`` times; the outcomes."""
    outcomes = []
    for attempt in range(1, MAX_RECEIVE_COUNT + 1):
        try:
            outcomes.append(runner.run(message, receive_count=attempt).status)
            return outcomes
        except Exception as exc:
            outcomes.append(type(exc).__name__)
    return outcomes


def assert_actionable(aws: Aws, thread_id: str) -> Any:
    """The invariant: `failed` with an error, or `interrupted` on questions that all resolve."""
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb)
    thread = ledger.get_thread(thread_id)
    assert thread.run_status in ("interrupted", "failed"), thread
    if thread.run_status == "failed":
        assert thread.error
    else:
        for question_id in thread.pending:
            ledger.get_question(question_id)  # 200, not 404
    page = ledger.list_questions(thread_id=thread_id)
    assert len(page.items) <= 1, [q.question_id for q in page.items]
    return thread


def count_writes(aws: Aws, clock: FakeClock) -> list[str]:
    faults = Faults()
    runner = runner_with(aws, clock, faults)
    Ledger(aws.resources.ledger_table, aws.dynamodb).queue_thread("t-count", "01COUNT")
    assert deliver_until_done(runner, StartMessage(thread_id="t-count", input=REFUND, run_id="01COUNT")) == [
        "interrupted"
    ]
    return faults.writes


def test_a_failure_at_each_write_of_a_park_never_wedges_the_thread(aws: Aws, clock: FakeClock) -> None:
    # Given every write a park makes, in order
    writes = count_writes(aws, clock)
    assert {w.split(":")[0] for w in writes} >= {"checkpoint", "dynamodb", "sns", "sqs", "scheduler"}

    for index, write in enumerate(writes, start=1):
        # When that one write fails once, and the inbox redelivers the start
        thread_id = f"t-fault-{index}"
        faults = Faults(fail_at=index)
        runner = runner_with(aws, clock, faults)
        Ledger(aws.resources.ledger_table, aws.dynamodb).queue_thread(thread_id, f"01RUN{index}")
        outcomes = deliver_until_done(
            runner, StartMessage(thread_id=thread_id, input=REFUND, run_id=f"01RUN{index}")
        )

        # Then the thread ends parked on one question that resolves
        thread = assert_actionable(aws, thread_id)
        assert (thread.run_status, len(thread.pending)) == ("interrupted", 1), (write, outcomes)


@pytest.mark.parametrize(
    ("down", "status"),
    [
        # A sink that stays down: the question is in the ledger, so the thread is parked and answerable
        ("sns", "interrupted"),
        ("sqs", "interrupted"),
        # The ledger refusing the question itself, or the checkpointer: the run fails visibly
        ("dynamodb:PutItem", "failed"),
        ("checkpoint:put", "failed"),
    ],
)
def test_a_lasting_failure_ends_the_thread_parked_or_failed_never_wedged(
    aws: Aws, clock: FakeClock, down: str, status: str
) -> None:
    writes = count_writes(aws, clock)
    [target] = [w for w in dict.fromkeys(writes) if w.startswith(down) and "outbox" not in down][:1] or [
        next(w for w in writes if w.startswith(down))
    ]
    if down == "sqs":
        target = next(w for w in writes if w.startswith("sqs:SendMessage") and "outbox" in w)
    faults = Faults(always=target)
    runner = runner_with(aws, clock, faults)
    Ledger(aws.resources.ledger_table, aws.dynamodb).queue_thread("t-down", "01DOWN")

    outcomes = deliver_until_done(runner, StartMessage(thread_id="t-down", input=REFUND, run_id="01DOWN"))

    assert len(outcomes) == MAX_RECEIVE_COUNT, outcomes
    thread = assert_actionable(aws, "t-down")
    assert thread.run_status == status
    if status == "failed":
        # and a new run on the thread is accepted and runs, not deferred behind a lost question
        runner = runner_with(aws, clock, Faults())
        Ledger(aws.resources.ledger_table, aws.dynamodb).queue_thread("t-down", "01AGAIN")
        assert (
            runner.run(StartMessage(thread_id="t-down", input=REFUND, run_id="01AGAIN")).status
            == "interrupted"
        )


def parked_and_answered(aws: Aws, clock: FakeClock, thread_id: str, saver: FailingSaver) -> str:
    """A thread parked on its question, answered: the id of the question its resume carries."""
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)
    ledger.queue_thread(thread_id, f"01{thread_id}")
    runner = runner_with(aws, clock, Faults(), saver)
    [question_id] = runner.run(
        StartMessage(thread_id=thread_id, input=REFUND, run_id=f"01{thread_id}")
    ).pending
    ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
    return question_id


def test_a_failure_at_each_write_of_a_resume_ends_the_thread_done_with_the_answer_applied(
    aws: Aws, clock: FakeClock
) -> None:
    # Given every write a resume makes, in order
    saver = FailingSaver(Faults())
    question_id = parked_and_answered(aws, clock, "t-resume-count", saver)
    faults = Faults()
    message = ResumeMessage(thread_id="t-resume-count", question_id=question_id)
    assert deliver_until_done(runner_with(aws, clock, faults, saver), message) == ["done"]
    writes = faults.writes
    assert "dynamodb:TransactWriteItems:" in writes, writes

    for index, write in enumerate(writes, start=1):
        # When that one write fails once, and the inbox redelivers the resume
        thread_id = f"t-resume-fault-{index}"
        question_id = parked_and_answered(aws, clock, thread_id, saver)
        runner = runner_with(aws, clock, Faults(fail_at=index), saver)
        outcomes = deliver_until_done(runner, ResumeMessage(thread_id=thread_id, question_id=question_id))

        # Then the thread ends done, and its question is recorded resumed: nothing half-written
        ledger = Ledger(aws.resources.ledger_table, aws.dynamodb)
        thread = ledger.get_thread(thread_id)
        assert (thread.run_status, outcomes[-1]) == ("done", "done"), (write, outcomes, thread)
        assert ledger.get_question(question_id).status == "resumed", (write, outcomes)


def test_a_failed_resume_transaction_writes_nothing_and_the_redelivery_ends_the_thread(
    aws: Aws, clock: FakeClock
) -> None:
    # Given an answered question, and the ledger refusing the transaction of the resume's end
    saver = FailingSaver(Faults())
    question_id = parked_and_answered(aws, clock, "t-tx", saver)
    faults = Faults(always="dynamodb:TransactWriteItems:")
    runner = runner_with(aws, clock, faults, saver)
    message = ResumeMessage(thread_id="t-tx", question_id=question_id)

    # When the resume runs
    with pytest.raises(ClientError):
        runner.run(message, receive_count=1)

    # Then neither half is written: the question is still answered, the thread retrying
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb)
    question = ledger.get_question(question_id)
    assert (question.status, question.resumed_at) == ("answered", None)
    assert ledger.get_thread("t-tx").run_status == "retrying"

    # When the ledger is back and the message is redelivered
    faults.always = None
    outcome = runner.run(message, receive_count=2)

    # Then the redelivery finishes from the checkpoint: the thread done, the answer applied
    assert outcome.status == ledger.get_thread("t-tx").run_status == "done"
    assert ledger.get_question(question_id).status == "resumed"
    output = ledger.get_thread("t-tx").output
    assert isinstance(output, dict) and output["refund"] is not None


READS = {"dynamodb": ("GetItem", "Query", "BatchGetItem", "TransactGetItems")}


class CallFaults(Faults):
    """:class:`Faults` over every call a resume makes: the reads (ledger, checkpoint) too."""

    def watch(self, client: Any, service: str) -> Any:
        super().watch(client, service)
        for operation in READS.get(service, ()):

            def hook(params: dict[str, Any], _op: str = operation, **_: Any) -> None:
                self.hit(f"{service}:{_op}:{str(params.get('TableName', '')).rsplit('/', 1)[-1]}")

            client.meta.events.register(f"provide-client-params.{service}.{operation}", hook)
        return client


class ReadingSaver(FailingSaver):
    """A :class:`FailingSaver` whose checkpoint reads go through its faults as well."""

    def get_tuple(self, *args: Any, **kwargs: Any) -> Any:
        self.faults.hit("checkpoint:get_tuple")
        return super().get_tuple(*args, **kwargs)


def test_a_failure_at_each_call_of_a_resumes_last_attempt_marks_its_question_resume_failed(
    aws: Aws, clock: FakeClock
) -> None:
    # docs/operations.md, "When something fails": "the last failure marks the question
    # resume_failed and the thread failed", and the message moves to the inbox DLQ. Given every call
    # a resume makes, reads included, in order
    saver = ReadingSaver(Faults())
    question_id = parked_and_answered(aws, clock, "t-last-count", saver)
    faults = CallFaults()
    message = ResumeMessage(thread_id="t-last-count", question_id=question_id)
    assert (
        runner_with(aws, clock, faults, saver).run(message, receive_count=MAX_RECEIVE_COUNT).status == "done"
    )
    calls = faults.writes
    # (the resume's own checks come first: the question's read, then the thread marked running)
    assert calls[0].startswith("dynamodb:GetItem:"), calls
    assert calls[1].startswith("dynamodb:UpdateItem:"), calls

    for index, call in enumerate(calls, start=1):
        # When that one call fails on the message's last receive
        thread_id = f"t-last-{index}"
        question_id = parked_and_answered(aws, clock, thread_id, saver)
        runner = runner_with(aws, clock, CallFaults(fail_at=index), saver)
        try:
            outcome: str = runner.run(
                ResumeMessage(thread_id=thread_id, question_id=question_id), receive_count=MAX_RECEIVE_COUNT
            ).status
        except ClientError:
            outcome = "dlq"

        # Then the message goes to the DLQ with the question `resume_failed` and the thread
        # `failed`, or the answer was applied before that call: never left `answered`
        ledger = Ledger(aws.resources.ledger_table, aws.dynamodb)
        question = ledger.get_question(question_id)
        thread = ledger.get_thread(thread_id)
        if question.status == "resumed":
            assert thread.run_status == "done", (call, outcome, thread)
        else:
            assert (outcome, question.status, thread.run_status) == ("dlq", "resume_failed", "failed"), call
            assert thread.error and "ThrottlingException" in thread.error
