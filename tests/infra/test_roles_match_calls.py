"""Each role grants exactly the ledger, queue and topic actions its code calls.

The api and the runner are driven through every route's service call against in-process moto,
with a botocore hook recording each AWS operation; the synthesized roles must grant those
operations and nothing more on the same resources. A grant the code stops using, or a call the
code starts making, fails here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from moto import mock_aws
from payloads import incompressible_text
from test_template import arn_of, logical_id, role_actions

from agent_wait.errors import ThreadBusyError
from agent_wait_cli.local.streams import StreamReader
from infra.dispatcher import STREAM_READ_ACTIONS
from infra.functions import INBOX_CONSUME_ACTIONS
from wait_service.answers.policy_store import PolicyStore
from wait_service.http.api import build_api
from wait_service.resources import create_resources
from wait_service.runs.inbox import parse_message
from wait_service.runs.runner import build_runner
from wait_service.settings import Settings
from wait_service.stream.dispatcher import build_ledger_stream

if TYPE_CHECKING:
    from collections.abc import Iterator

    from conftest import Synth

pytestmark = pytest.mark.infra

REFUND: dict[str, Any] = {"customer": "c-17", "amount": 40}
# Granted to every function by CDK for its log group and X-Ray: not the code's own calls.
PLATFORM = {"logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTelemetryRecords", "xray:PutTraceSegments"}


# IAM has no action for a transaction: each of its items is authorized as the single-item call.
TRANSACT_ITEM_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}


# A batch call is authorized as the single-message call: SQS's SendMessageBatch as SendMessage,
# SNS's PublishBatch as Publish.
BATCH_ACTIONS = {"sqs:SendMessageBatch": "sqs:SendMessage", "sns:PublishBatch": "sns:Publish"}


class Recorder:
    """Clients whose every call is recorded as an IAM action, ``dynamodb:UpdateItem``.

    Calls on the tables named ``apart`` are recorded in ``apart_actions`` instead (a table whose
    grants are asserted on their own).
    """

    def __init__(self, apart: tuple[str, ...] = ()) -> None:
        self.actions: set[str] = set()
        self.apart_actions: set[str] = set()
        self.transactions = 0
        self._apart = apart
        self._on_apart = False

    def client(self, service: str) -> Any:
        client = boto3.client(service, region_name="us-east-1")  # type: ignore[call-overload]
        client.meta.events.register("provide-client-params.dynamodb.*", self._note_table)
        client.meta.events.register("before-call.*.*", self._record)
        client.meta.events.register("before-parameter-build.dynamodb.TransactWriteItems", self._record_items)
        return client

    def _note_table(self, params: dict[str, Any], **_: Any) -> None:
        self._on_apart = params.get("TableName") in self._apart

    def _record(self, model: Any, **_: Any) -> None:
        if model.name != "TransactWriteItems":
            action = f"{model.service_model.endpoint_prefix}:{model.name}"
            action = BATCH_ACTIONS.get(action, action)
            on_apart = self._on_apart and model.service_model.endpoint_prefix == "dynamodb"
            (self.apart_actions if on_apart else self.actions).add(action)
            self._on_apart = False

    def _record_items(self, params: dict[str, Any], **_: Any) -> None:
        self.transactions += 1
        for item in params.get("TransactItems", []):
            self.actions.update(TRANSACT_ITEM_ACTIONS[kind] for kind in item)


@pytest.fixture(scope="module")
def calls() -> Iterator[dict[str, set[str]]]:
    """The actions the api, the dispatcher and the runner call while a thread runs, parks, is
    answered and resumes."""
    from botocore.config import Config

    with mock_aws():
        setup = Recorder()
        resources = create_resources(setup.client("dynamodb"), setup.client("sqs"), setup.client("sns"))
        # The audit archive's delivery stream, as the stack configures the dispatcher with it
        setup.client("s3").create_bucket(Bucket="audit")
        setup.client("firehose").create_delivery_stream(
            DeliveryStreamName="audit",
            DeliveryStreamType="DirectPut",
            ExtendedS3DestinationConfiguration={
                "RoleARN": "arn:aws:iam::123456789012:role/firehose",
                "BucketARN": "arn:aws:s3:::audit",
            },
        )
        settings = Settings.from_env(
            resources.env()
            | {"AGENT_WAIT_REPLY_URL": "https://x/{question_id}", "AGENT_WAIT_ARCHIVE_STREAM": "audit"}
        )
        # The runner reads the policy store for the function the sample asks about (an override set)
        assert resources.policy_table is not None
        PolicyStore(resources.policy_table, setup.client("dynamodb")).set(
            "issue_refund", {"ttl": 7200}, set_by="ops", set_at="2026-12-01T00:00:00Z"
        )
        api_calls, runner_calls, dispatcher_calls = (
            Recorder(),
            Recorder((resources.policy_table,)),
            Recorder(),
        )
        api = build_api(settings, dynamodb=api_calls.client("dynamodb"), sqs=api_calls.client("sqs"))
        runner = build_runner(
            settings,
            dynamodb=runner_calls.client("dynamodb"),
            sns=runner_calls.client("sns"),
            sqs=runner_calls.client("sqs"),
            checkpointer=InMemorySaver(),
        )
        inbox = setup.client("sqs")
        # The stream's mapping reads the stream with the dispatcher's role (STREAM_READ_ACTIONS);
        # what the dispatcher's code calls is recorded on its own clients.
        streams = boto3.client(
            "dynamodbstreams", region_name="us-east-1", config=Config(account_id_endpoint_mode="disabled")
        )
        stream = build_ledger_stream(
            settings,
            dynamodb=dispatcher_calls.client("dynamodb"),
            sqs=dispatcher_calls.client("sqs"),
            firehose=dispatcher_calls.client("firehose"),
            sns=dispatcher_calls.client("sns"),
        )
        assert resources.ledger_stream_arn is not None
        reader = StreamReader(
            streams,
            resources.ledger_stream_arn,
            lambda event, _: [stream.process(record) for record in event["Records"]],
        )

        def run_next() -> None:
            reader.drain()
            [message] = inbox.receive_message(QueueUrl=resources.inbox_url)["Messages"]
            runner.run(parse_message(message["Body"]), message_id=message["MessageId"])
            inbox.delete_message(QueueUrl=resources.inbox_url, ReceiptHandle=message["ReceiptHandle"])

        # POST /runs twice: the first parks, the second is deferred behind its question; GET
        # /threads, every GET /questions listing, GET /questions/{id}
        api.runs.start("t-1", REFUND)
        api.runs.start("t-1", REFUND)
        run_next()
        run_next()
        # POST /runs with an Idempotency-Key: refused on the parked thread (its record deleted),
        # then recorded and completed on another thread, then replayed
        assert api.starts is not None
        with pytest.raises(ThreadBusyError):
            api.starts.start("t-1", REFUND, key="k-1")
        api.starts.start("t-2", REFUND, key="k-1")
        api.starts.start("t-2", REFUND, key="k-1")
        run_next()
        api.ledger.get_thread("t-1")
        queries: list[dict[str, Any]] = [
            {},
            {"status": "raised"},
            {"status": "pending"},
            {"thread_id": "t-1"},
        ]
        for query in queries:
            api.ledger.list_questions(**query)
        [question] = api.ledger.list_questions(thread_id="t-1").items
        api.ledger.get_question(question.question_id)
        # POST /reply, then the resume runs
        api.replies.reply(
            question.question_id, {"action": "approve"}, principal="ann", if_match=f'"{question.digest}"'
        )
        run_next()  # the resume: done, and the deferred run is enqueued
        run_next()  # the deferred run parks on its own question
        assert api.ledger.get_thread("t-1").run_status == "interrupted"
        # GET /stats: the analytics the dispatcher counted meanwhile
        assert api.stats is not None
        today = api.ledger._clock().date()
        assert api.stats.stats(since=today, until=today)["totals"]["answered"] == 1
        # The resume's end was tried as one transaction (authorized as its items' UpdateItems)
        assert runner_calls.transactions >= 1
        yield {
            "api": api_calls.actions,
            "runner": runner_calls.actions,
            "runner_policies": runner_calls.apart_actions,
            "dispatcher": dispatcher_calls.actions,
        }


def granted(synth: Synth, role: Any, resources: list[Any]) -> set[str]:
    return {
        action
        for actions, resource in role_actions(synth, role)
        for action in actions
        if any(r == resource or (isinstance(resource, list) and r in resource) for r in resources)
    }


def test_the_api_role_grants_exactly_what_the_api_calls(
    default_synth: Synth, calls: dict[str, set[str]]
) -> None:
    stack = default_synth.stack
    every_grant = {
        action for actions, _ in role_actions(default_synth, stack.api_function.role) for action in actions
    }

    assert every_grant - PLATFORM == calls["api"]


def test_the_runner_role_grants_exactly_what_the_runner_calls_on_the_ledger_topic_and_outbox(
    default_synth: Synth, calls: dict[str, set[str]]
) -> None:
    # The checkpoint table (DynamoDBSaver's own calls), the topic's KMS key and the event source
    # mapping's receive/delete on the inbox are asserted in test_template.py; the rest is the code's.
    stack = default_synth.stack
    resources = [
        arn_of(default_synth, stack.ledger.table),
        {"Ref": logical_id(default_synth, stack.fanout.topic)},
        arn_of(default_synth, stack.fanout.outbox),
        arn_of(default_synth, stack.inbox.queue),
    ]

    own = granted(default_synth, stack.runner.role, resources) - set(INBOX_CONSUME_ACTIONS)
    assert own == calls["runner"]
    assert calls["runner"] == {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "sns:Publish",
        "sqs:SendMessage",
    }


def test_the_runner_role_only_reads_the_policy_store(
    default_synth: Synth, calls: dict[str, set[str]]
) -> None:
    from infra.policies import POLICY_READ_ACTIONS

    stack = default_synth.stack
    on_store = granted(default_synth, stack.runner.role, [arn_of(default_synth, stack.policies.table)])
    assert on_store == calls["runner_policies"] == set(POLICY_READ_ACTIONS) == {"dynamodb:Query"}


def test_the_dispatcher_role_grants_exactly_what_the_dispatcher_and_its_mapping_call(
    default_synth: Synth, calls: dict[str, set[str]]
) -> None:
    # The stream reads and the on-failure destination's sends are the mapping's (test_template.py).
    stack = default_synth.stack
    own = granted(
        default_synth,
        stack.dispatcher.role,
        [
            arn_of(default_synth, stack.ledger.table),
            arn_of(default_synth, stack.inbox.queue),
            {"Fn::GetAtt": [stack.get_logical_id(stack.archive.stream), "Arn"]},
            # The resolution events (`wait.answered`, `wait.resumed`, `thread.done`...).
            {"Ref": logical_id(default_synth, stack.fanout.topic)},
            arn_of(default_synth, stack.fanout.outbox),
            # The analytics' counters: a marker put and a counters update per fact, in one transaction.
            arn_of(default_synth, stack.ledger.stats),
        ],
    )

    assert (
        own
        == calls["dispatcher"]
        == {
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "sns:Publish",
            "sqs:SendMessage",
            "firehose:PutRecordBatch",
        }
    )
    stream_grants = {
        action
        for actions, resource in role_actions(default_synth, stack.dispatcher.role)
        if resource == {"Fn::GetAtt": [logical_id(default_synth, stack.ledger.table), "StreamArn"]}
        for action in actions
    }
    assert stream_grants == set(STREAM_READ_ACTIONS)


# What the bucket's S3 operations need in IAM: a put with tags needs PutObjectTagging as well, and
# the lifecycle read is named differently in IAM.
S3_IAM_ACTIONS = {
    "s3:GetBucketLifecycleConfiguration": {"s3:GetLifecycleConfiguration"},
    "s3:GetObject": {"s3:GetObject"},
    "s3:PutObject": {"s3:PutObject", "s3:PutObjectTagging"},
}


@pytest.fixture(scope="module")
def checkpoint_calls() -> Iterator[set[str]]:
    """The actions the runner's own checkpointer calls while a large checkpoint parks and resumes."""
    from langgraph.types import Command

    from examples import ask_agent
    from wait_service.runs.checkpointer import make_checkpointer

    recorder = Recorder()

    class RecordedSession(boto3.Session):
        def client(self, *args: Any, **kwargs: Any) -> Any:
            client = super().client(*args, **kwargs)
            client.meta.events.register("before-call.*.*", recorder._record)
            return client

    with mock_aws(), pytest.MonkeyPatch.context() as patch:
        setup = Recorder()
        resources = create_resources(
            setup.client("dynamodb"), setup.client("sqs"), setup.client("sns"), "cp-", s3=setup.client("s3")
        )
        patch.setattr(boto3, "Session", RecordedSession)
        saver = make_checkpointer(Settings.from_env(resources.env()))
        graph = ask_agent.build_graph(saver)
        config: Any = {"configurable": {"thread_id": "t-large"}}
        parked = graph.invoke({"order": "o-1"}, config)
        # 300 KiB gzip cannot shrink, kept twice in the state: the checkpoint, gzipped, is still
        # over the 350 KB the saver keeps in DynamoDB, and is offloaded to the bucket.
        answer = incompressible_text(300 * 1024)
        graph.invoke(Command(resume={parked["__interrupt__"][0].id: answer}), config)
        # A later run (or the runner's read of the thread's state) loads the offloaded checkpoint.
        assert graph.get_state(config).values["shipping_to"] == answer
        objects = setup.client("s3").list_objects_v2(Bucket=resources.checkpoint_bucket)["Contents"]
        assert objects
        yield recorder.actions


def test_the_runner_role_grants_what_its_checkpointer_calls_on_the_table_and_bucket(
    default_synth: Synth, checkpoint_calls: set[str]
) -> None:
    stack = default_synth.stack
    assert stack.checkpoints.bucket is not None
    bucket = arn_of(default_synth, stack.checkpoints.bucket)
    on_bucket = granted(default_synth, stack.runner.role, [bucket, {"Fn::Join": ["", [bucket, "/*"]]}])
    s3_calls = {action for action in checkpoint_calls if action.startswith("s3:")}

    assert on_bucket == {iam for call in s3_calls for iam in S3_IAM_ACTIONS[call]}
    on_table = granted(default_synth, stack.runner.role, [arn_of(default_synth, stack.checkpoints.table)])
    assert checkpoint_calls - s3_calls <= on_table


@pytest.fixture(scope="module")
def dynamodb_checkpoint_calls() -> Iterator[set[str]]:
    """The actions ``checkpointer=dynamodb``'s saver calls while a thread parks, is read and resumes."""
    from langgraph.types import Command

    from examples import ask_agent
    from wait_service.runs.checkpointer import make_checkpointer

    recorder = Recorder()
    real_client = boto3.client

    def recorded_client(*args: Any, **kwargs: Any) -> Any:
        client = real_client(*args, **kwargs)
        client.meta.events.register("before-call.*.*", recorder._record)
        return client

    def recorded_resource(*args: Any, **kwargs: Any) -> Any:
        resource = boto3.session.Session().resource(*args, **kwargs)  # type: ignore[call-overload]
        resource.meta.client.meta.events.register("before-call.*.*", recorder._record)
        return resource

    with mock_aws(), pytest.MonkeyPatch.context() as patch:
        setup = Recorder()
        resources = create_resources(
            setup.client("dynamodb"),
            setup.client("sqs"),
            setup.client("sns"),
            "cpd-",
            checkpointer="dynamodb",
        )
        # The package builds its client and resource with boto3's module-level helpers.
        patch.setattr(boto3, "client", recorded_client)
        patch.setattr(boto3, "resource", recorded_resource)
        saver = make_checkpointer(Settings.from_env(resources.env()))
        graph = ask_agent.build_graph(saver)
        config: Any = {"configurable": {"thread_id": "t-ddb"}}
        parked = graph.invoke({"order": "o-1"}, config)
        graph.invoke(Command(resume={parked["__interrupt__"][0].id: "by sea"}), config)
        latest = graph.get_state(config)
        assert latest.values["shipping_to"] == "by sea"
        # A checkpoint read by its id (a config naming checkpoint_id) is a GetItem.
        assert graph.get_state(latest.config).values == latest.values
        yield recorder.actions


def test_the_runner_role_grants_what_the_dynamodb_checkpointer_calls(
    jwt_synth: Synth, dynamodb_checkpoint_calls: set[str]
) -> None:
    stack = jwt_synth.stack
    assert stack.checkpoints.writes_table is not None
    tables = [arn_of(jwt_synth, stack.checkpoints.table), arn_of(jwt_synth, stack.checkpoints.writes_table)]
    assert granted(jwt_synth, stack.runner.role, tables) == dynamodb_checkpoint_calls


@pytest.fixture(scope="module")
def webhook_calls() -> Iterator[set[str]]:
    """The actions the webhooks delivery function calls: four retries, then the DLQ."""
    from pathlib import Path

    from agent_wait.aws import SnsAnnounce
    from agent_wait.testing import sample_envelope
    from agent_wait_cli.local.runtime import load_handler
    from wait_service.channels.webhooks import Webhook, WebhookDelivery
    from wait_service.resources import create_webhook_queues
    from wait_service.runs.secrets import secret_getter
    from wait_service.runs.sqs_events import consume_batch

    handle = load_handler(
        Path(__file__).resolve().parents[2] / "functions" / "webhooks" / "handler.py",
        "webhooks_handler_roles_test",
        "handle",
    )
    with mock_aws():
        setup = Recorder()
        sqs, sns = setup.client("sqs"), setup.client("sns")
        # (its own prefix: the module's other recordings may still hold moto's state)
        resources = create_resources(setup.client("dynamodb"), sqs, sns, prefix="hooks-")
        created = create_webhook_queues(sqs, sns, resources.topic_arn, [("wait.created",)], prefix="hooks-")
        [(queue_url, queue_arn)] = created.queues
        setup.client("secretsmanager").create_secret(Name="hooks/tickets", SecretString="s3cret")
        function_calls = Recorder()
        delivery = WebhookDelivery(
            [
                Webhook(
                    queue_url, "https://tickets.example.com/h", "hooks/tickets", "tickets", ("wait.created",)
                )
            ],
            sqs=function_calls.client("sqs"),
            dlq_url=created.dlq_url,
            get_secret=secret_getter(client=function_calls.client("secretsmanager")),
            opener=lambda request, timeout: 503,
        )
        SnsAnnounce(resources.topic_arn, client=sns).announce(sample_envelope("q-roles", "t-roles"))
        while consume_batch(
            sqs,
            queue_url,
            lambda event, context: handle(event, context, delivery),
            None,
            queue_arn=queue_arn,
            release_failed=True,
        ).received:
            pass
        assert sqs.receive_message(QueueUrl=created.dlq_url).get("Messages")
        yield function_calls.actions


def test_the_webhooks_role_grants_exactly_what_the_delivery_function_calls(
    signed_synth: Synth, webhook_calls: set[str]
) -> None:
    # The event source mapping's receive/delete/attributes on the delivery queues are the mapping's
    # (asserted in test_webhooks_template.py); the rest is the code's.
    from infra.webhooks import DELIVERY_CONSUME_ACTIONS

    hooks = signed_synth.stack.webhooks
    assert hooks is not None
    every_grant = {
        action for actions, _ in role_actions(signed_synth, hooks.delivery.role) for action in actions
    }
    own = every_grant - PLATFORM - (set(DELIVERY_CONSUME_ACTIONS) - {"sqs:ChangeMessageVisibility"})
    assert (
        own
        == webhook_calls
        == {
            "secretsmanager:GetSecretValue",
            "sqs:ChangeMessageVisibility",
            "sqs:SendMessage",
        }
    )


# S3 calls Strands' S3Storage makes -> the IAM actions that allow them (a missing object reads as a
# 404 only with ListBucket).
STRANDS_S3_IAM_ACTIONS = {
    "s3:GetObject": {"s3:GetObject", "s3:ListBucket"},
    "s3:PutObject": {"s3:PutObject"},
    "s3:ListObjectsV2": {"s3:ListBucket"},
}


@pytest.fixture(scope="module")
def strands_session_calls() -> Iterator[set[str]]:
    """The S3 calls a hosted Strands agent's session makes while a thread parks and resumes."""
    from langgraph.types import Command

    from wait_service.runs.graph import load_graph
    from wait_service.runs.hosted_strands import S3Sessions

    recorder = Recorder()

    class RecordedSession(boto3.Session):
        def client(self, *args: Any, **kwargs: Any) -> Any:
            client = super().client(*args, **kwargs)
            client.meta.events.register("before-call.*.*", recorder._record)
            return client

    with mock_aws():
        setup = Recorder()
        resources = create_resources(
            setup.client("dynamodb"), setup.client("sqs"), setup.client("sns"), "st-", s3=setup.client("s3")
        )
        assert resources.checkpoint_bucket is not None
        sessions = S3Sessions(resources.checkpoint_bucket, RecordedSession(region_name="us-east-1"))
        graph = load_graph("examples.strands_agent:build_agent", None, framework="strands", sessions=sessions)
        config: Any = {"configurable": {"thread_id": "t-strands"}}
        parked = graph.invoke({"prompt": "refund 4 to c-roles"}, config)
        [interrupt] = parked["__interrupt__"]
        assert graph.get_state(config).interrupts
        done = graph.invoke(Command(resume={interrupt.id: {"action": "approve"}}), config)
        assert "c-roles" in done["output"]
        yield recorder.actions


def test_the_runner_role_grants_what_a_strands_session_calls_on_the_bucket(
    signed_synth: Synth, strands_session_calls: set[str]
) -> None:
    stack = signed_synth.stack
    assert stack.checkpoints.bucket is not None
    bucket = arn_of(signed_synth, stack.checkpoints.bucket)
    on_bucket = granted(signed_synth, stack.runner.role, [bucket, {"Fn::Join": ["", [bucket, "/*"]]}])
    needed = {iam for call in strands_session_calls for iam in STRANDS_S3_IAM_ACTIONS[call]}

    assert needed <= on_bucket, needed - on_bucket
