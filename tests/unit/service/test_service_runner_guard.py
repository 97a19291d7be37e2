"""What the runner refuses to run or to announce: poison messages, forged starts, unrecordable
questions, and proposals that break their own ``args_schema``.

DESIGN.md, "Decisions for production": "a question is recorded before any sink hears of it; a
message that cannot be understood is consumed and counted (poison), never retried into a DLQ with
its FIFO group blocked behind it"; "what is shown is what runs".
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError
from langgraph.checkpoint.memory import InMemorySaver
from service_events import body_of, get_event, header, load_handler, reply_event, start_event

from agent_wait.aws import DynamoDbAnnounce
from agent_wait.errors import AnnounceError
from agent_wait_cli.render import question_detail
from wait_service.ledger import Ledger
from wait_service.observability import metrics
from wait_service.runs.inbox import ResumeMessage, StartMessage
from wait_service.runs.runner import RunnerService, build_runner
from wait_service.runs.sqs_events import sqs_event

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from service_events import Aws, FakeClock, LambdaContext

    Call = Callable[[dict[str, Any]], dict[str, Any]]

REFUND = {"customer": "c-17", "amount": 40}
INBOX_ARN = "arn:aws:sqs:us-east-1:123456789012:u-inbox.fifo"


@pytest.fixture(autouse=True)
def fresh_metrics() -> Iterator[None]:
    metrics.clear_metrics()
    yield
    metrics.clear_metrics()


def metric(name: str) -> float:
    return float(sum(metrics.metric_set.get(name, {}).get("Value", [])))


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


def batch(*bodies: str, group: str) -> dict[str, Any]:
    """One Lambda SQS event whose records are ``bodies``, in order, all in FIFO group ``group``."""
    messages = [
        {
            "MessageId": f"m-{n}",
            "ReceiptHandle": f"h-{n}",
            "Body": body,
            "Attributes": {"MessageGroupId": group, "ApproximateReceiveCount": "1"},
        }
        for n, body in enumerate(bodies)
    ]
    return sqs_event(messages, queue_arn=INBOX_ARN, region="us-east-1")


def handle(runner: RunnerService, event: dict[str, Any], context: LambdaContext) -> Any:
    return load_handler("runner").handle(event, context, service=runner)


# -- poison messages ----------------------------------------------------------------------------


def test_a_deeply_nested_body_is_consumed_as_poison_and_its_group_runs_on(
    runner: RunnerService, ledger: Ledger, context: LambdaContext, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a 200,000-deep JSON body ahead of a real start in the same thread's FIFO group
    deep = '{"thread_id": "t-p", "input": ' + "[" * 200_000 + "]" * 200_000 + "}"
    start = StartMessage(thread_id="t-p", input=REFUND, run_id="r-1").model_dump_json()

    # When the runner handles the batch
    with caplog.at_level(logging.WARNING):
        response = handle(runner, batch(deep, start, group="t-p"), context)

    # Then nothing is reported failed (no retry, no DLQ): the poison is consumed and counted,
    # and the start behind it ran
    assert response == {"batchItemFailures": []}
    assert metric("PoisonMessages") == 1
    assert any(record.getMessage() == "poison" for record in caplog.records)
    assert ledger.get_thread("t-p").run_status == "interrupted"


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[]",
        '{"thread_id": ""}',
        '{"thread_id": "t-p", "question_id": "q", "extra": 1}',
        '{"thread_id": "t-p", "input": ' + "{" * 5_000,
        # Shapes the api never sends: ids a ledger key or a FIFO group cannot take, inputs it cannot store
        json.dumps({"thread_id": "a b", "input": REFUND}),
        json.dumps({"thread_id": "t" * 10_000, "input": REFUND}),
        json.dumps({"thread_id": "t-p", "question_id": "q" * 5_000}),
        '{"thread_id": "t-p", "input": ' + '{"a": ' * 40 + "1" + "}" * 40 + "}",
        '{"thread_id": "t-p", "input": {"customer": "c-17", "amount": 1e300}}',
    ],
)
def test_a_body_that_is_not_a_message_is_poison(
    runner: RunnerService, context: LambdaContext, body: str
) -> None:
    response = handle(runner, batch(body, group="t-p"), context)

    assert response == {"batchItemFailures": []}
    assert metric("PoisonMessages") == 1


def test_a_forged_start_whose_input_the_api_refuses_is_not_run(
    aws: Aws, runner: RunnerService, ledger: Ledger, context: LambdaContext
) -> None:
    # The api refuses this input (the graph's input schema: amount must be more than 0) ...
    api = build_api_with_schema(aws, runner)
    refused = load_handler("api").handle(
        start_event("t-forged", {"customer": "c-17", "amount": -5}), context, service=api
    )
    assert refused["statusCode"] == 422
    assert ledger.find_thread("t-forged") is None

    # ... so a start message carrying it, put on the inbox by hand, is poison: never run
    forged = StartMessage(thread_id="t-forged", input={"customer": "c-17", "amount": -5}, run_id="r-x")
    response = handle(runner, batch(forged.model_dump_json(), group="t-forged"), context)

    assert response == {"batchItemFailures": []}
    assert metric("PoisonMessages") == 1
    assert ledger.find_thread("t-forged") is None
    assert runner.graph.get_state({"configurable": {"thread_id": "t-forged"}}).values == {}
    assert drain(aws, aws.resources.outbox_url) == []


def build_api_with_schema(aws: Aws, runner: RunnerService) -> Any:
    from wait_service.http.api import build_api
    from wait_service.runs.input_schema import generate_input_schema

    api = build_api(aws.settings, dynamodb=aws.dynamodb, sqs=aws.sqs)
    api.input_schema = generate_input_schema(aws.settings.graph)
    return api


def test_a_start_the_api_accepted_but_the_graph_refuses_ends_its_run_failed(
    aws: Aws, runner: RunnerService, ledger: Ledger, context: LambdaContext, call: Call
) -> None:
    # Given an api that checks no input schema, which accepts a start the graph cannot take
    assert call(start_event("t-skew", {"customer": "c-17", "amount": -5}))["statusCode"] == 202
    assert ledger.get_thread("t-skew").run_status == "queued"
    aws.dispatch()  # the ledger's stream hands the recorded start to the dispatcher
    [message] = drain(aws, aws.resources.inbox_url)

    # When the runner receives it
    response = handle(runner, batch(json.dumps(message), group="t-skew"), context)

    # Then it is consumed, and the run the api accepted ends failed naming the field: nobody waits on it
    assert response == {"batchItemFailures": []}
    thread = ledger.get_thread("t-skew")
    assert thread.run_status == "failed"
    assert thread.error == "input_invalid: input.amount: must be bigger than 0"


# -- a question is recorded before any sink hears of it ---------------------------------------


def test_a_question_too_large_for_the_ledger_fails_its_run_and_reaches_no_sink(
    aws: Aws, runner: RunnerService, ledger: Ledger, context: LambdaContext
) -> None:
    # Given a start whose question carries a 420,000-character argument (its ledger item passes 400 KB)
    start = StartMessage(thread_id="t-big", input={"customer": "c" * 420_000, "amount": 40}, run_id="r-big")

    # When the runner handles it
    response = handle(runner, batch(start.model_dump_json(), group="t-big"), context)

    # Then the message is consumed at once (not retried as an infrastructure failure) ...
    assert response == {"batchItemFailures": []}
    # ... the run ends failed, naming the cause and the size ...
    thread = ledger.get_thread("t-big")
    assert thread.run_status == "failed"
    assert thread.error is not None
    assert "cannot be recorded in the ledger: too large (" in thread.error
    size = int(thread.error.split("too large (")[1].split(" bytes")[0].replace(",", ""))
    assert size > 400 * 1024
    # ... and no sink got an envelope for a question the api cannot open
    assert drain(aws, aws.resources.outbox_url) == []
    assert drain(aws, aws.resources.subscriber_url) == []
    assert metric("QuestionsUnrecordable") == 1


class _Throttled:
    """A DynamoDB client whose ``put_item`` is throttled: the ledger cannot record this time."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def put_item(self, **_: Any) -> Any:
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "PutItem")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_question_the_ledger_could_not_record_reaches_no_sink_and_is_retried(
    aws: Aws, runner: RunnerService, ledger: Ledger
) -> None:
    # Given the ledger sink throttled
    [ledger_sink] = [c for c in runner.announce.children if isinstance(c, DynamoDbAnnounce)]  # type: ignore[attr-defined]
    ledger_sink.client = _Throttled(ledger_sink.client)

    # When a start parks on a question, the message is retried (an infrastructure failure) ...
    with pytest.raises(AnnounceError):
        runner.run(StartMessage(thread_id="t-slow", input=REFUND, run_id="r-slow"))

    # ... and neither the topic nor the outbox heard of the question meanwhile
    assert drain(aws, aws.resources.outbox_url) == []
    assert drain(aws, aws.resources.subscriber_url) == []
    assert ledger.get_thread("t-slow").run_status == "retrying"


# -- a proposal is checked against its own args_schema ----------------------------------------


def test_an_invalid_proposal_is_raised_with_invalid_args_and_cannot_be_approved_as_is(
    aws: Aws, runner: RunnerService, ledger: Ledger, call: Call
) -> None:
    # Given a proposal that breaks its own schema (amount at most 10 000)
    outcome = runner.run(StartMessage(thread_id="t-20k", input={"customer": "c-17", "amount": 20000}))
    [question_id] = outcome.pending

    # Then it is raised with invalid_args, shown by GET and the CLI
    got = call(
        get_event(f"/questions/{question_id}", "/questions/{question_id}", {"question_id": question_id})
    )
    question = body_of(got)
    assert question["question"]["invalid_args"] == [
        {"field": "args.amount", "message": "must be smaller than or equal to 10000"}
    ]
    assert "invalid args  args.amount: must be smaller than or equal to 10000" in question_detail(question)
    [envelope] = drain(aws, aws.resources.outbox_url)
    assert envelope["question"]["invalid_args"] == question["question"]["invalid_args"]

    # When it is approved as is: 422 naming the field, nothing recorded
    etag = header(got, "ETag")
    assert etag is not None
    approve = call(reply_event(question_id, {"action": "approve"}, if_match=etag))
    assert approve["statusCode"] == 422
    assert body_of(approve)["field"] == "answer.args.amount"
    assert ledger.get_question(question_id).status == "delivered"

    # An edit that fixes it is accepted, and runs with the edit
    fixed = call(reply_event(question_id, {"action": "approve", "args": {"amount": 5000}}, if_match=etag))
    assert fixed["statusCode"] == 202
    done = runner.run(ResumeMessage(thread_id="t-20k", question_id=question_id))
    assert done.status == "done"
    output: Any = ledger.get_thread("t-20k").output
    assert output["refund"]["amount"] == 5000


def test_a_valid_proposal_carries_no_invalid_args(aws: Aws, runner: RunnerService) -> None:
    runner.run(StartMessage(thread_id="t-ok", input=REFUND))

    [envelope] = drain(aws, aws.resources.outbox_url)
    assert "invalid_args" not in envelope["question"]


def test_an_approve_as_is_that_reaches_the_graph_another_way_does_not_run_it(
    runner: RunnerService, ledger: Ledger
) -> None:
    # Given an invalid proposal approved as is behind the api's back (written to the ledger directly)
    [question_id] = runner.run(
        StartMessage(thread_id="t-back", input={"customer": "c-17", "amount": 20000})
    ).pending
    ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")

    # When the thread resumes, the call refuses it: the run fails, nothing was paid
    outcome = runner.run(ResumeMessage(thread_id="t-back", question_id=question_id))

    assert outcome.status == "failed"
    assert outcome.error is not None and "answer" in outcome.error.lower()
    output = ledger.get_thread("t-back").output
    assert not (isinstance(output, dict) and output.get("refund"))


class _Refused:
    """A DynamoDB client whose ``put_item`` is refused as AWS refuses an item nested past 32 levels."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def put_item(self, **_: Any) -> Any:
        error = {"Code": "ValidationException", "Message": "Nesting Levels have exceeded supported limits"}
        raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, "PutItem")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_question_the_ledger_refuses_as_malformed_fails_its_run_naming_the_cause(
    aws: Aws, runner: RunnerService, ledger: Ledger, context: LambdaContext
) -> None:
    [ledger_sink] = [c for c in runner.announce.children if isinstance(c, DynamoDbAnnounce)]  # type: ignore[attr-defined]
    ledger_sink.client = _Refused(ledger_sink.client)
    start = StartMessage(thread_id="t-deep", input=REFUND, run_id="r-deep")

    response = handle(runner, batch(start.model_dump_json(), group="t-deep"), context)

    assert response == {"batchItemFailures": []}
    thread = ledger.get_thread("t-deep")
    assert thread.run_status == "failed"
    assert thread.error is not None
    assert "cannot be recorded in the ledger: not storable (" in thread.error
    assert "ValidationException: Nesting Levels have exceeded supported limits" in thread.error
    assert drain(aws, aws.resources.outbox_url) == []
    assert drain(aws, aws.resources.subscriber_url) == []
