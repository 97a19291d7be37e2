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

import threading
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError
from langgraph.checkpoint.memory import InMemorySaver

from examples.refund_agent import build_graph
from wait_service.ledger import Ledger
from wait_service.lifecycle.timers import build_timers
from wait_service.resources import MAX_RECEIVE_COUNT
from wait_service.runs.inbox import ResumeMessage, StartMessage
from wait_service.runs.runner import RunnerService, build_announce

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

    def __init__(
        self, fail_at: int | None = None, always: str | None = None, once: str | None = None
    ) -> None:
        self.fail_at = fail_at
        self.always = always
        # Fails the first call whose name starts with `once`, and no other.
        self.once = once
        self.writes: list[str] = []
        # The runner makes some calls at once (from its worker thread): number them one by one.
        self._lock = threading.Lock()

    def hit(self, name: str) -> None:
        with self._lock:
            self.writes.append(name)
            number = len(self.writes)
            first = self.once is not None and name.startswith(self.once)
            if first:
                self.once = None
        if number == self.fail_at or name == self.always or first:
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
    # (the resume's own checks come first, made at once: the question's read and the thread
    # marked running)
    assert sorted(call.split(":")[1] for call in calls[:2]) == ["GetItem", "UpdateItem"], calls

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


# -- writes made together or at once ---------------------------------------------------------------


def test_a_park_records_its_questions_delivered_with_the_thread_parked_or_neither(
    aws: Aws, clock: FakeClock
) -> None:
    # Given a park whose last ledger write (the thread parked, its question delivered) fails once
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb)
    ledger.queue_thread("t-fold", "01FOLD")
    faults = Faults(once="dynamodb:TransactWriteItems:")
    runner = runner_with(aws, clock, faults)
    message = StartMessage(thread_id="t-fold", input=REFUND, run_id="01FOLD")

    # When the start runs
    with pytest.raises(ClientError):
        runner.run(message, receive_count=1)

    # Then it was one write for both, and neither half is written: the question is in the ledger
    # (answerable) but not delivered, the thread is retrying, not parked
    recorded = faults.writes.index(f"dynamodb:PutItem:{aws.resources.ledger_table}")
    after = [w for w in faults.writes[recorded + 1 :] if w.startswith("dynamodb:")]
    assert after[0].startswith("dynamodb:TransactWriteItems:"), faults.writes
    [question] = ledger.list_questions(thread_id="t-fold").items
    assert question.status == "raised"
    assert ledger.get_thread("t-fold").run_status == "retrying"

    # When the inbox redelivers the start
    outcome = runner.run(message, receive_count=2)

    # Then one question stands, delivered once per sink, the thread parked on it; every
    # announcement of it carries the same dedupe_key (the outbox and topic deduplicate)
    assert outcome.pending == [question.question_id] == ledger.get_thread("t-fold").pending
    stored = ledger.get_question(question.question_id)
    assert stored.status == "delivered"
    assert [s.get("detail") for s in stored.lifecycle if s["stage"] == "delivered"] == [
        "dynamodb",
        "sns",
        "sqs",
    ]
    assert {e["dedupe_key"] for e in aws.outbox()} == {f"wait.created:{question.question_id}"}
    assert len(ledger.list_questions(thread_id="t-fold").items) == 1


def test_a_question_answered_before_the_park_is_recorded_still_parks_the_thread_and_resumes(
    aws: Aws, clock: FakeClock
) -> None:
    from agent_wait.langgraph import publish_interrupts

    # Given a person who answers the question between its announcement and the park's write
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)
    ledger.queue_thread("t-quick", "01QUICK")
    saver = FailingSaver(Faults())
    runner = runner_with(aws, clock, Faults(), saver)

    def answered_at_once(result: Any, thread_id: str, announce: Any, **kwargs: Any) -> Any:
        envelopes = publish_interrupts(result, thread_id, announce, **kwargs)
        for envelope in envelopes:
            assert (
                ledger.record_answer(envelope.question_id, {"action": "approve"}, answered_by="ann") is None
            )
        return envelopes

    runner.publish = answered_at_once

    # When the start parks: the transaction is cancelled (the question is no longer raised)
    [question_id] = runner.run(StartMessage(thread_id="t-quick", input=REFUND, run_id="01QUICK")).pending

    # Then the writes are made one by one: the answer stands, the thread is parked on it
    assert ledger.get_question(question_id).status == "answered"
    thread = ledger.get_thread("t-quick")
    assert (thread.run_status, thread.pending) == ("interrupted", [question_id])

    # and its resume applies the answer once
    resumed = runner_with(aws, clock, Faults(), saver).run(
        ResumeMessage(thread_id="t-quick", question_id=question_id)
    )
    assert resumed.status == ledger.get_thread("t-quick").run_status == "done"
    assert ledger.get_question(question_id).status == "resumed"


@pytest.mark.parametrize("call", ["dynamodb:GetItem:", "dynamodb:UpdateItem:"])
def test_a_failure_of_either_call_made_at_once_before_a_resume_is_retried_and_resumes_once(
    aws: Aws, clock: FakeClock, call: str
) -> None:
    # Given an answered question, and one of the resume's first two calls (the question read and
    # the thread marked running, made at once) failing once: the other may have been made
    saver = FailingSaver(Faults())
    thread_id = f"t-once-{call.split(':')[1]}"
    question_id = parked_and_answered(aws, clock, thread_id, saver)
    faults = CallFaults(once=call)
    runner = runner_with(aws, clock, faults, saver)
    message = ResumeMessage(thread_id=thread_id, question_id=question_id)

    # When the inbox delivers the resume until it is consumed
    outcomes = deliver_until_done(runner, message)

    # Then the first attempt failed on that call, the redelivery ran the answer once
    assert outcomes == ["ClientError", "done"], (faults.writes, outcomes)
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb)
    assert ledger.get_thread(thread_id).run_status == "done"
    question = ledger.get_question(question_id)
    assert question.status == "resumed"
    assert [s["stage"] for s in question.lifecycle].count("resumed") == 1
    # and a duplicate of the message changes nothing
    assert runner.run(message, receive_count=1).status == "refused"


def test_a_resume_refused_once_its_question_is_read_parks_the_thread_on_it_again(
    aws: Aws, clock: FakeClock
) -> None:
    # Given a thread parked on a question nobody answered, and a resume message naming it (written
    # by hand: the dispatcher only sends one for a decided question)
    saver = FailingSaver(Faults())
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)
    ledger.queue_thread("t-early", "01EARLY")
    runner = runner_with(aws, clock, Faults(), saver)
    [question_id] = runner.run(StartMessage(thread_id="t-early", input=REFUND, run_id="01EARLY")).pending
    message = ResumeMessage(thread_id="t-early", question_id=question_id)

    # When it runs: the thread was marked running in the same round trip as the question's read
    assert runner.run(message).status == "refused"

    # Then the thread is parked on the question again, and the question's answer still resumes it
    thread = ledger.get_thread("t-early")
    assert (thread.run_status, thread.pending) == ("interrupted", [question_id])
    ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
    assert runner.run(message).status == "done"
    assert ledger.get_question(question_id).status == "resumed"


def test_a_failure_parking_the_thread_again_after_a_refused_resume_loses_no_answer(
    aws: Aws, clock: FakeClock
) -> None:
    # Given the same refused resume, and the write parking the thread again failing (throttled)
    saver = FailingSaver(Faults())
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)
    ledger.queue_thread("t-undo", "01UNDO")
    [question_id] = (
        runner_with(aws, clock, Faults(), saver)
        .run(StartMessage(thread_id="t-undo", input=REFUND, run_id="01UNDO"))
        .pending
    )
    faults = Faults()
    runner = runner_with(aws, clock, faults, saver)
    message = ResumeMessage(thread_id="t-undo", question_id=question_id)
    faults.fail_at = 2  # the mark running is the first write, the thread parked again the second

    # When it runs and is redelivered: the failure is retried, the redelivery refused
    assert deliver_until_done(runner, message) == ["ClientError", "refused"]

    # Then nothing was run or lost: the question is still open and its answer resumes the thread once
    assert ledger.get_question(question_id).status == "delivered"
    ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
    assert runner.run(message).status == "done"
    assert ledger.get_thread("t-undo").run_status == "done"
    question = ledger.get_question(question_id)
    assert (question.status, [s["stage"] for s in question.lifecycle].count("resumed")) == ("resumed", 1)
