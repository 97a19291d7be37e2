"""Settings, the checkpointer factory, the graph loader, inbox messages and the SQS event helpers."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from service_events import load_event, load_handler

from agent_wait.errors import InvalidRequestError, MissingExtraError
from examples import refund_agent
from wait_service.ledger.paging import decode_token, encode_token
from wait_service.runs.checkpointer import make_checkpointer
from wait_service.runs.graph import GraphLoadError, load_graph
from wait_service.runs.inbox import Inbox, ResumeMessage, StartMessage, parse_message
from wait_service.runs.sqs_events import consume_batch, failed_ids, sqs_event
from wait_service.settings import Settings, SettingsError

if TYPE_CHECKING:
    from service_events import Aws, LambdaContext

# -- settings --------------------------------------------------------------------------------


def test_settings_from_env_maps_every_variable() -> None:
    settings = Settings.from_env(
        {
            "AGENT_WAIT_LEDGER_TABLE": "ledger",
            "AGENT_WAIT_POLICY_TABLE": "policies",
            "AGENT_WAIT_POLICY_CACHE_SECONDS": "5",
            "AGENT_WAIT_INBOX_URL": "https://sqs/inbox.fifo",
            "AGENT_WAIT_ARCHIVE_STREAM": "agent-wait-audit",
            "AGENT_WAIT_ARCHIVE_DIR": "/tmp/audit",
            "AGENT_WAIT_STATS_TABLE": "stats",
            "AGENT_WAIT_TOPIC_ARN": "arn:aws:sns:us-east-1:1:wait-created",
            "AGENT_WAIT_OUTBOX_URL": "https://sqs/outbox.fifo",
            "AGENT_WAIT_GRAPH": "examples.ask_agent:build_graph",
            "AGENT_WAIT_FRAMEWORK": "langgraph",
            "AGENT_WAIT_CHECKPOINTER": "dynamodb",
            "AGENT_WAIT_CHECKPOINT_TABLE": "cp",
            "AGENT_WAIT_CHECKPOINT_WRITES_TABLE": "cpw",
            "AGENT_WAIT_CHECKPOINT_BUCKET": "bucket",
            "AGENT_WAIT_CHECKPOINT_COMPRESSION": "false",
            "AGENT_WAIT_REPLY_URL": "https://x/questions/{question_id}/reply",
            "AGENT_WAIT_DEFAULT_TTL": "3600",
            "AGENT_WAIT_LEDGER_TTL_DAYS": "30",
            "AGENT_WAIT_LISTING_SHARDS": "16",
            "AGENT_WAIT_SCHEDULE_GROUP": "agent-wait",
            "AGENT_WAIT_LIFECYCLE_ARN": "arn:aws:lambda:us-east-1:1:function:lifecycle",
            "AGENT_WAIT_SCHEDULER_ROLE_ARN": "arn:aws:iam::1:role/scheduler",
            "AGENT_WAIT_SCHEDULE_DLQ_ARN": "arn:aws:sqs:us-east-1:1:agent-wait-timers-dlq",
            "AGENT_WAIT_SIGNING_KEYS": '{"ops": "arn:aws:secretsmanager:us-east-1:1:secret:ops-AbCdEf"}',
            "AGENT_WAIT_SLACK_CHANNEL": "C123",
            "AGENT_WAIT_SLACK_BOT_TOKEN_SECRET": "arn:bot",
            "AGENT_WAIT_SLACK_SIGNING_SECRET": "arn:signing",
            "AGENT_WAIT_SLACK_API_URL": "http://127.0.0.1:9/api/",
            "AGENT_WAIT_INPUT_SCHEMA": "graph_input/graph_input_schema.json",
            "AGENT_WAIT_INBOX_CLIENT_ID": "client-1",
            "AGENT_WAIT_INBOX_DOMAIN": "auth.example.com",
            "AGENT_WAIT_JWT_AUDIENCE": "agent-wait/answer",
            "AGENT_WAIT_DURABILITY": "sync",
            "AGENT_WAIT_MAX_ANSWER_BYTES": "1000",
            "AGENT_WAIT_RUNNER_SECRETS": '{"API_KEY": "arn:aws:secretsmanager:us-east-1:1:secret:a-AbCdEf"}',
            "POWERTOOLS_SERVICE_NAME": "svc",
            "POWERTOOLS_METRICS_NAMESPACE": "ns",
            "LOG_LEVEL": "DEBUG",
            "AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
            "UNRELATED": "ignored",
        }
    )

    assert settings.model_dump() == {
        "ledger_table": "ledger",
        "policy_table": "policies",
        "policy_cache_seconds": 5.0,
        "inbox_url": "https://sqs/inbox.fifo",
        "archive_stream": "agent-wait-audit",
        "archive_dir": "/tmp/audit",
        "stats_table": "stats",
        "topic_arn": "arn:aws:sns:us-east-1:1:wait-created",
        "outbox_url": "https://sqs/outbox.fifo",
        "graph": "examples.ask_agent:build_graph",
        "framework": "langgraph",
        "checkpointer": "dynamodb",
        "checkpoint_table": "cp",
        "checkpoint_writes_table": "cpw",
        "checkpoint_bucket": "bucket",
        "checkpoint_compression": False,
        "reply_url": "https://x/questions/{question_id}/reply",
        "default_ttl": 3600,
        "ledger_ttl_days": 30,
        "listing_shards": 16,
        "schedule_group": "agent-wait",
        "lifecycle_arn": "arn:aws:lambda:us-east-1:1:function:lifecycle",
        "scheduler_role_arn": "arn:aws:iam::1:role/scheduler",
        "schedule_dlq_arn": "arn:aws:sqs:us-east-1:1:agent-wait-timers-dlq",
        "signing_keys": {"ops": "arn:aws:secretsmanager:us-east-1:1:secret:ops-AbCdEf"},
        "slack_channel": "C123",
        "slack_bot_token_secret": "arn:bot",
        "slack_signing_secret": "arn:signing",
        "slack_api_url": "http://127.0.0.1:9/api/",
        "input_schema": "graph_input/graph_input_schema.json",
        "inbox_client_id": "client-1",
        "inbox_domain": "auth.example.com",
        "jwt_audience": "agent-wait/answer",
        "durability": "sync",
        "max_answer_bytes": 1000,
        "runner_secrets": {"API_KEY": "arn:aws:secretsmanager:us-east-1:1:secret:a-AbCdEf"},
    }
    assert settings.checkpoint_ttl_seconds == 30 * 24 * 3600


def test_settings_defaults_and_empty_values() -> None:
    settings = Settings.from_env({"AGENT_WAIT_DEFAULT_TTL": "", "AGENT_WAIT_CHECKPOINTER": " "})

    assert (settings.default_ttl, settings.checkpointer, settings.ledger_ttl_days) == (None, "aws", 90)
    assert settings.graph == "examples.refund_agent:build_graph"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"AGENT_WAIT_DEFAULT_TTL": "soon"}, "AGENT_WAIT_DEFAULT_TTL"),
        ({"AGENT_WAIT_CHECKPOINTER": "redis"}, "AGENT_WAIT_CHECKPOINTER"),
        ({"AGENT_WAIT_REPLY_URL": "https://x/reply"}, "AGENT_WAIT_REPLY_URL"),
        ({"AGENT_WAIT_CHECKPOINT_COMPRESSION": "sometimes"}, "AGENT_WAIT_CHECKPOINT_COMPRESSION"),
    ],
)
def test_malformed_settings_name_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        Settings.from_env(env)


def test_require_names_the_missing_variable() -> None:
    with pytest.raises(SettingsError, match="AGENT_WAIT_TOPIC_ARN is not set"):
        Settings().require("topic_arn")


# -- checkpointer ----------------------------------------------------------------------------


def test_default_checkpointer_is_langgraph_checkpoint_aws(aws: Aws) -> None:
    from langgraph_checkpoint_aws import DynamoDBSaver

    saver = make_checkpointer(aws.settings)

    assert isinstance(saver, DynamoDBSaver)


def test_aws_checkpointer_parks_and_resumes_across_instances(aws: Aws) -> None:
    # A parked thread resumes from a second saver instance: the state lives in DynamoDB only
    cfg: Any = {"configurable": {"thread_id": "t-cp"}}
    parked = refund_agent.build_graph(make_checkpointer(aws.settings)).invoke(
        {"customer": "c-17", "amount": 40}, cfg
    )
    question_id = parked["__interrupt__"][0].id

    done = refund_agent.build_graph(make_checkpointer(aws.settings)).invoke(
        Command(resume={question_id: {"action": "approve"}}), cfg
    )

    assert done["refund"]["amount"] == 40


def _conversation(turns: int) -> dict[str, Any]:
    """A state like an LLM agent's: a conversation's messages, prose of about 60 words each (drawn
    from a few hundred words, the same every run)."""
    import random

    rng = random.Random(17)
    words = [
        f"{rng.choice('bcdfglmnprst')}{rng.choice('aeiou')}{rng.choice('lmnrst')}{n}" for n in range(300)
    ]
    return {
        "customer": "c-17",
        "amount": 40,
        "messages": [
            {"role": "user" if n % 2 else "assistant", "content": " ".join(rng.choices(words, k=60)) + "."}
            for n in range(turns)
        ],
    }


def _checkpoint_items(aws: Aws, thread_id: str, kind: str) -> list[dict[str, Any]]:
    """The thread's ``CHECKPOINT`` (metadata) or ``CHUNK`` (payload) items as DynamoDBSaver stored them."""
    items = aws.dynamodb.scan(TableName=aws.settings.require("checkpoint_table"))["Items"]
    return [item for item in items if item["PK"]["S"].startswith(f"{kind}_{thread_id}")]


@pytest.mark.parametrize("compression", [True, False])
def test_checkpoints_are_stored_gzipped_unless_turned_off_and_read_back_either_way(
    aws: Aws, compression: bool
) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    # Given a thread whose state is a 40-turn conversation (about 17 KB as stored raw)
    settings = aws.settings.model_copy(update={"checkpoint_compression": compression})
    saver = make_checkpointer(settings)
    config: Any = {"configurable": {"thread_id": "t-big", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = _conversation(40)

    # When it is checkpointed
    saved = saver.put(config, checkpoint, {"source": "loop", "step": 1}, {})

    # Then the payload is gzipped (well under the raw size, so under its write units), or raw
    [base] = _checkpoint_items(aws, "t-big", "CHECKPOINT")
    [chunk] = _checkpoint_items(aws, "t-big", "CHUNK")
    payload = chunk["payload"]["B"]
    raw_size = len(saver.serde.dumps_typed({"checkpoint": checkpoint, "metadata": {}})[1])
    if compression:
        assert base["compression"]["S"] == "gzip"
        assert len(payload) < raw_size * 0.6
    else:
        assert "compression" not in base
        assert len(payload) >= raw_size
    # And any saver reads it back, whatever it writes itself
    for reader_compresses in (True, False):
        reader = make_checkpointer(
            aws.settings.model_copy(update={"checkpoint_compression": reader_compresses})
        )
        read = reader.get_tuple(saved)
        assert read is not None
        assert read.checkpoint["channel_values"] == _conversation(40)


def test_dynamodb_checkpointer_is_the_optional_backend(aws: Aws) -> None:
    from langgraph_checkpoint_dynamodb.saver import DynamoDBSaver

    settings = aws.settings.model_copy(
        update={"checkpointer": "dynamodb", "checkpoint_table": "cp", "checkpoint_writes_table": "cpw"}
    )

    saver = make_checkpointer(settings)

    assert isinstance(saver, DynamoDBSaver)
    assert (saver.checkpoints_table_name, saver.writes_table_name) == ("cp", "cpw")


def test_dynamodb_checkpointer_needs_its_writes_table(aws: Aws) -> None:
    settings = aws.settings.model_copy(update={"checkpointer": "dynamodb"})

    with pytest.raises(SettingsError, match="AGENT_WAIT_CHECKPOINT_WRITES_TABLE"):
        make_checkpointer(settings)


def test_missing_backend_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "langgraph_checkpoint_dynamodb", None)
    monkeypatch.setitem(sys.modules, "langgraph_checkpoint_dynamodb.saver", None)
    settings = Settings(checkpointer="dynamodb", checkpoint_table="cp", checkpoint_writes_table="cpw")

    with pytest.raises(MissingExtraError, match="checkpoint-dynamodb"):
        make_checkpointer(settings)


# -- graph loader ----------------------------------------------------------------------------

COMPILED = refund_agent.build_graph()
UNCOMPILED = refund_agent.builder()
NOT_A_GRAPH = 42


def returns_nothing(checkpointer: Any = None) -> None:
    return None


def no_checkpointer_param() -> Any:
    return COMPILED


def test_factory_receives_the_checkpointer() -> None:
    saver = InMemorySaver()

    graph = load_graph("examples.refund_agent:build_graph", saver)

    assert graph.checkpointer is saver


def test_state_graph_is_compiled_with_the_checkpointer() -> None:
    saver = InMemorySaver()

    graph = load_graph(f"{__name__}:UNCOMPILED", saver)

    assert graph.checkpointer is saver
    assert "act" in graph.get_graph().nodes


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("examples.refund_agent", "expected 'module:attribute'"),
        ("examples.nowhere:build_graph", "cannot import 'examples.nowhere'"),
        ("examples.refund_agent:nothing", "has no attribute 'nothing'"),
        (f"{__name__}:COMPILED", "already compiled graph"),
        (f"{__name__}:NOT_A_GRAPH", "is a int"),
        (f"{__name__}:returns_nothing", "returned NoneType"),
        (f"{__name__}:no_checkpointer_param", "must accept checkpointer="),
    ],
)
def test_unusable_graph_spec_is_a_clear_error_naming_the_variable(spec: str, message: str) -> None:
    with pytest.raises(GraphLoadError, match="AGENT_WAIT_GRAPH") as caught:
        load_graph(spec, InMemorySaver())

    assert message in str(caught.value)


# -- inbox messages and tokens ---------------------------------------------------------------


def test_parse_message_is_the_one_if() -> None:
    assert parse_message('{"thread_id": "t", "input": {"question_id": "in the input"}}') == StartMessage(
        thread_id="t", input={"question_id": "in the input"}
    )
    assert parse_message('{"thread_id": "t", "question_id": "q", "answer": "yes"}') == ResumeMessage(
        thread_id="t", question_id="q", answer="yes"
    )


def test_inbox_start_ids_are_unique_and_resume_ids_are_stable(aws: Aws) -> None:
    inbox = Inbox(aws.resources.inbox_url, aws.sqs)

    starts = {inbox.start("t", {}) for _ in range(3)}
    resumes = {inbox.resume("t", "q") for _ in range(3)}

    assert len(starts) == 3
    assert all(s.startswith("run:t:") for s in starts)
    assert resumes == {"resume:q"}
    # The FIFO queue drops the two repeated resumes
    assert [m.get("question_id") for m in aws.inbox_messages()] == [None, None, None, "q"]


def test_page_tokens_round_trip_and_reject_garbage() -> None:
    key = {"dedupe_key": {"S": "wait.created:q"}, "status": {"S": "raised"}, "created_at": {"S": "2026"}}

    assert decode_token(encode_token(key)) == key
    for garbage in ("%%%", "bm90IGpzb24", encode_token({"other": {"S": "x"}})):
        with pytest.raises(InvalidRequestError):
            decode_token(garbage)


# -- SQS events ------------------------------------------------------------------------------


def test_sqs_event_matches_the_stored_lambda_shape(aws: Aws) -> None:
    inbox = Inbox(aws.resources.inbox_url, aws.sqs)
    inbox.start("t-1", {"n": 1})
    received = aws.sqs.receive_message(
        QueueUrl=aws.resources.inbox_url, AttributeNames=["All"], MessageAttributeNames=["All"]
    )["Messages"]

    event = sqs_event(received, queue_arn=aws.resources.inbox_arn, region="us-east-1")

    [record] = event["Records"]
    stored = load_event("inbox_batch.json")["Records"][0]
    assert set(record) == set(stored)
    assert {"ApproximateReceiveCount", "MessageGroupId", "MessageDeduplicationId"} <= set(
        record["attributes"]
    )
    assert record["attributes"]["MessageGroupId"] == "t-1"
    assert (record["eventSource"], record["eventSourceARN"]) == ("aws:sqs", aws.resources.inbox_arn)
    body = json.loads(record["body"])
    assert body == {"thread_id": "t-1", "input": {"n": 1}, "run_id": body["run_id"]}
    assert record["attributes"]["MessageDeduplicationId"] == f"run:t-1:{body['run_id']}"


def test_consume_batch_deletes_successes_and_releases_failures(aws: Aws, context: LambdaContext) -> None:
    inbox = Inbox(aws.resources.inbox_url, aws.sqs)
    for n in range(3):
        inbox.start(f"t-{n}", {"n": n})
    seen: list[list[str]] = []

    def handler(event: dict[str, Any], ctx: Any) -> dict[str, Any]:
        ids = [r["messageId"] for r in event["Records"]]
        seen.append([json.loads(r["body"])["thread_id"] for r in event["Records"]])
        return {"batchItemFailures": [{"itemIdentifier": ids[1]}]}

    first = consume_batch(aws.sqs, aws.resources.inbox_url, handler, context, release_failed=True)

    assert (first.received, len(first.succeeded), len(first.failed)) == (3, 2, 1)
    [left] = aws.inbox_messages()
    assert left["thread_id"] == "t-1"
    assert left["_attributes"]["ApproximateReceiveCount"] == "2"


def test_consume_batch_counts_a_raising_handler_as_a_failed_batch(aws: Aws, context: LambdaContext) -> None:
    Inbox(aws.resources.inbox_url, aws.sqs).start("t-1", {})

    def handler(event: dict[str, Any], ctx: Any) -> Any:
        raise RuntimeError("crashed")

    result = consume_batch(aws.sqs, aws.resources.inbox_url, handler, context, release_failed=True)

    assert (result.received, result.succeeded, len(result.failed)) == (1, [], 1)
    assert isinstance(result.error, RuntimeError)
    assert len(aws.inbox_messages()) == 1


def test_failed_ids_reads_batch_item_failures_as_lambda_does() -> None:
    ids = ["a", "b", "c"]
    both = {"batchItemFailures": [{"itemIdentifier": "a"}, {"itemIdentifier": "b"}]}

    assert failed_ids(both, ids) == {"a", "b"}
    assert failed_ids({"batchItemFailures": []}, ids) == set()
    assert failed_ids(None, ids) == set()
    # An entry naming no received message fails the whole batch: Lambda deletes none of it.
    assert failed_ids({"batchItemFailures": [{"itemIdentifier": "zzz"}]}, ids) == set(ids)
    assert failed_ids({"batchItemFailures": [{"itemIdentifier": None}]}, ids) == set(ids)
    assert failed_ids({"batchItemFailures": [{}]}, ids) == set(ids)


def test_consume_batch_keeps_the_whole_batch_when_a_failure_names_no_message(
    aws: Aws, context: LambdaContext
) -> None:
    inbox = Inbox(aws.resources.inbox_url, aws.sqs)
    for n in range(2):
        inbox.start(f"t-{n}", {"n": n})

    def handler(event: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"batchItemFailures": [{"itemIdentifier": "not-a-message-id"}]}

    result = consume_batch(aws.sqs, aws.resources.inbox_url, handler, context, release_failed=True)

    assert (result.received, result.succeeded, len(result.failed)) == (2, [], 2)
    assert len(aws.inbox_messages()) == 2


def test_runner_handler_builds_its_service_from_the_environment(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in aws.resources.env().items():
        monkeypatch.setenv(name, value)
    handler = load_handler("runner")

    service = handler.build_service()

    assert service.ledger.table_name == aws.resources.ledger_table
    assert "act" in service.graph.get_graph().nodes
