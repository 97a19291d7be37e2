"""Operators may redrive the inbox's DLQ; the audit archive (Firehose, S3, Glue table) is as documented."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from test_template import logical_id

from infra.archive import FIREHOSE_BUCKET_ACTIONS
from infra.audit_query import AUDIT_QUERY_GRANTS
from infra.config import AUDIT_RETENTION_DAYS, ConfigError, StackConfig
from tests.infra.conftest import BUCKET_CONTEXT
from wait_service.stream.archive import ARCHIVE_COLUMNS

if TYPE_CHECKING:
    from tests.infra.conftest import Synth

pytestmark = pytest.mark.infra

OPERATORS = json.loads(BUCKET_CONTEXT["operator_principals"])


# -- context ----------------------------------------------------------------------------------


def test_operator_principals_come_as_json_or_commas() -> None:
    role = "arn:aws:iam::123456789012:role/on-call"
    sso = "arn:aws:iam::123456789012:role/aws-reserved/sso.amazonaws.com/*/AWSReservedSSO_Admin_*"
    assert StackConfig.from_context(
        {"operator_principals": json.dumps([role, sso])}.get
    ).operator_principals == (
        role,
        sso,
    )
    assert StackConfig.from_context({"operator_principals": f"{role}, {sso}"}.get).operator_principals == (
        role,
        sso,
    )
    assert StackConfig().operator_principals == ()


@pytest.mark.parametrize(
    ("context", "key"),
    [
        ({"operator_principals": "on-call"}, "operator_principals"),
        ({"operator_principals": "[1, 2"}, "operator_principals"),
        ({"operator_principals": '{"a": 1}'}, "operator_principals"),
        ({"operator_principals": "arn:aws:sts::123456789012:assumed-role/x/y"}, "operator_principals"),
        ({"audit_retention_days": "30"}, "audit_retention_days"),
        ({"audit_retention_days": "a year"}, "audit_retention_days"),
        ({"audit_object_lock": "forever"}, "audit_object_lock"),
    ],
)
def test_bad_operate_context_is_one_line_naming_the_key(context: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        StackConfig.from_context(context.get)
    assert str(caught.value).startswith(f"context {key}")
    assert "\n" not in str(caught.value)


def test_audit_retention_defaults_to_400_days() -> None:
    assert StackConfig().audit_retention_days == AUDIT_RETENTION_DAYS == 400
    assert StackConfig().audit_object_lock is None


# -- redrive ----------------------------------------------------------------------------------


def _inbox_deny(synth: Synth) -> dict[str, Any]:
    inbox = {"Ref": logical_id(synth, synth.stack.inbox.queue)}
    [policy] = [
        p for p in synth.resources("AWS::SQS::QueuePolicy").values() if inbox in p["Properties"]["Queues"]
    ]
    [deny] = [
        s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") == "OnlyTheStackSends"
    ]
    return dict(deny)


def test_operators_may_send_to_the_inbox_so_they_can_redrive(bucket_synth: Synth) -> None:
    """The deny holds only when the sender is neither the stack's sender (the dispatcher) nor an operator."""
    condition = _inbox_deny(bucket_synth)["Condition"]
    assert condition["ArnNotLike"] == {"aws:PrincipalArn": OPERATORS}
    dispatcher = {"Fn::GetAtt": [logical_id(bucket_synth, bucket_synth.stack.dispatcher.role), "Arn"]}
    assert condition["ArnNotEquals"]["aws:PrincipalArn"] == [dispatcher]


def test_without_operators_only_the_stacks_roles_may_send(default_synth: Synth) -> None:
    assert set(_inbox_deny(default_synth)["Condition"]) == {"ArnNotEquals"}


def test_the_lifecycle_dlq_is_named_from_its_spec(default_synth: Synth) -> None:
    names = {q["Properties"]["QueueName"] for q in default_synth.resources("AWS::SQS::Queue").values()}
    assert "agent-wait-lifecycle-dlq" in names


# -- archive ----------------------------------------------------------------------------------


def _one(synth: Synth, kind: str) -> dict[str, Any]:
    [resource] = synth.resources(kind).values()
    return resource


def test_firehose_writes_encrypted_gzipped_json_lines_by_day_to_the_archive_bucket(
    default_synth: Synth,
) -> None:
    stream = _one(default_synth, "AWS::KinesisFirehose::DeliveryStream")["Properties"]
    assert stream["DeliveryStreamType"] == "DirectPut"
    assert stream["DeliveryStreamEncryptionConfigurationInput"] == {"KeyType": "AWS_OWNED_CMK"}
    s3 = stream["ExtendedS3DestinationConfiguration"]
    archive = default_synth.stack.archive
    assert s3["BucketARN"] == {"Fn::GetAtt": [logical_id(default_synth, archive.bucket), "Arn"]}
    assert s3["Prefix"] == "audit/date=!{timestamp:yyyy-MM-dd}/"
    assert s3["CompressionFormat"] == "GZIP"
    assert s3["CloudWatchLoggingOptions"]["Enabled"] is True


def test_the_delivery_role_has_exactly_the_s3_destination_actions(default_synth: Synth) -> None:
    role = default_synth.stack.archive.role
    role_ref = {"Ref": logical_id(default_synth, role)}
    statements = [
        statement
        for policy in default_synth.resources("AWS::IAM::Policy").values()
        if role_ref in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    actions = sorted(
        a for s in statements for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    )
    assert actions == sorted([*FIREHOSE_BUCKET_ACTIONS, "logs:PutLogEvents"])
    trust = default_synth.resources("AWS::IAM::Role")[logical_id(default_synth, role)]["Properties"]
    [assume] = trust["AssumeRolePolicyDocument"]["Statement"]
    assert assume["Principal"] == {"Service": "firehose.amazonaws.com"}
    assert "aws:SourceAccount" in assume["Condition"]["StringEquals"]


def test_the_archive_bucket_is_private_tls_only_kept_and_expires_after_the_retention(
    default_synth: Synth,
) -> None:
    archive = default_synth.stack.archive
    bucket = default_synth.resources("AWS::S3::Bucket")[logical_id(default_synth, archive.bucket)]
    props = bucket["Properties"]
    assert bucket["DeletionPolicy"] == "Retain"
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
        "ServerSideEncryptionByDefault"
    ] == {"SSEAlgorithm": "AES256"}
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    [rule] = props["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == AUDIT_RETENTION_DAYS
    assert "ObjectLockEnabled" not in props
    policies = [
        p
        for p in default_synth.resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": logical_id(default_synth, archive.bucket)}
    ]
    [tls] = [
        s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"
    ]
    assert tls["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_object_lock_and_retention_come_from_context(bucket_synth: Synth) -> None:
    archive = bucket_synth.stack.archive
    props = bucket_synth.resources("AWS::S3::Bucket")[logical_id(bucket_synth, archive.bucket)]["Properties"]
    days = int(BUCKET_CONTEXT["audit_retention_days"])
    assert props["ObjectLockEnabled"] is True
    assert props["ObjectLockConfiguration"]["Rule"]["DefaultRetention"] == {
        "Mode": "GOVERNANCE",
        "Days": days,
    }
    [rule] = props["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == days


def test_the_glue_table_has_the_archive_columns_and_projects_the_day(default_synth: Synth) -> None:
    table = _one(default_synth, "AWS::Glue::Table")["Properties"]
    assert table["DatabaseName"] == "agent_wait"
    described = table["TableInput"]
    assert [(c["Name"], c["Type"]) for c in described["StorageDescriptor"]["Columns"]] == list(
        ARCHIVE_COLUMNS
    )
    assert described["PartitionKeys"] == [{"Name": "date", "Type": "string"}]
    parameters = described["Parameters"]
    assert parameters["projection.enabled"] == "true"
    assert (parameters["projection.date.type"], parameters["projection.date.format"]) == (
        "date",
        "yyyy-MM-dd",
    )
    assert (
        described["StorageDescriptor"]["SerdeInfo"]["SerializationLibrary"]
        == "org.openx.data.jsonserde.JsonSerDe"
    )


def test_the_dispatcher_puts_archive_records_to_the_delivery_stream(default_synth: Synth) -> None:
    stack = default_synth.stack
    function = default_synth.resources("AWS::Lambda::Function")[
        logical_id(default_synth, stack.dispatcher.function)
    ]
    stream_id = default_synth.stack.get_logical_id(stack.archive.stream)
    assert function["Properties"]["Environment"]["Variables"]["AGENT_WAIT_ARCHIVE_STREAM"] == {
        "Ref": stream_id
    }
    role_ref = {"Ref": logical_id(default_synth, stack.dispatcher.role)}
    statements = [
        statement
        for policy in default_synth.resources("AWS::IAM::Policy").values()
        if role_ref in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    [put] = [s for s in statements if s["Action"] == "firehose:PutRecordBatch"]
    assert put["Resource"] == {"Fn::GetAtt": [stream_id, "Arn"]}


def test_the_operator_policy_grants_exactly_what_agent_wait_dlq_calls(default_synth: Synth) -> None:
    import boto3
    from botocore.stub import Stubber
    from moto import mock_aws

    from agent_wait_cli.dlq import DeadLetters
    from agent_wait_cli.local.clock import destination_record
    from infra.operators import DLQ_ACTIONS, SOURCE_ACTIONS, STREAM_ACTIONS
    from infra.policies import POLICY_OPERATOR_ACTIONS, STACK_READ_ACTIONS
    from wait_service.resources import OUTBOX, TIMERS, create_resources, dead_letter_queues

    # Given every kind of message in the DLQs, when an operator lists, shows and redrives them all
    called: set[str] = set()
    invoked: list[str] = []

    def record(model: Any, **_: Any) -> None:
        # IAM names DynamoDB Streams' actions `dynamodb:*` (its endpoint is `streams.dynamodb`).
        called.add(f"{model.service_model.endpoint_prefix.removeprefix('streams.')}:{model.name}")

    class Invoker:
        def invoke(self, function_name: str, payload: Any) -> None:
            invoked.append(function_name)

        def invoke_batch(self, function_name: str, event: Any) -> Any:
            invoked.append(function_name)
            return {"batchItemFailures": []}

    with mock_aws():
        setup = boto3.client("sqs", region_name="us-east-1")
        resources = create_resources(
            boto3.client("dynamodb", region_name="us-east-1"),
            setup,
            boto3.client("sns", region_name="us-east-1"),
        )
        setup.send_message(
            QueueUrl=resources.outbox_url, MessageBody="{}", MessageGroupId="g", MessageDeduplicationId="d"
        )
        for _ in range(OUTBOX.max_receive_count + 1):
            setup.receive_message(QueueUrl=resources.outbox_url, VisibilityTimeout=0)
        assert resources.lifecycle_dlq_url is not None
        arn = "arn:aws:lambda:us-east-1:123456789012:function:agent-wait-lifecycle"
        setup.send_message(
            QueueUrl=resources.lifecycle_dlq_url,
            MessageBody=json.dumps(destination_record({"question_id": "q"}, RuntimeError("x"), arn, 3)),
        )
        setup.send_message(
            QueueUrl=setup.create_queue(QueueName="agent-wait-" + TIMERS.dlq_name)["QueueUrl"],
            MessageBody=json.dumps({"question_id": "q", "timer": "expire", "n": 0}),
        )
        # a stream batch's on-failure record; moto's in-process mock has no DynamoDB Streams API, so
        # the stream's two answers are stubbed (the calls are recorded before the stub answers)
        assert resources.ledger_stream_arn is not None and resources.stream_dlq_url is not None
        batch = {
            "shardId": "shardId-00000001-" + "0" * 16,
            "startSequenceNumber": "1" + "0" * 20,
            "endSequenceNumber": "1" + "0" * 20,
        }
        setup.send_message(
            QueueUrl=resources.stream_dlq_url,
            MessageBody=json.dumps(
                {"DDBStreamBatchInfo": {**batch, "streamArn": resources.ledger_stream_arn}}
            ),
        )
        sqs = boto3.client("sqs", region_name="us-east-1")
        streams = boto3.client("dynamodbstreams", region_name="us-east-1")
        for client in (sqs, streams):
            client.meta.events.register("before-call.*.*", record)
        stub = Stubber(streams)
        stub.add_response("get_shard_iterator", {"ShardIterator": "i-1"})
        change = {
            "eventName": "MODIFY",
            "dynamodb": {"SequenceNumber": "1" + "0" * 20, "Keys": {"k": {"S": "v"}}},
        }
        stub.add_response("get_records", {"Records": [change], "NextShardIterator": "i-2"})
        stub.activate()
        dlqs = DeadLetters(
            sqs, "agent-wait-", Invoker(), now=lambda: 1e12, streams=streams, batch_invoker=Invoker()
        )
        dlqs.queues()
        [first, _, _, _] = dlqs.messages()
        dlqs.find(first.message_id)
        assert [o.status for o in dlqs.redrive(None)] == ["redriven"] * 4

    # Then the policy grants those actions, and the lifecycle function's invoke, nothing more
    stack = default_synth.stack
    [policy] = default_synth.resources("AWS::IAM::ManagedPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    granted = {
        a for s in statements for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    }
    # (and what `agent-wait audit query --api` needs: tests/infra/test_audit_query_template.py, and
    # `agent-wait policies`' own actions: tests/infra/test_policies_template.py)
    policies = set(POLICY_OPERATOR_ACTIONS) | set(STACK_READ_ACTIONS)
    assert granted - set(AUDIT_QUERY_GRANTS) - policies == set(DLQ_ACTIONS) | set(SOURCE_ACTIONS) | set(
        STREAM_ACTIONS
    ) | {"lambda:InvokeFunction"}
    assert called == set(DLQ_ACTIONS) | set(SOURCE_ACTIONS) | set(STREAM_ACTIONS)
    assert sorted(invoked) == ["agent-wait-dispatcher"] + ["agent-wait-lifecycle"] * 2
    # on every DLQ the stack has, the timers' (EventBridge Scheduler's) included
    [on_dlqs] = [s for s in statements if "sqs:DeleteMessage" in s["Action"]]
    dlq_ids = {ref["Fn::GetAtt"][0] for ref in on_dlqs["Resource"]}
    assert stack.resolve(stack.timers.schedule_dlq.queue_arn)["Fn::GetAtt"][0] in dlq_ids
    assert len(dlq_ids) == len(dead_letter_queues())
    assert policy["Properties"]["ManagedPolicyName"] == "agent-wait-operator"
    [invoke] = [s for s in statements if s["Action"] == "lambda:InvokeFunction"]
    assert invoke["Resource"] == [
        stack.resolve(stack.timers.function_arn),
        stack.resolve(stack.dispatcher.function.function_arn),
    ]
    # the dispatcher is the function `agent-wait dlq` names, and the reads reach the ledger's stream only
    [dispatcher] = [
        f["Properties"]
        for f in default_synth.resources("AWS::Lambda::Function").values()
        if f["Properties"].get("FunctionName") == "agent-wait-dispatcher"
    ]
    assert dispatcher["Description"].startswith("agent-wait dispatcher")
    [reads] = [s for s in statements if "dynamodb:GetRecords" in s["Action"]]
    assert reads["Resource"] == stack.resolve(stack.dispatcher.stream_arn)
