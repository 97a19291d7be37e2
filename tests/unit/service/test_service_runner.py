"""The runner: start and resume messages, fan-out, thread records, partial batch failures, metrics."""

from __future__ import annotations

import contextlib
import copy
import json
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any
from unittest.mock import ANY

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Interrupt
from service_events import load_event, load_handler, reply_event, start_event

from agent_wait.errors import AnnounceError
from wait_service.ledger import Ledger
from wait_service.observability import metrics
from wait_service.runs.inbox import Inbox, ResumeMessage, StartMessage, parse_message
from wait_service.runs.runner import RunnerService, build_runner, is_infrastructure_failure, output_json
from wait_service.runs.sqs_events import consume_batch

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from service_events import Aws, FakeClock, LambdaContext

    from wait_service.http.api import WaitApi

    Call = Callable[[dict[str, Any]], dict[str, Any]]

REFUND = {"customer": "c-17", "amount": 40}


@pytest.fixture(autouse=True)
def fresh_metrics() -> Iterator[None]:
    metrics.clear_metrics()
    yield
    metrics.clear_metrics()


def metric(name: str) -> float:
    values = metrics.metric_set.get(name, {}).get("Value", [])
    return float(sum(values))


@pytest.fixture
def runner(aws: Aws, clock: FakeClock) -> RunnerService:
    return build_runner(
        aws.settings,
        dynamodb=aws.dynamodb,
        sns=aws.sns,
        sqs=aws.sqs,
        checkpointer=InMemorySaver(),
        clock=clock,
    )


@pytest.fixture
def ledger(aws: Aws, clock: FakeClock) -> Ledger:
    return Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)


def drain(aws: Aws, queue_url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while got := aws.sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", []):
        messages += [json.loads(m["Body"]) for m in got]
        for m in got:
            aws.sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
    return messages


def park(runner: RunnerService, thread_id: str = "t-1") -> str:
    outcome = runner.run(StartMessage(thread_id=thread_id, input=REFUND))
    [question_id] = outcome.pending
    return question_id


def test_start_parks_the_thread_and_fans_the_question_out(
    aws: Aws, runner: RunnerService, ledger: Ledger
) -> None:
    # When a start message runs the refund agent
    outcome = runner.run(StartMessage(thread_id="t-1", input=REFUND))

    # Then exactly one question is raised, announced to the outbox, the topic and the ledger
    assert outcome.status == "interrupted"
    [question_id] = outcome.pending
    assert outcome.delivered == [question_id]
    [outboxed] = drain(aws, aws.resources.outbox_url)
    [subscribed] = drain(aws, aws.resources.subscriber_url)
    assert outboxed == subscribed
    assert outboxed["question_id"] == question_id
    assert outboxed["question"] == {"function": "issue_refund", "args": REFUND, "args_schema": ANY}
    assert outboxed["reply_with"]["url"] == f"https://api.example/questions/{question_id}/reply"
    question = ledger.get_question(question_id)
    assert question.status == "delivered"
    # One `delivered` stage per sink that took the envelope
    assert [(s["stage"], s.get("detail")) for s in question.lifecycle] == [
        ("raised", None),
        ("delivered", "dynamodb"),
        ("delivered", "sns"),
        ("delivered", "sqs"),
    ]
    thread = ledger.get_thread("t-1")
    assert (thread.run_status, thread.pending) == ("interrupted", [question_id])
    assert metric("QuestionsRaised") == 1


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"action": "approve"}, {"refund": {"refund_id": "rf-c-17-40", "customer": "c-17", "amount": 40}}),
        (
            {"action": "approve", "args": {"amount": 25}},
            {"refund": {"refund_id": "rf-c-17-25", "customer": "c-17", "amount": 25}},
        ),
        (
            {"action": "reject", "reason": "duplicate"},
            {"refund": None, "rejection": {"action": "reject", "reason": "duplicate"}},
        ),
    ],
)
def test_resume_finishes_the_thread_with_the_answer(
    runner: RunnerService, ledger: Ledger, answer: dict[str, Any], expected: dict[str, Any]
) -> None:
    question_id = park(runner)
    ledger.record_answer(question_id, answer, answered_by="ann")

    outcome = runner.run(ResumeMessage(thread_id="t-1", question_id=question_id))

    assert (outcome.status, outcome.resumed) == ("done", question_id)
    thread = ledger.get_thread("t-1")
    assert thread.run_status == "done"
    assert thread.pending == []
    assert isinstance(thread.output, dict)
    assert {k: thread.output.get(k) for k in expected} == expected
    assert ledger.get_question(question_id).status == "resumed"
    assert metric("QuestionsResumed") == 1


def test_a_duplicate_resume_changes_nothing(runner: RunnerService, ledger: Ledger) -> None:
    question_id = park(runner)
    ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
    message = ResumeMessage(thread_id="t-1", question_id=question_id)
    runner.run(message)
    first_output = ledger.get_thread("t-1").output

    again = runner.run(message)

    # The thread no longer waits on the question: the second delivery resumes nothing
    assert again.status == "refused"
    assert ledger.get_thread("t-1").output == first_output
    assert ledger.get_question(question_id).status == "resumed"
    assert metric("QuestionsResumed") == 1
    assert metric("ResumesRefused") == 1


def test_a_failing_sink_parks_the_thread_and_retries_the_message(
    aws: Aws, runner: RunnerService, ledger: Ledger
) -> None:
    """Seed 000: "the next redelivery republishes with the same dedupe_key, and that is the retry"."""
    # Given the topic refuses every publish
    topic_arn = aws.resources.topic_arn
    aws.sns.delete_topic(TopicArn=topic_arn)
    start = StartMessage(thread_id="t-1", input=REFUND, run_id="01RUN")

    # When the run parks on its question
    with pytest.raises(AnnounceError) as raised:
        runner.run(start)

    # Then the thread is recorded parked, the ledger and outbox have the question, not `delivered`,
    # and the message fails so the queue hands it back
    question_id = raised.value.question_id
    assert question_id is not None
    assert ledger.get_thread("t-1").run_status == "interrupted"
    assert ledger.get_question(question_id).status == "raised"
    assert len(drain(aws, aws.resources.outbox_url)) == 1

    # When the topic is back and the message is redelivered
    aws.sns.create_topic(Name=topic_arn.rsplit(":", 1)[1])
    again = runner.run(start, receive_count=2)

    # Then the same question is republished and now delivered, without a second question
    assert again.pending == again.delivered == [question_id]
    assert ledger.get_question(question_id).status == "delivered"
    assert metric("QuestionsRaised") == 1


class Boom(RuntimeError):
    pass


THROTTLED = ClientError(
    {
        "Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
        "ResponseMetadata": {"HTTPStatusCode": 400},
    },
    "PutItem",
)


class FailingGraph:
    """A graph whose run raises ``error`` for the threads named in ``fail``, parked on ``pending``."""

    def __init__(self, fail: set[str], error: Exception | None = None, pending: tuple[str, ...] = ()) -> None:
        self.fail = fail
        self.error = error
        self.pending = pending
        self.invoked: list[str] = []

    def invoke(self, input: Any, config: Any, *, durability: Any = None) -> Any:
        thread_id = config["configurable"]["thread_id"]
        self.invoked.append(thread_id)
        if thread_id in self.fail:
            raise self.error or Boom(f"model unavailable for {thread_id}")
        return {"ok": True}

    def get_state(self, config: Any) -> Any:
        return SimpleNamespace(
            interrupts=[Interrupt(value=None, id=i) for i in self.pending], metadata={}, values={}
        )


def failing_runner(
    runner: RunnerService, fail: set[str], error: Exception | None = None, pending: tuple[str, ...] = ()
) -> tuple[RunnerService, FailingGraph]:
    graph = FailingGraph(fail, error, pending)
    return RunnerService(graph, runner.announce, runner.ledger, max_receive_count=3), graph


def test_a_run_whose_graph_raises_ends_at_once_and_frees_the_thread(
    runner: RunnerService, ledger: Ledger
) -> None:
    """Issue: "an exception raised by the graph ends the run at once ... the message consumed"."""
    service, _ = failing_runner(runner, {"t-1"})

    # When the graph raises (bad input, a bug)
    outcome = service.run(StartMessage(thread_id="t-1", input={}))

    # Then the message succeeds (consumed, never retried), the thread is failed with the error
    assert (outcome.status, outcome.error) == ("failed", "Boom: model unavailable for t-1")
    thread = ledger.get_thread("t-1")
    assert thread.run_status == "failed"
    assert thread.error == "Boom: model unavailable for t-1"
    assert metric("RunsFailed") == 1
    # and a new run is accepted immediately
    ledger.queue_thread("t-1", "01NEXT")
    assert ledger.get_thread("t-1").run_status == "queued"


def test_a_resume_whose_graph_raises_marks_the_question_resume_failed_at_once(
    aws: Aws, runner: RunnerService, ledger: Ledger
) -> None:
    aws.raise_question("t-1", "q-1")
    ledger.record_answer("q-1", {"action": "approve"}, answered_by="ann")
    service, _ = failing_runner(runner, {"t-1"}, pending=("q-1",))

    outcome = service.run(ResumeMessage(thread_id="t-1", question_id="q-1"))

    assert outcome.status == "failed"
    assert ledger.get_question("q-1").status == "resume_failed"
    assert ledger.get_thread("t-1").run_status == "failed"
    assert metric("ResumeFailures") == 1


def test_an_infrastructure_failure_retries_then_fails_visibly_on_the_last_attempt(
    aws: Aws, runner: RunnerService, ledger: Ledger
) -> None:
    """Seed 002: retries "with exponential backoff (up to 5 attempts)", then `resume_failed`."""
    aws.raise_question("t-1", "q-1")
    ledger.record_answer("q-1", {"action": "approve"}, answered_by="ann")
    service, _ = failing_runner(runner, {"t-1"}, error=THROTTLED, pending=("q-1",))
    message = ResumeMessage(thread_id="t-1", question_id="q-1")

    # While attempts remain the message is retried and the thread says so, never `failed`
    for attempt in (1, 2):
        with pytest.raises(ClientError):
            service.run(message, receive_count=attempt)
        thread = ledger.get_thread("t-1")
        assert (thread.run_status, thread.attempt) == ("retrying", attempt)
        assert ledger.get_question("q-1").status == "answered"

    # The last attempt records the failure before the queue moves the message to the DLQ
    with pytest.raises(ClientError):
        service.run(message, receive_count=3)
    assert ledger.get_question("q-1").status == "resume_failed"
    assert ledger.get_thread("t-1").run_status == "failed"
    assert metric("ResumeFailures") == 1


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (THROTTLED, True),
        (
            ClientError(
                {"Error": {"Code": "InternalServerError"}, "ResponseMetadata": {"HTTPStatusCode": 500}},
                "Query",
            ),
            True,
        ),
        (EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"), True),
        (ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"), True),
        (
            ClientError(
                {"Error": {"Code": "ValidationException"}, "ResponseMetadata": {"HTTPStatusCode": 400}},
                "PutItem",
            ),
            False,
        ),
        (KeyError("customer"), False),
        (Boom("bug"), False),
    ],
    ids=["throttled", "5xx", "connection", "timeout", "validation", "keyerror", "bug"],
)
def test_only_infrastructure_failures_are_retried(error: Exception, retried: bool) -> None:
    assert is_infrastructure_failure(error) is retried


def test_a_retried_message_backs_off_exponentially(
    aws: Aws, runner: RunnerService, ledger: Ledger, context: LambdaContext
) -> None:
    # Given a start whose graph hits throttling every time, consumed as Lambda would
    service, _ = failing_runner(runner, {"t-batch-1"}, error=THROTTLED)
    service.inbox = Inbox(aws.resources.inbox_url, aws.sqs)
    delays: list[int] = []
    aws.sqs.meta.events.register(
        "provide-client-params.sqs.ChangeMessageVisibility",
        lambda params, **_: delays.append(params["VisibilityTimeout"]),
    )
    event = load_event("inbox_batch.json")
    event["Records"] = event["Records"][:1]

    # When it fails on its first and second receive
    for receive in ("1", "2"):
        event["Records"][0]["attributes"]["ApproximateReceiveCount"] = receive
        with contextlib.suppress(Exception):
            load_handler("runner").handle(event, context, service=service)

    # Then each retry waits twice as long as the one before (2 s, then 4 s)
    assert delays == [2, 4]


def test_the_handler_consumes_a_graph_failure_and_runs_the_other_threads(
    runner: RunnerService, ledger: Ledger, context: LambdaContext
) -> None:
    # Given a FIFO batch of three threads whose second run's graph raises
    event = load_event("inbox_batch.json")
    service, graph = failing_runner(runner, {"t-batch-2"})

    response = load_handler("runner").handle(event, context, service=service)

    # Then nothing is retried: the failure is recorded and the thread free for its next run
    assert response == {"batchItemFailures": []}
    assert graph.invoked == ["t-batch-1", "t-batch-2", "t-batch-3"]
    assert [ledger.get_thread(f"t-batch-{n}").run_status for n in (1, 2, 3)] == ["done", "failed", "done"]


def test_handler_retries_an_infrastructure_failure_in_order_and_runs_the_others(
    runner: RunnerService, ledger: Ledger, context: LambdaContext
) -> None:
    # Given a FIFO batch of three threads whose second run hits throttling, with a later message
    event = load_event("inbox_batch.json")
    later = copy.deepcopy(event["Records"][1]) | {"messageId": "later-of-t-batch-2"}
    event["Records"].insert(2, later)
    service, graph = failing_runner(runner, {"t-batch-2"}, error=THROTTLED)

    response = load_handler("runner").handle(event, context, service=service)

    # Then the failure and the later record of its thread are retried, in order, without running
    ids = [r["messageId"] for r in event["Records"]]
    assert response == {"batchItemFailures": [{"itemIdentifier": ids[1]}, {"itemIdentifier": ids[2]}]}
    # and the other threads ran: one stuck thread does not hold up the batch
    assert graph.invoked == ["t-batch-1", "t-batch-2", "t-batch-3"]
    assert [ledger.get_thread(f"t-batch-{n}").run_status for n in (1, 2, 3)] == ["done", "retrying", "done"]


def test_handler_entry_point_with_the_decorator_stack(
    runner: RunnerService, ledger: Ledger, context: LambdaContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    handler = load_handler("runner")
    monkeypatch.setattr(handler, "build_service", lambda: runner)
    event = load_event("inbox_batch.json")

    response = handler.handler(event, context)

    assert response == {"batchItemFailures": []}
    assert [ledger.get_thread(f"t-batch-{n}").run_status for n in (1, 2, 3)] == ["interrupted"] * 3


def test_api_and_runner_through_the_inbox(
    aws: Aws, runner: RunnerService, ledger: Ledger, call: Call, context: LambdaContext
) -> None:
    # Given a run started over the api and consumed from the inbox as Lambda would
    handler = load_handler("runner")

    def run_batch(event: dict[str, Any], ctx: Any) -> Any:
        return handler.handle(event, ctx, service=runner)

    assert call(start_event("t-7", REFUND))["statusCode"] == 202
    aws.dispatch()  # the ledger's stream enqueues the start
    assert consume_batch(aws.sqs, aws.resources.inbox_url, run_batch, context).succeeded
    [question_id] = ledger.get_thread("t-7").pending
    digest = ledger.get_question(question_id).digest

    # When the human edits the amount and the runner consumes the resume
    reply = call(
        reply_event(question_id, {"action": "approve", "args": {"amount": 25}}, if_match=f'"{digest}"')
    )
    aws.dispatch()  # the ledger's stream enqueues the resume
    batch = consume_batch(aws.sqs, aws.resources.inbox_url, run_batch, context)

    # Then the thread is done with a refund of 25 and the inbox is empty
    assert reply["statusCode"] == 202
    assert (batch.received, batch.failed) == (1, [])
    thread = ledger.get_thread("t-7")
    assert thread.run_status == "done"
    output: Any = thread.output
    assert output["refund"]["amount"] == 25
    assert consume_batch(aws.sqs, aws.resources.inbox_url, run_batch, context).received == 0


def test_free_text_question_from_a_bare_interrupt(
    aws: Aws, clock: FakeClock, ledger: Ledger, call: Call
) -> None:
    settings = aws.settings.model_copy(update={"graph": "examples.ask_agent:build_graph"})
    runner = build_runner(
        settings, dynamodb=aws.dynamodb, sns=aws.sns, sqs=aws.sqs, checkpointer=InMemorySaver(), clock=clock
    )
    [question_id] = runner.run(StartMessage(thread_id="t-ask", input={"order": "o-9"})).pending
    question = ledger.get_question(question_id)
    assert (question.policy["kind"], question.policy["bind"]) == ("text", False)

    # A text policy does not bind: no If-Match needed
    assert call(reply_event(question_id, "Main St 1"))["statusCode"] == 202
    runner.run(ResumeMessage(thread_id="t-ask", question_id=question_id, answer="Main St 1"))

    output = ledger.get_thread("t-ask").output
    assert isinstance(output, dict)
    assert output["shipping_to"] == "Main St 1"


def test_default_ttl_applies_when_the_policy_has_none(aws: Aws, clock: FakeClock, ledger: Ledger) -> None:
    settings = aws.settings.model_copy(update={"default_ttl": 600})
    runner = build_runner(
        settings, dynamodb=aws.dynamodb, sns=aws.sns, sqs=aws.sqs, checkpointer=InMemorySaver(), clock=clock
    )

    question_id = park(runner)

    assert ledger.get_question(question_id).expires_at == "2026-11-30T10:10:00Z"


def test_output_json_drops_interrupts_and_renders_the_rest() -> None:
    class Note:
        def __str__(self) -> str:
            return "a note"

    assert json.loads(output_json({"a": 1, "note": Note(), "__interrupt__": ()})) == {
        "a": 1,
        "note": "a note",
    }


def test_a_batch_whose_every_record_fails_fails_the_invocation(
    runner: RunnerService, ledger: Ledger, context: LambdaContext
) -> None:
    from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

    event = load_event("inbox_batch.json")
    event["Records"] = event["Records"][:1]
    service, _ = failing_runner(runner, {"t-batch-1"}, error=THROTTLED)

    # Powertools raises when nothing succeeded: Lambda then retries the whole batch, as it should
    with pytest.raises(BatchProcessingError):
        load_handler("runner").handle(event, context, service=service)
    assert ledger.get_thread("t-batch-1").run_status == "retrying"


def test_a_redelivered_start_republishes_the_standing_question(
    aws: Aws, runner: RunnerService, ledger: Ledger
) -> None:
    """Seed 000: "The same question is published again whenever a start message is redelivered".

    LangGraph 1.2.24 restarts a parked thread invoked with its input again (pinned in
    tests/unit/langgraph), so the runner must republish rather than re-run.
    """
    # Given a thread parked by a start message
    start = StartMessage(thread_id="t-1", input=REFUND, run_id="01RUN")
    [question_id] = runner.run(start).pending
    first = drain(aws, aws.resources.outbox_url)

    # When the same message is delivered again (a crash before the queue deleted it)
    again = runner.run(start, receive_count=2)

    # Then the same question stands, announced again under the same dedupe_key, nothing re-run
    assert again.pending == [question_id]
    assert ledger.get_thread("t-1").pending == [question_id]
    republished = aws.sqs.receive_message(QueueUrl=aws.resources.subscriber_url, MaxNumberOfMessages=10)
    keys = {json.loads(m["Body"])["dedupe_key"] for m in republished.get("Messages", [])}
    assert keys == {f"wait.created:{question_id}"}
    assert [e["question_id"] for e in first] == [question_id]


def run_inbox(aws: Aws, runner: RunnerService) -> list[str]:
    """Run every inbox message in order, as the event source mapping would; returns the outcomes.

    The dispatcher reads the ledger's stream before each receive: what the api and the runner
    recorded (starts, decisions, deferred runs) reaches the inbox that way.
    """
    outcomes = []
    while aws.dispatch() is not None and (
        got := aws.sqs.receive_message(QueueUrl=aws.resources.inbox_url, MaxNumberOfMessages=10).get(
            "Messages", []
        )
    ):
        for message in got:
            run = runner.run(parse_message(message["Body"]), message_id=message["MessageId"])
            outcomes.append(run.status)
            aws.sqs.delete_message(QueueUrl=aws.resources.inbox_url, ReceiptHandle=message["ReceiptHandle"])
    return outcomes


def test_a_run_queued_behind_a_question_never_blocks_the_answer(
    aws: Aws, runner: RunnerService, ledger: Ledger, api: WaitApi
) -> None:
    """ "a thread that is queued or running takes the new run after the current one"."""
    # Given two runs accepted for one thread before the first has run
    api.runs.start("t-1", REFUND)
    api.runs.start("t-1", REFUND | {"amount": 10})

    # When the inbox is consumed: the first parks on a question, the second finds it parked
    assert run_inbox(aws, runner) == ["interrupted", "deferred"]
    thread = ledger.get_thread("t-1")
    [question_id] = thread.pending
    assert [run.input for run in thread.deferred] == [REFUND | {"amount": 10}]

    # Then the answer's resume runs straight away, and the deferred run follows the finished one
    question = ledger.get_question(question_id)
    api.replies.reply(question_id, {"action": "approve"}, principal="ann", if_match=f'"{question.digest}"')
    assert run_inbox(aws, runner) == ["done", "interrupted"]
    assert ledger.get_question(question_id).status == "resumed"
    thread = ledger.get_thread("t-1")
    assert thread.deferred == []
    [second] = thread.pending
    assert second != question_id
    assert ledger.get_question(second).question == {
        "function": "issue_refund",
        "args": {"customer": "c-17", "amount": 10},
        "args_schema": ANY,
    }


def test_a_start_sent_twice_runs_once(aws: Aws, runner: RunnerService, ledger: Ledger, api: WaitApi) -> None:
    """A stream record dispatched again past the FIFO window puts a second message on the inbox."""
    # Given a run started and its message run once
    api.runs.start("t-1", REFUND)
    aws.dispatch()
    [message] = aws.sqs.receive_message(QueueUrl=aws.resources.inbox_url)["Messages"]
    assert runner.run(parse_message(message["Body"]), message_id=message["MessageId"]).status == "interrupted"
    [question_id] = ledger.get_thread("t-1").pending

    # When another message for the same run arrives: refused, the thread left as it is
    assert runner.run(parse_message(message["Body"]), message_id="another-message").status == "refused"
    assert ledger.get_thread("t-1").pending == [question_id]
    # While the first message's own redelivery (a retry) is still its run's
    assert runner.run(parse_message(message["Body"]), message_id=message["MessageId"]).status == "interrupted"


def test_a_redelivered_deferred_run_is_kept_once(runner: RunnerService, ledger: Ledger) -> None:
    runner.run(StartMessage(thread_id="t-1", input=REFUND, run_id="01A"))
    later = StartMessage(thread_id="t-1", input={"customer": "c-9", "amount": 5}, run_id="01B")

    assert runner.run(later).status == "deferred"
    assert runner.run(later, receive_count=2).status == "deferred"

    assert [run.run_id for run in ledger.get_thread("t-1").deferred] == ["01B"]


def test_a_run_ending_after_a_later_run_was_accepted_leaves_the_thread_queued(ledger: Ledger) -> None:
    # Given run A running and run B accepted behind it
    ledger.queue_thread("t-1", "01A")
    ledger.thread_running("t-1", "01A")
    ledger.queue_thread("t-1", "01B")

    # When A ends, the thread keeps A's output but stays queued for B
    ledger.thread_done("t-1", '{"refund": 40}')
    thread = ledger.get_thread("t-1")
    assert (thread.run_status, thread.output) == ("queued", {"refund": 40})

    # Then B's end is the thread's end
    ledger.thread_running("t-1", "01B")
    ledger.thread_failed("t-1", "Boom: model unavailable")
    thread = ledger.get_thread("t-1")
    assert (thread.run_status, thread.error) == ("failed", "Boom: model unavailable")


def ledger_writes(runner: RunnerService, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the ledger's resume and run-end writes the runner makes, in order, from now on."""
    writes: list[str] = []
    for name in (
        "resumed_and_ended",
        "mark_resumed",
        "thread_done",
        "thread_interrupted",
        "parked",
        "mark_delivered",
    ):
        original = getattr(runner.ledger, name)
        monkeypatch.setattr(
            runner.ledger, name, lambda *a, _n=name, _o=original, **k: (writes.append(_n), _o(*a, **k))[1]
        )
    return writes


def test_the_question_is_resumed_in_the_same_write_as_the_threads_end(
    runner: RunnerService, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that sees the thread done must see its answer applied (a race the demo once hit)."""
    question_id = park(runner)
    ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
    writes = ledger_writes(runner, monkeypatch)

    outcome = runner.run(ResumeMessage(thread_id="t-1", question_id=question_id))

    # One transaction writes both: neither is ever seen without the other
    assert writes == ["resumed_and_ended"]
    assert outcome.status == ledger.get_thread("t-1").run_status == "done"
    question = ledger.get_question(question_id)
    assert (question.status, question.lifecycle[-1]["stage"]) == ("resumed", "resumed")
    assert metric("QuestionsResumed") == 1


def test_a_resume_that_parks_again_records_both_in_one_write(
    runner: RunnerService, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langgraph.types import Interrupt

    from agent_wait.langgraph import publish_interrupts

    # Given a resume whose run parks on a next question
    question_id = park(runner)
    ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
    [standing] = runner.graph.get_state({"configurable": {"thread_id": "t-1"}}).interrupts
    writes = ledger_writes(runner, monkeypatch)

    def next_question(result: Any, thread_id: str, announce: Any, **kwargs: Any) -> Any:
        parked = {"__interrupt__": [Interrupt(value=standing.value, id="q-next")]}
        return publish_interrupts(parked, thread_id, announce, **kwargs)

    runner.publish = next_question
    outcome = runner.run(ResumeMessage(thread_id="t-1", question_id=question_id))

    # Then one write records the question resumed and the thread parked on the next one
    assert writes == ["resumed_and_ended"]
    thread = ledger.get_thread("t-1")
    assert (outcome.status, thread.run_status, thread.pending) == ("interrupted", "interrupted", ["q-next"])
    assert ledger.get_question(question_id).status == "resumed"
    assert ledger.get_question("q-next").status == "delivered"
    assert metric("QuestionsResumed") == 1


def test_a_duplicate_resume_falls_back_to_separate_writes_and_counts_nothing_twice(
    runner: RunnerService, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a question recorded resumed after the runner read it (a duplicate resume)
    question_id = park(runner)
    ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
    read = ledger.get_question(question_id)
    runner.run(ResumeMessage(thread_id="t-1", question_id=question_id))
    resumed = ledger.get_question(question_id)
    writes = ledger_writes(runner, monkeypatch)

    # When the run's bookkeeping is done again with the question as read before
    outcome = runner._after_run("t-1", read, {"refund": None}, republished=False)

    # Then the transaction is cancelled by the question's condition and nothing of it is written;
    # the separate writes run as before: the question unchanged, the thread's end recorded
    assert writes == ["resumed_and_ended", "mark_resumed", "thread_done"]
    assert outcome.status == "done"
    assert ledger.get_question(question_id).lifecycle == resumed.lifecycle
    assert ledger.get_thread("t-1").output == {"refund": None}
    assert metric("QuestionsResumed") == 1


def test_a_run_deferred_behind_the_resume_takes_the_separate_writes_and_starts(
    aws: Aws, runner: RunnerService, ledger: Ledger, api: WaitApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a parked thread with a run deferred behind its question
    api.runs.start("t-1", REFUND)
    api.runs.start("t-1", REFUND | {"amount": 10})
    assert run_inbox(aws, runner) == ["interrupted", "deferred"]
    [question_id] = ledger.get_thread("t-1").pending
    question = ledger.get_question(question_id)
    api.replies.reply(question_id, {"action": "approve"}, principal="ann", if_match=f'"{question.digest}"')
    writes = ledger_writes(runner, monkeypatch)

    # When the resume runs: the transaction's condition (nothing deferred) fails
    assert run_inbox(aws, runner) == ["done", "interrupted"]

    # Then the question and the end are written apart, in order, and the deferred run starts;
    # its own park has no question to resume
    assert writes == ["resumed_and_ended", "mark_resumed", "thread_done", "parked"]
    assert ledger.get_question(question_id).status == "resumed"
    assert metric("QuestionsResumed") == 1

    # And once no run is deferred any more, the next resume takes the one transaction again
    [second] = ledger.get_thread("t-1").pending
    question = ledger.get_question(second)
    api.replies.reply(second, {"action": "approve"}, principal="ann", if_match=f'"{question.digest}"')
    writes.clear()
    assert run_inbox(aws, runner) == ["done"]
    assert writes == ["resumed_and_ended"]
    assert ledger.get_question(second).status == "resumed"


def test_a_question_published_under_an_id_the_ledger_holds_for_another_is_a_collision(
    aws: Aws, runner: RunnerService, ledger: Ledger
) -> None:
    """LangGraph 1.2.11 gave two interrupts one id (#6626); nothing guarantees it stays fixed."""
    from agent_wait.langgraph import publish_interrupts

    # Given a ledger that already holds another question under the id the run will raise
    def colliding(result: Any, thread_id: str, announce: Any, **kwargs: Any) -> Any:
        for interrupt in result.get("__interrupt__", ()):
            aws.raise_question("t-other", interrupt.id, question={"function": "other", "args": {}})
        return publish_interrupts(result, thread_id, announce, **kwargs)

    runner.publish = colliding

    # When the run parks
    outcome = runner.run(StartMessage(thread_id="t-1", input=REFUND))

    # Then the collision is not swallowed: the run ends failed with it, counted, message consumed
    assert outcome.status == "failed"
    thread = ledger.get_thread("t-1")
    assert thread.run_status == "failed"
    assert thread.error is not None and thread.error.startswith("wait.collision: ")
    assert metric("QuestionCollisions") == 1
    # and the question that stood first is untouched
    [other] = ledger.list_questions(thread_id="t-other").items
    assert (other.status, other.question) == ("raised", {"function": "other", "args": {}})


class BigOutputGraph:
    """A graph whose run ends with an output larger than a DynamoDB item holds."""

    def invoke(self, input: Any, config: Any, *, durability: Any = None) -> Any:
        return {"report": "x" * 450_000}

    def get_state(self, config: Any) -> Any:
        return SimpleNamespace(interrupts=[], metadata={}, values={})


def test_an_output_too_large_for_the_ledger_still_ends_the_run_done(
    runner: RunnerService, ledger: Ledger
) -> None:
    """Nothing accepted is lost: the run's end is recorded; the whole output stays in the checkpoint."""
    service = RunnerService(BigOutputGraph(), runner.announce, runner.ledger)

    outcome = service.run(StartMessage(thread_id="t-big", input={}))

    assert outcome.status == "done"
    thread = ledger.get_thread("t-big")
    assert (thread.run_status, thread.output) == ("done", None)
    assert thread.output_omitted is not None and thread.output_omitted > 450_000


class _ReadsCounted:
    """Wraps a graph and counts its checkpoint reads (``get_state``)."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self.reads = 0

    def invoke(self, input: Any, config: Any, *, durability: Any = None) -> Any:
        return self.graph.invoke(input, config, durability=durability)

    def get_state(self, config: Any) -> Any:
        self.reads += 1
        return self.graph.get_state(config)


def counted(runner: RunnerService) -> tuple[RunnerService, _ReadsCounted]:
    graph = _ReadsCounted(runner.graph)
    return RunnerService(graph, runner.announce, runner.ledger), graph


def test_the_ledger_answers_what_a_start_and_a_resume_would_read_from_the_checkpoint(
    runner: RunnerService, ledger: Ledger
) -> None:
    """A start on a fresh or finished thread and a resume of a parked one read no checkpoint."""
    service, graph = counted(runner)
    # A start the api queued on a new thread
    ledger.queue_thread("t-1", "01A")
    [question_id] = service.run(StartMessage(thread_id="t-1", input=REFUND, run_id="01A")).pending
    # its resume, and a second start once the thread is done
    ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
    assert service.run(ResumeMessage(thread_id="t-1", question_id=question_id)).status == "done"
    ledger.queue_thread("t-1", "01B")
    assert service.run(StartMessage(thread_id="t-1", input=REFUND, run_id="01B")).status == "interrupted"
    assert graph.reads == 0

    # A redelivered start still finds the question it parked on: the checkpoint is read then
    again = service.run(StartMessage(thread_id="t-1", input=REFUND, run_id="01B"), receive_count=2)
    assert graph.reads == 1
    assert again.pending == ledger.get_thread("t-1").pending
    # and a repeated resume of the question already resumed is refused, the thread untouched
    refused = service.run(ResumeMessage(thread_id="t-1", question_id=question_id))
    assert (refused.status, graph.reads) == ("refused", 1)
    assert ledger.get_thread("t-1").run_status == "interrupted"


def test_the_resumed_calls_receipt_is_kept_in_the_resumed_write(
    runner: RunnerService, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_wait.receipts import Receipt

    question_id = park(runner)
    ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
    monkeypatch.setattr(
        runner.ledger, "record_receipt", lambda *a, **k: pytest.fail("a second write for the receipt")
    )
    receipt = Receipt(
        question_id=question_id, ran=True, args=REFUND, outcome="returned", at="2026-11-30T10:00:00Z"
    )

    runner._after_run(
        "t-1", ledger.get_question(question_id), {"ok": True}, republished=False, receipts=[receipt]
    )

    stored = ledger.get_question(question_id)
    assert stored.status == "resumed"
    assert stored.receipt is not None and stored.receipt["ran"] is True


def test_a_resume_reads_its_question_and_marks_its_thread_running_at_once(
    aws: Aws, clock: FakeClock, ledger: Ledger
) -> None:
    """One round trip for both: each call waits (bounded) until the other is in flight too."""
    import threading

    runner = build_runner(aws.settings, dynamodb=aws.dynamodb, checkpointer=InMemorySaver(), clock=clock)
    question_id = park(runner)
    ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
    both = threading.Barrier(2, timeout=10)
    seen: list[str] = []

    def meet(params: dict[str, Any], _op: str, **_: Any) -> None:
        key = params.get("Key", {}).get("dedupe_key", {}).get("S", "")
        if key.startswith(("wait.created:", "thread:")) and len(seen) < 2:
            seen.append(_op)
            both.wait()  # on the old code (one call after the other) this breaks after 10 s

    for operation in ("GetItem", "UpdateItem"):
        aws.dynamodb.meta.events.register(
            f"provide-client-params.dynamodb.{operation}",
            lambda params, _op=operation, **k: meet(params, _op),
        )
    try:
        outcome = runner.run(ResumeMessage(thread_id="t-1", question_id=question_id))
    finally:
        both.abort()
    assert sorted(seen[:2]) == ["GetItem", "UpdateItem"]
    assert outcome.status == "done"


class _Meeting:
    """Makes the first call of each of two kinds wait (bounded) until the other is in flight too:
    a run that makes them one after the other breaks the barrier after 10 s and fails."""

    def __init__(self) -> None:
        import threading

        self.both = threading.Barrier(2, timeout=10)
        self.met: list[str] = []

    def meet(self, name: str) -> None:
        if name not in self.met:
            self.met.append(name)
            self.both.wait()

    def hook(self, name: str) -> Callable[..., None]:
        return lambda **_: self.meet(name)


def _timed_runner(aws: Aws, clock: FakeClock, checkpointer: Any, scheduler: Any, sns: Any) -> RunnerService:
    from examples.refund_agent import build_graph
    from wait_service.lifecycle.timers import build_timers
    from wait_service.runs.runner import build_announce

    return RunnerService(
        build_graph(checkpointer),
        build_announce(aws.settings, dynamodb=aws.dynamodb, sns=sns, sqs=aws.sqs),
        Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock),
        default_ttl=600,
        clock=clock,
        timers=build_timers(aws.settings, scheduler, clock=clock),
    )


def test_a_parks_timer_is_created_at_once_with_the_topic_and_the_outbox(aws: Aws, clock: FakeClock) -> None:
    import boto3

    # Given the topic's publish and the timer's create each waiting for the other
    meeting = _Meeting()
    scheduler = boto3.client("scheduler", region_name="us-east-1")
    sns = boto3.client("sns", region_name="us-east-1")
    scheduler.meta.events.register("before-call.scheduler.CreateSchedule", meeting.hook("CreateSchedule"))
    sns.meta.events.register("before-call.sns.Publish", meeting.hook("Publish"))
    runner = _timed_runner(aws, clock, InMemorySaver(), scheduler, sns)

    # When a run parks on a question with a ttl
    try:
        outcome = runner.run(StartMessage(thread_id="t-1", input=REFUND))
    finally:
        meeting.both.abort()

    # Then both went in one round trip, and the thread is parked with its timer in place
    assert sorted(meeting.met) == ["CreateSchedule", "Publish"]
    assert outcome.status == "interrupted"
    [question_id] = outcome.pending
    from wait_service.lifecycle.timers import TimerEvent, timer_name

    names = [s["Name"] for s in scheduler.list_schedules(GroupName=aws.settings.schedule_group)["Schedules"]]
    assert names == [timer_name(TimerEvent(question_id=question_id, timer="expire", n=0))]


def test_a_resumes_timer_is_deleted_while_the_graph_runs(aws: Aws, clock: FakeClock, ledger: Ledger) -> None:
    import boto3

    meeting = _Meeting()

    class MeetingSaver(InMemorySaver):
        """Its first checkpoint write of the resume waits for the timer's delete to be in flight."""

        resuming = False

        def put(self, *args: Any, **kwargs: Any) -> Any:
            if self.resuming:
                meeting.meet("checkpoint put")
            return super().put(*args, **kwargs)

    saver = MeetingSaver()
    scheduler = boto3.client("scheduler", region_name="us-east-1")
    runner = _timed_runner(aws, clock, saver, scheduler, aws.sns)
    question_id = runner.run(StartMessage(thread_id="t-1", input=REFUND)).pending[0]
    ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
    scheduler.meta.events.register("before-call.scheduler.DeleteSchedule", meeting.hook("DeleteSchedule"))
    saver.resuming = True

    try:
        outcome = runner.run(ResumeMessage(thread_id="t-1", question_id=question_id))
    finally:
        meeting.both.abort()

    assert sorted(meeting.met) == ["DeleteSchedule", "checkpoint put"]
    assert outcome.status == "done" and ledger.get_question(question_id).status == "resumed"
    assert scheduler.list_schedules(GroupName=aws.settings.schedule_group)["Schedules"] == []


def test_a_resume_whose_graph_fails_while_its_timer_is_deleted_waits_for_the_delete(
    aws: Aws, clock: FakeClock, ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    import boto3

    scheduler = boto3.client("scheduler", region_name="us-east-1")
    runner = _timed_runner(aws, clock, InMemorySaver(), scheduler, aws.sns)
    question_id = runner.run(StartMessage(thread_id="t-1", input=REFUND)).pending[0]
    ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")

    # Given the delete failing, and the graph failing before anything takes the delete's outcome
    def refuse(**_: Any) -> None:
        error = {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}
        raise ClientError(error, "DeleteSchedule")  # type: ignore[arg-type]

    scheduler.meta.events.register("before-call.scheduler.DeleteSchedule", refuse)

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("the tool crashed")

    runner.graph.invoke = broken  # type: ignore[method-assign]

    # When the resume runs: the graph's failure is the outcome, and the delete's is logged, not lost
    outcome = runner.run(ResumeMessage(thread_id="t-1", question_id=question_id))

    assert outcome.status == "failed"
    assert runner._disarming is None
    assert any(r.getMessage() == "the resumed question's timer was not deleted" for r in caplog.records)


def test_a_sibling_questions_timer_is_deleted_on_its_own_and_the_started_delete_is_still_waited_for(
    aws: Aws, clock: FakeClock, ledger: Ledger
) -> None:
    from concurrent.futures import Future

    import boto3

    from wait_service.lifecycle.timers import TimerEvent, timer_name

    scheduler = boto3.client("scheduler", region_name="us-east-1")
    runner = _timed_runner(aws, clock, InMemorySaver(), scheduler, aws.sns)
    first = runner.run(StartMessage(thread_id="t-1", input=REFUND)).pending[0]
    second = runner.run(StartMessage(thread_id="t-2", input=REFUND)).pending[0]

    # Given the message's own question's delete started with the run and still in flight
    started: Future[None] = Future()
    runner._disarming = (first, started)

    # When another question resumed in the same message has its timer deleted
    runner._disarmed(ledger.get_question(second))

    # Then that timer is gone, and the started delete is still held for the end of the message
    names = {s["Name"] for s in scheduler.list_schedules(GroupName=aws.settings.schedule_group)["Schedules"]}
    assert timer_name(TimerEvent(question_id=second, timer="expire", n=0)) not in names
    assert timer_name(TimerEvent(question_id=first, timer="expire", n=0)) in names
    assert runner._disarming == (first, started)
    started.set_result(None)
    runner._forget_disarming()
    assert runner._disarming is None
