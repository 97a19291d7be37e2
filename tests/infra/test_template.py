"""``aws_cdk.assertions`` on the template: tables, queues, topic, functions, roles, API, outputs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from aws_cdk.assertions import Match

from infra import constants
from infra.api import INBOX_ROUTES, ROUTES
from tests.checkpoint_dynamodb_schema import package_key_schemas
from wait_service import metric_names
from wait_service.answer_limits import MAX_ANSWER_BYTES, MAX_ANSWER_BYTES_WITHOUT_OFFLOAD
from wait_service.channels.signing import SIGNED_PREFIX, SIGNED_ROUTES
from wait_service.resources import (
    CHECKPOINT_BUCKET,
    CHECKPOINT_WRITES_DYNAMODB,
    CHECKPOINTS,
    CHECKPOINTS_DYNAMODB,
    INBOX,
    LEDGER,
    OUTBOX,
    POLICIES,
    RUNNER_TIMEOUT_SECONDS,
    STATS,
    TTL_DAYS,
    TTL_DELETION_LAG_DAYS,
    TableSpec,
)
from wait_service.settings import DEFAULT_GRAPH

if TYPE_CHECKING:
    from constructs import IConstruct

    from tests.infra.conftest import Synth

pytestmark = pytest.mark.infra


def logical_id(synth: Synth, construct: IConstruct) -> str:
    return synth.stack.get_logical_id(construct.node.default_child)  # type: ignore[arg-type]


def table_properties(spec: TableSpec) -> dict[str, Any]:
    """What a table built from ``spec`` must look like (keys, GSIs, TTL, PITR, on-demand)."""
    expected: dict[str, Any] = {
        "KeySchema": spec.key_schema(),
        "AttributeDefinitions": [
            {"AttributeName": name, "AttributeType": "S"} for name in spec.attribute_names()
        ],
        "BillingMode": "PAY_PER_REQUEST",
        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
    }
    if spec.ttl_attribute:
        expected["TimeToLiveSpecification"] = {"AttributeName": spec.ttl_attribute, "Enabled": True}
    if spec.indexes:
        expected["GlobalSecondaryIndexes"] = spec.global_secondary_indexes()
    if spec.stream_view_type:
        expected["StreamSpecification"] = {"StreamViewType": spec.stream_view_type}
    return expected


def table_view(props: dict[str, Any]) -> dict[str, Any]:
    """The properties :func:`table_properties` states, attribute definitions in name order."""
    # Encryption and deletion protection are stack-wide settings (tests/infra/test_operate.py).
    view = {key: props[key] for key in props if key not in ("SSESpecification", "DeletionProtectionEnabled")}
    view["AttributeDefinitions"] = sorted(props["AttributeDefinitions"], key=lambda a: a["AttributeName"])
    return view


def tables_by_spec(synth: Synth) -> list[dict[str, Any]]:
    return [table_view(t["Properties"]) for t in synth.resources("AWS::DynamoDB::Table").values()]


def role_actions(synth: Synth, role: IConstruct) -> list[tuple[tuple[str, ...], Any]]:
    """Every (sorted actions, resource) pair of the policies attached to ``role``."""
    role_id = logical_id(synth, role)
    found: list[tuple[tuple[str, ...], Any]] = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role_id} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow"
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            found.append((tuple(sorted(actions)), statement["Resource"]))
    return found


def all_actions(synth: Synth, role: IConstruct) -> set[str]:
    return {action for actions, _ in role_actions(synth, role) for action in actions}


def arn_of(synth: Synth, construct: IConstruct) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id(synth, construct), "Arn"]}


# -- tables ---------------------------------------------------------------------------------------


def test_ledger_table_matches_its_spec(default_synth: Synth) -> None:
    ledger = default_synth.resources("AWS::DynamoDB::Table")[
        logical_id(default_synth, default_synth.stack.ledger.table)
    ]
    assert table_view(ledger["Properties"]) == table_properties(LEDGER)
    assert ledger["Properties"]["SSESpecification"] == {"SSEEnabled": True}
    assert (ledger["DeletionPolicy"], ledger["UpdateReplacePolicy"]) == ("Retain", "Retain")


def test_aws_checkpointer_has_one_table_and_a_bucket_by_default(default_synth: Synth) -> None:
    assert sorted(json.dumps(t, sort_keys=True) for t in tables_by_spec(default_synth)) == sorted(
        json.dumps(table_properties(spec), sort_keys=True) for spec in (LEDGER, STATS, CHECKPOINTS, POLICIES)
    )
    stack = default_synth.stack
    assert stack.checkpoints.bucket is not None
    # (the others are the audit archive's and its Athena query results')
    default_synth.template.resource_count_is("AWS::S3::Bucket", 3)
    variables = default_synth.resources("AWS::Lambda::Function")[
        logical_id(default_synth, stack.runner.function)
    ]["Properties"]["Environment"]["Variables"]
    assert variables["AGENT_WAIT_CHECKPOINT_BUCKET"] == {
        "Ref": logical_id(default_synth, stack.checkpoints.bucket)
    }


def test_checkpoints_are_retained_like_the_ledger(default_synth: Synth, jwt_synth: Synth) -> None:
    for synth in (default_synth, jwt_synth):
        for table in synth.resources("AWS::DynamoDB::Table").values():
            assert (table["DeletionPolicy"], table["UpdateReplacePolicy"]) == ("Retain", "Retain")
    bucket = default_synth.resources("AWS::S3::Bucket")[
        logical_id(default_synth, default_synth.stack.checkpoints.bucket)  # type: ignore[arg-type]
    ]
    assert bucket["DeletionPolicy"] == "Retain"


def test_checkpoint_objects_outlive_the_items_that_point_at_them(default_synth: Synth) -> None:
    # Items expire TTL_DAYS after their write (the runner's ttl_seconds = the ledger's days); an
    # object written with its item expires only after DynamoDB's deletion lag on top, and its rule
    # has the id DynamoDBSaver looks for, so the saver never adds a shorter rule of its own.
    bucket = default_synth.resources("AWS::S3::Bucket")[
        logical_id(default_synth, default_synth.stack.checkpoints.bucket)  # type: ignore[arg-type]
    ]
    [rule] = bucket["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rule["Id"] == f"root-ttl-expiration-{TTL_DAYS}d" == CHECKPOINT_BUCKET.rule_id
    assert rule["ExpirationInDays"] == TTL_DAYS + TTL_DELETION_LAG_DAYS > TTL_DAYS
    assert rule["Status"] == "Enabled" and "Prefix" not in rule and "TagFilters" not in rule
    assert constants.LEDGER_TTL_DAYS == TTL_DAYS


def test_the_api_accepts_smaller_answers_when_checkpoints_cannot_offload(
    default_synth: Synth, jwt_synth: Synth
) -> None:
    def max_answer(synth: Synth) -> str:
        return synth.resources("AWS::Lambda::Function")[logical_id(synth, synth.stack.api_function.function)][
            "Properties"
        ]["Environment"]["Variables"]["AGENT_WAIT_MAX_ANSWER_BYTES"]

    assert jwt_synth.stack.checkpoints.bucket is None
    assert max_answer(default_synth) == str(MAX_ANSWER_BYTES)
    assert max_answer(jwt_synth) == str(MAX_ANSWER_BYTES_WITHOUT_OFFLOAD)


def test_dynamodb_checkpointer_has_its_two_tables(jwt_synth: Synth) -> None:
    assert sorted(json.dumps(t, sort_keys=True) for t in tables_by_spec(jwt_synth)) == sorted(
        json.dumps(table_properties(spec), sort_keys=True)
        for spec in (LEDGER, STATS, CHECKPOINTS_DYNAMODB, CHECKPOINT_WRITES_DYNAMODB, POLICIES)
    )


def test_dynamodb_checkpointer_tables_are_keyed_as_the_package_reads_them(jwt_synth: Synth) -> None:
    # The keys come from langgraph-checkpoint-dynamodb itself, not from wait_service.resources.
    package = package_key_schemas()
    stack = jwt_synth.stack
    assert stack.checkpoints.writes_table is not None
    tables = jwt_synth.resources("AWS::DynamoDB::Table")
    for role, construct in (
        ("checkpoints", stack.checkpoints.table),
        ("writes", stack.checkpoints.writes_table),
    ):
        props = tables[logical_id(jwt_synth, construct)]["Properties"]
        assert [(k["AttributeName"], k["KeyType"]) for k in props["KeySchema"]] == package[role], role
        assert sorted(
            (a["AttributeName"], a["AttributeType"]) for a in props["AttributeDefinitions"]
        ) == sorted((name, "S") for name, _ in package[role]), role
        # The items expire with the ledger (the runner's saver stamps `ttl`) and are kept on destroy.
        assert props["TimeToLiveSpecification"] == {"AttributeName": "ttl", "Enabled": True}
        assert tables[logical_id(jwt_synth, construct)]["DeletionPolicy"] == "Retain"


def test_checkpoint_bucket_is_private_encrypted_and_tls_only(bucket_synth: Synth) -> None:
    template = bucket_synth.template
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": Match.object_like({}),
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
        },
    )
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
                        )
                    ]
                )
            }
        },
    )


# -- queues and topic -----------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [INBOX, OUTBOX], ids=lambda s: s.name)
def test_fifo_queue_and_dlq_match_the_spec(default_synth: Synth, spec: Any) -> None:
    queues = default_synth.resources("AWS::SQS::Queue")
    prefix = "agent-wait-"
    by_name = {q["Properties"]["QueueName"]: (k, q["Properties"]) for k, q in queues.items()}
    dlq_id, dlq = by_name[prefix + spec.dlq_name]
    _, queue = by_name[prefix + spec.name]
    for props in (queue, dlq):
        assert props["FifoQueue"] is True
        assert props["ContentBasedDeduplication"] is False
        assert props["SqsManagedSseEnabled"] is True
        assert props["MessageRetentionPeriod"] == spec.retention_seconds
    assert queue["VisibilityTimeout"] == spec.visibility_timeout
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": spec.max_receive_count,
    }
    assert "RedrivePolicy" not in dlq


def test_inbox_hides_a_message_longer_than_the_runner_may_run(default_synth: Synth) -> None:
    runner = default_synth.resources("AWS::Lambda::Function")[
        logical_id(default_synth, default_synth.stack.runner.function)
    ]
    queues = default_synth.resources("AWS::SQS::Queue")
    inbox = queues[logical_id(default_synth, default_synth.stack.inbox.queue)]
    assert runner["Properties"]["Timeout"] == RUNNER_TIMEOUT_SECONDS
    # The template's own values: a message in flight must outlive the longest run of it.
    assert inbox["Properties"]["VisibilityTimeout"] > runner["Properties"]["Timeout"]


def test_every_queue_denies_plain_http(default_synth: Synth) -> None:
    policies = default_synth.resources("AWS::SQS::QueuePolicy")
    covered = set()
    for policy in policies.values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            for s in statements
        )
        covered |= {json.dumps(q) for q in policy["Properties"]["Queues"]}
    # inbox, outbox, their DLQs, the lifecycle function's DLQ, the timers' DLQ and the ledger stream's DLQ
    assert len(covered) == 7


def test_topic_is_standard_kms_encrypted_and_tls_only(default_synth: Synth) -> None:
    template = default_synth.template
    key_id = logical_id(default_synth, default_synth.stack.fanout.key)
    template.has_resource_properties(
        "AWS::SNS::Topic",
        {
            "TopicName": "agent-wait-wait-created",
            "KmsMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]},
            "FifoTopic": Match.absent(),
        },
    )
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
                        )
                    ]
                )
            }
        },
    )


def test_no_subscription_is_deployed_but_the_webhooks_delivery_queues(any_synth: Synth) -> None:
    # The raw-delivery SQS subscriber is a local-stack convenience; users subscribe their own systems.
    # The stack subscribes only the delivery queue of each configured webhook.
    any_synth.template.resource_count_is("AWS::SNS::Subscription", len(any_synth.stack.config.webhooks))


def test_inbox_feeds_the_runner_with_partial_batch_failures(default_synth: Synth) -> None:
    stack = default_synth.stack
    default_synth.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": arn_of(default_synth, stack.inbox.queue),
            "FunctionName": {"Ref": logical_id(default_synth, stack.runner.function)},
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            # One run per invocation: the runner's timeout bounds one run, a timeout retries one run.
            "BatchSize": 1,
            "ScalingConfig": {"MaximumConcurrency": 10},
        },
    )
    # The other mapping is the dispatcher's, on the ledger's stream.
    default_synth.template.resource_count_is("AWS::Lambda::EventSourceMapping", 2)


def test_each_function_is_sized_for_what_it_does(default_synth: Synth) -> None:
    # The dispatcher mostly waits on AWS calls: the smallest size with headroom. The api answers
    # people (its cold start is CPU-bound imports), the runner runs the graph: larger.
    stack = default_synth.stack
    functions = default_synth.resources("AWS::Lambda::Function")

    def memory(function: IConstruct) -> int:
        return int(functions[logical_id(default_synth, function)]["Properties"]["MemorySize"])

    assert memory(stack.dispatcher.function) == constants.DISPATCHER_MEMORY_MB == 256
    assert memory(stack.api_function.function) == constants.API_MEMORY_MB == 512
    assert memory(stack.runner.function) == constants.RUNNER_MEMORY_MB == 1024


def test_the_ledger_stream_feeds_the_dispatcher_with_bounded_retries_and_a_dlq(default_synth: Synth) -> None:
    stack = default_synth.stack
    default_synth.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"},
            "KeySchema": [{"AttributeName": "dedupe_key", "KeyType": "HASH"}],
        },
    )
    default_synth.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [logical_id(default_synth, stack.ledger.table), "StreamArn"]},
            "FunctionName": {"Ref": logical_id(default_synth, stack.dispatcher.function)},
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "BisectBatchOnFunctionError": True,
            "MaximumRetryAttempts": Match.any_value(),
            "DestinationConfig": {"OnFailure": {"Destination": arn_of(default_synth, stack.dispatcher.dlq)}},
        },
    )
    [alarm] = [
        a["Properties"]
        for a in default_synth.resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "IteratorAge"
    ]
    assert alarm["Dimensions"] == [
        {"Name": "FunctionName", "Value": {"Ref": logical_id(default_synth, stack.dispatcher.function)}}
    ]
    assert alarm["Threshold"] == constants.STREAM_AGE_ALARM_SECONDS * 1000


def test_runner_max_concurrency_comes_from_context(bucket_synth: Synth) -> None:
    bucket_synth.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping", {"BatchSize": 1, "ScalingConfig": {"MaximumConcurrency": 25}}
    )


# -- functions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["api_function", "runner"])
def test_functions_runtime_tracing_logs(default_synth: Synth, name: str) -> None:
    construct = getattr(default_synth.stack, name)
    props = default_synth.resources("AWS::Lambda::Function")[logical_id(default_synth, construct.function)][
        "Properties"
    ]
    assert props["Runtime"] == "python3.13"
    assert props["Architectures"] == [constants.ARCHITECTURE]
    assert props["Handler"] == "handler.handler"
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert props["LoggingConfig"]["LogGroup"] == {"Ref": logical_id(default_synth, construct.log_group)}
    variables = props["Environment"]["Variables"]
    assert variables["POWERTOOLS_SERVICE_NAME"] == "agent-wait"
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == constants.METRICS_NAMESPACE
    assert variables["LOG_LEVEL"] == constants.LOG_LEVEL
    log_group = default_synth.resources("AWS::Logs::LogGroup")[logical_id(default_synth, construct.log_group)]
    assert log_group["Properties"]["RetentionInDays"] == 30


def test_api_environment_is_wired(default_synth: Synth) -> None:
    stack = default_synth.stack
    variables = default_synth.resources("AWS::Lambda::Function")[
        logical_id(default_synth, stack.api_function.function)
    ]["Properties"]["Environment"]["Variables"]
    assert variables == {
        "AGENT_WAIT_LEDGER_TABLE": {"Ref": logical_id(default_synth, stack.ledger.table)},
        "AGENT_WAIT_LEDGER_TTL_DAYS": str(constants.LEDGER_TTL_DAYS),
        "AGENT_WAIT_LISTING_SHARDS": "1",
        "AGENT_WAIT_INPUT_SCHEMA": "graph_input/graph_input_schema.json",
        "AGENT_WAIT_MAX_ANSWER_BYTES": str(MAX_ANSWER_BYTES),
        "AGENT_WAIT_STATS_TABLE": {"Ref": logical_id(default_synth, stack.ledger.stats)},
        "POWERTOOLS_SERVICE_NAME": "agent-wait",
        "POWERTOOLS_METRICS_NAMESPACE": constants.METRICS_NAMESPACE,
        "LOG_LEVEL": constants.LOG_LEVEL,
    }


def test_runner_environment_is_wired(default_synth: Synth) -> None:
    stack = default_synth.stack
    variables = default_synth.resources("AWS::Lambda::Function")[
        logical_id(default_synth, stack.runner.function)
    ]["Properties"]["Environment"]["Variables"]
    api_id = logical_id(default_synth, stack.api.api)
    reply_url = variables.pop("AGENT_WAIT_REPLY_URL")
    assert variables == {
        "AGENT_WAIT_LEDGER_TABLE": {"Ref": logical_id(default_synth, stack.ledger.table)},
        "AGENT_WAIT_TOPIC_ARN": {"Ref": logical_id(default_synth, stack.fanout.topic)},
        "AGENT_WAIT_OUTBOX_URL": {"Ref": logical_id(default_synth, stack.fanout.outbox)},
        "AGENT_WAIT_INBOX_URL": {"Ref": logical_id(default_synth, stack.inbox.queue)},
        "AGENT_WAIT_GRAPH": DEFAULT_GRAPH,
        "AGENT_WAIT_CHECKPOINTER": "aws",
        "AGENT_WAIT_CHECKPOINT_TABLE": {"Ref": logical_id(default_synth, stack.checkpoints.table)},
        "AGENT_WAIT_CHECKPOINT_BUCKET": {"Ref": logical_id(default_synth, stack.checkpoints.bucket)},
        "AGENT_WAIT_CHECKPOINT_COMPRESSION": "true",
        "AGENT_WAIT_LEDGER_TTL_DAYS": str(constants.LEDGER_TTL_DAYS),
        "AGENT_WAIT_LISTING_SHARDS": "1",
        "AGENT_WAIT_POLICY_TABLE": {"Ref": logical_id(default_synth, stack.policies.table)},
        "POWERTOOLS_SERVICE_NAME": "agent-wait",
        "POWERTOOLS_METRICS_NAMESPACE": constants.METRICS_NAMESPACE,
        "LOG_LEVEL": constants.LOG_LEVEL,
        **default_synth.stack.resolve(stack.timers.environment()),
    }
    # https://<api id>.execute-api.<region>.<suffix>/prod/questions/{question_id}/reply
    parts = reply_url["Fn::Join"][1]
    assert parts[0] == "https://" and parts[1] == {"Ref": api_id}
    assert parts[-1] == "/questions/{question_id}/reply"
    assert any(isinstance(p, dict) and "Ref" in p and "Stage" in p["Ref"] for p in parts)


def test_runner_environment_for_the_dynamodb_backend(jwt_synth: Synth) -> None:
    stack = jwt_synth.stack
    variables = jwt_synth.resources("AWS::Lambda::Function")[logical_id(jwt_synth, stack.runner.function)][
        "Properties"
    ]["Environment"]["Variables"]
    assert stack.checkpoints.writes_table is not None
    assert variables["AGENT_WAIT_CHECKPOINTER"] == "dynamodb"
    # Only DynamoDBSaver compresses: the other backend is not told to
    assert "AGENT_WAIT_CHECKPOINT_COMPRESSION" not in variables
    assert variables["AGENT_WAIT_CHECKPOINT_TABLE"] == {"Ref": logical_id(jwt_synth, stack.checkpoints.table)}
    assert variables["AGENT_WAIT_CHECKPOINT_WRITES_TABLE"] == {
        "Ref": logical_id(jwt_synth, stack.checkpoints.writes_table)
    }
    assert variables["AGENT_WAIT_DEFAULT_TTL"] == "3600"
    assert variables["POWERTOOLS_SERVICE_NAME"] == "aw-jwt"


def test_runner_gets_the_graph_layer_and_the_api_does_not(default_synth: Synth) -> None:
    stack = default_synth.stack
    functions = default_synth.resources("AWS::Lambda::Function")
    core, graph, agent_wait = (
        {"Ref": logical_id(default_synth, layer)}
        for layer in (stack.layers.core, stack.layers.graph, stack.layers.agent_wait)
    )
    assert functions[logical_id(default_synth, stack.api_function.function)]["Properties"]["Layers"] == [
        core,
        agent_wait,
    ]
    assert functions[logical_id(default_synth, stack.runner.function)]["Properties"]["Layers"] == [
        core,
        graph,
        agent_wait,
    ]
    for layer in default_synth.resources("AWS::Lambda::LayerVersion").values():
        assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
        assert layer["Properties"]["CompatibleArchitectures"] == [constants.ARCHITECTURE]


# -- roles: exactly the actions the code calls -----------------------------------------------------


def _logs(synth: Synth, construct: Any) -> tuple[tuple[str, ...], Any]:
    return (("logs:CreateLogStream", "logs:PutLogEvents"), arn_of(synth, construct.log_group))


XRAY = (("xray:PutTelemetryRecords", "xray:PutTraceSegments"), "*")


def test_api_role_has_exactly_its_actions(default_synth: Synth) -> None:
    stack = default_synth.stack
    ledger = arn_of(default_synth, stack.ledger.table)
    indexes = [{"Fn::Join": ["", [ledger, f"/index/{index.name}"]]} for index in LEDGER.indexes]
    assert sorted(map(json.dumps, role_actions(default_synth, stack.api_function.role))) == sorted(
        map(
            json.dumps,
            [
                _logs(default_synth, stack.api_function),
                # (BatchGetItem: a thread's page reads its items by key, its index holding keys alone)
                (
                    (
                        "dynamodb:BatchGetItem",
                        "dynamodb:DeleteItem",
                        "dynamodb:GetItem",
                        "dynamodb:PutItem",
                        "dynamodb:UpdateItem",
                    ),
                    ledger,
                ),
                (("dynamodb:Query", "dynamodb:Scan"), indexes),
                # GET /stats reads the analytics' counters
                (("dynamodb:Query",), arn_of(default_synth, stack.ledger.stats)),
                XRAY,
            ],
        )
    )
    # The api sends no message: what a request needs follows from the ledger's stream.
    assert not any(
        a.startswith(("sns:", "sqs:", "kms:", "s3:"))
        for a in all_actions(default_synth, stack.api_function.role)
    )


def test_dispatcher_role_has_exactly_its_actions(default_synth: Synth) -> None:
    stack = default_synth.stack
    dispatcher = stack.dispatcher
    ledger = arn_of(default_synth, stack.ledger.table)
    assert sorted(map(json.dumps, role_actions(default_synth, dispatcher.role))) == sorted(
        map(
            json.dumps,
            [
                _logs(default_synth, dispatcher.service),
                (("dynamodb:UpdateItem",), ledger),
                (
                    (
                        "dynamodb:DescribeStream",
                        "dynamodb:GetRecords",
                        "dynamodb:GetShardIterator",
                        "dynamodb:ListStreams",
                    ),
                    {"Fn::GetAtt": [logical_id(default_synth, stack.ledger.table), "StreamArn"]},
                ),
                (("sqs:SendMessage",), arn_of(default_synth, stack.inbox.queue)),
                # The resolution events, on the outbox and the topic (whose key encrypts them)
                (("sqs:SendMessage",), arn_of(default_synth, stack.fanout.outbox)),
                (("sns:Publish",), {"Ref": logical_id(default_synth, stack.fanout.topic)}),
                (("kms:Decrypt", "kms:GenerateDataKey"), arn_of(default_synth, stack.fanout.key)),
                # The mapping's on-failure destination
                (
                    ("sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"),
                    arn_of(default_synth, dispatcher.dlq),
                ),
                # The analytics' counters and their markers
                (("dynamodb:PutItem", "dynamodb:UpdateItem"), arn_of(default_synth, stack.ledger.stats)),
                # The audit archive's records
                (
                    ("firehose:PutRecordBatch",),
                    {"Fn::GetAtt": [stack.get_logical_id(stack.archive.stream), "Arn"]},
                ),
                XRAY,
            ],
        )
    )


def test_runner_role_has_exactly_its_actions(default_synth: Synth) -> None:
    stack = default_synth.stack
    assert sorted(map(json.dumps, role_actions(default_synth, stack.runner.role))) == sorted(
        map(
            json.dumps,
            [
                _logs(default_synth, stack.runner),
                (
                    (
                        "dynamodb:BatchGetItem",
                        "dynamodb:BatchWriteItem",
                        "dynamodb:GetItem",
                        "dynamodb:PutItem",
                        "dynamodb:Query",
                    ),
                    arn_of(default_synth, stack.checkpoints.table),
                ),
                (
                    ("s3:GetObject", "s3:PutObject", "s3:PutObjectTagging"),
                    {"Fn::Join": ["", [arn_of(default_synth, stack.checkpoints.bucket), "/*"]]},
                ),
                (("s3:GetLifecycleConfiguration",), arn_of(default_synth, stack.checkpoints.bucket)),
                (
                    ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"),
                    arn_of(default_synth, stack.ledger.table),
                ),
                # The policy store, read when a question is raised
                (("dynamodb:Query",), arn_of(default_synth, stack.policies.table)),
                (("sns:Publish",), {"Ref": logical_id(default_synth, stack.fanout.topic)}),
                (("kms:Decrypt", "kms:GenerateDataKey"), arn_of(default_synth, stack.fanout.key)),
                (("sqs:SendMessage",), arn_of(default_synth, stack.fanout.outbox)),
                (
                    (
                        "sqs:ChangeMessageVisibility",
                        "sqs:DeleteMessage",
                        "sqs:GetQueueAttributes",
                        "sqs:ReceiveMessage",
                    ),
                    arn_of(default_synth, stack.inbox.queue),
                ),
                (
                    ("scheduler:CreateSchedule", "scheduler:DeleteSchedule"),
                    default_synth.stack.resolve(stack.timers.schedules_arn),
                ),
                (("iam:PassRole",), arn_of(default_synth, stack.timers.scheduler_role)),
                XRAY,
            ],
        )
    )


def test_lifecycle_role_has_exactly_its_actions(default_synth: Synth) -> None:
    stack = default_synth.stack
    lifecycle = stack.timers.lifecycle
    assert sorted(map(json.dumps, role_actions(default_synth, lifecycle.role))) == sorted(
        map(
            json.dumps,
            [
                _logs(default_synth, lifecycle),
                (("dynamodb:GetItem", "dynamodb:UpdateItem"), arn_of(default_synth, stack.ledger.table)),
                (("sqs:SendMessage",), arn_of(default_synth, stack.fanout.outbox)),
                (("sns:Publish",), {"Ref": logical_id(default_synth, stack.fanout.topic)}),
                (("kms:Decrypt", "kms:GenerateDataKey"), arn_of(default_synth, stack.fanout.key)),
                (("scheduler:CreateSchedule",), default_synth.stack.resolve(stack.timers.schedules_arn)),
                (("iam:PassRole",), arn_of(default_synth, stack.timers.scheduler_role)),
                (
                    ("sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"),
                    arn_of(default_synth, stack.timers.dlq),
                ),
                XRAY,
            ],
        )
    )


def test_scheduler_may_invoke_the_lifecycle_function_only(default_synth: Synth) -> None:
    stack = default_synth.stack
    role = default_synth.resources("AWS::IAM::Role")[logical_id(default_synth, stack.timers.scheduler_role)]
    [statement] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    assert role_actions(default_synth, stack.timers.scheduler_role) == [
        (("lambda:InvokeFunction",), default_synth.stack.resolve(stack.timers.function_arn)),
        # a timer whose retries ran out goes to the timers DLQ, sent with the schedule's role
        (("sqs:SendMessage",), arn_of(default_synth, stack.timers.schedule_dlq)),
    ]
    default_synth.template.has_resource_properties(
        "AWS::Scheduler::ScheduleGroup", {"Name": "agent-wait-timers"}
    )
    default_synth.template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {
            "MaximumRetryAttempts": 2,
            "DestinationConfig": {"OnFailure": {"Destination": arn_of(default_synth, stack.timers.dlq)}},
        },
    )


def test_runner_role_for_the_dynamodb_backend(jwt_synth: Synth) -> None:
    stack = jwt_synth.stack
    assert stack.checkpoints.writes_table is not None
    tables = [arn_of(jwt_synth, stack.checkpoints.table), arn_of(jwt_synth, stack.checkpoints.writes_table)]
    assert (
        ("dynamodb:BatchWriteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"),
        tables,
    ) in role_actions(jwt_synth, stack.runner.role)


def test_runner_role_reaches_the_checkpoint_bucket_objects_only(bucket_synth: Synth) -> None:
    stack = bucket_synth.stack
    assert stack.checkpoints.bucket is not None
    bucket = arn_of(bucket_synth, stack.checkpoints.bucket)
    assert (
        ("s3:GetObject", "s3:PutObject", "s3:PutObjectTagging"),
        {"Fn::Join": ["", [bucket, "/*"]]},
    ) in role_actions(bucket_synth, stack.runner.role)
    assert (("s3:GetLifecycleConfiguration",), bucket) in role_actions(bucket_synth, stack.runner.role)
    variables = bucket_synth.resources("AWS::Lambda::Function")[
        logical_id(bucket_synth, stack.runner.function)
    ]["Properties"]["Environment"]["Variables"]
    assert variables["AGENT_WAIT_CHECKPOINT_BUCKET"] == {
        "Ref": logical_id(bucket_synth, stack.checkpoints.bucket)
    }


def test_each_function_has_its_own_role_without_managed_policies(default_synth: Synth) -> None:
    stack = default_synth.stack
    roles = default_synth.resources("AWS::IAM::Role")
    for construct in (stack.api_function, stack.runner):
        role = roles[logical_id(default_synth, construct.role)]["Properties"]
        assert "ManagedPolicyArns" not in role
        assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
            "Service": "lambda.amazonaws.com"
        }
    assert logical_id(default_synth, stack.api_function.role) != logical_id(default_synth, stack.runner.role)


# -- REST API -------------------------------------------------------------------------------------


def _methods(synth: Synth) -> dict[tuple[str, str], dict[str, Any]]:
    """(HTTP method, path) → CfnMethod properties, the path rebuilt from the resource tree."""
    resources = synth.resources("AWS::ApiGateway::Resource")
    api_id = logical_id(synth, synth.stack.api.api)

    def path(ref: Any) -> str:
        if ref == {"Fn::GetAtt": [api_id, "RootResourceId"]}:
            return ""
        props = resources[ref["Ref"]]["Properties"]
        return f"{path(props['ParentId'])}/{props['PathPart']}"

    return {
        (m["Properties"]["HttpMethod"], path(m["Properties"]["ResourceId"])): m["Properties"]
        for m in synth.resources("AWS::ApiGateway::Method").values()
    }


# Authenticated in the api Lambda by their HMAC signature, not at the gateway (test_signed_template.py).
SIGNED = {(method, SIGNED_PREFIX + path) for method, path in SIGNED_ROUTES}


def test_routes_are_proxied_to_the_api_function_with_iam_auth(default_synth: Synth) -> None:
    methods = _methods(default_synth)
    assert set(methods) == {(method, path) for method, path, _ in ROUTES} | SIGNED
    function_id = logical_id(default_synth, default_synth.stack.api_function.function)
    for key, props in methods.items():
        assert props["AuthorizationType"] == ("NONE" if key in SIGNED else "AWS_IAM")
        assert props["Integration"]["Type"] == "AWS_PROXY"
        assert function_id in json.dumps(props["Integration"]["Uri"])


def test_post_bodies_are_validated_as_json_objects(default_synth: Synth) -> None:
    methods = _methods(default_synth)
    validator = default_synth.resources("AWS::ApiGateway::RequestValidator")
    assert [v["Properties"]["ValidateRequestBody"] for v in validator.values()] == [True]
    model = next(iter(default_synth.resources("AWS::ApiGateway::Model").values()))["Properties"]
    assert model["Schema"]["type"] == "object"
    for method, path, json_body in ROUTES:
        props = methods[(method, path)]
        assert ("RequestValidatorId" in props) is json_body
        assert ("RequestModels" in props) is json_body


def test_jwt_mode_uses_a_cognito_authorizer_on_every_route(jwt_synth: Synth) -> None:
    authorizers = list(jwt_synth.resources("AWS::ApiGateway::Authorizer").values())
    assert len(authorizers) == 1
    props = authorizers[0]["Properties"]
    assert props["Type"] == "COGNITO_USER_POOLS"
    assert props["IdentitySource"] == "method.request.header.Authorization"
    assert "userpool/eu-west-1_Abc123" in json.dumps(props["ProviderARNs"])
    assert ":eu-west-1:" in json.dumps(props["ProviderARNs"])
    for key, props in _methods(jwt_synth).items():
        if key in SIGNED:
            continue
        if key[1] in INBOX_ROUTES:
            # The inbox page loads before anyone signs in; its calls carry the token.
            assert props["AuthorizationType"] == "NONE"
            continue
        assert props["AuthorizationType"] == "COGNITO_USER_POOLS"
        assert props["AuthorizationScopes"] == ["agent-wait/reply"]
    variables = json.dumps(
        next(
            r["Properties"]["Environment"]["Variables"]
            for r in jwt_synth.resources("AWS::Lambda::Function").values()
            if "AGENT_WAIT_INBOX_CLIENT_ID" in r["Properties"].get("Environment", {}).get("Variables", {})
        )
    )
    assert '"AGENT_WAIT_INBOX_CLIENT_ID": "inbox-client-1"' in variables
    assert '"AGENT_WAIT_JWT_AUDIENCE": "agent-wait/reply"' in variables


def test_iam_mode_has_no_authorizer(default_synth: Synth) -> None:
    default_synth.template.resource_count_is("AWS::ApiGateway::Authorizer", 0)


def test_stage_is_throttled_traced_and_access_logged(default_synth: Synth) -> None:
    access_logs = logical_id(default_synth, default_synth.stack.api.access_logs)
    default_synth.template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "StageName": constants.API_STAGE,
            "TracingEnabled": True,
            "AccessLogSetting": {
                "DestinationArn": {"Fn::GetAtt": [access_logs, "Arn"]},
                "Format": Match.any_value(),
            },
            "MethodSettings": Match.array_with(
                [
                    Match.object_like(
                        {
                            "HttpMethod": "*",
                            "ResourcePath": "/*",
                            "ThrottlingRateLimit": constants.API_THROTTLE_RATE,
                            "ThrottlingBurstLimit": constants.API_THROTTLE_BURST,
                            "LoggingLevel": "ERROR",
                        }
                    )
                ]
            ),
        },
    )


# -- observability and outputs --------------------------------------------------------------------


def test_dashboard_shows_the_question_metrics(default_synth: Synth) -> None:
    dashboards = default_synth.resources("AWS::CloudWatch::Dashboard")
    assert len(dashboards) == 1
    body = json.dumps(next(iter(dashboards.values()))["Properties"]["DashboardBody"])
    for metric in (
        metric_names.QUESTIONS_RAISED,
        metric_names.QUESTIONS_ANSWERED,
        metric_names.QUESTIONS_RESUMED,
        metric_names.QUESTIONS_EXPIRED,
        metric_names.TIME_TO_ANSWER,
        metric_names.RESUME_FAILURES,
        "ApproximateNumberOfMessagesVisible",
        "Errors",
        "5XXError",
    ):
        assert metric in body, metric
    assert constants.METRICS_NAMESPACE in body


def test_alarms_on_dlq_depth_and_resume_failures(default_synth: Synth) -> None:
    stack = default_synth.stack
    alarms = default_synth.resources("AWS::CloudWatch::Alarm").values()
    dlq_alarms = {
        json.dumps(a["Properties"]["Dimensions"][0]["Value"])
        for a in alarms
        if a["Properties"].get("MetricName") == "ApproximateNumberOfMessagesVisible"
    }
    assert dlq_alarms == {
        json.dumps({"Fn::GetAtt": [logical_id(default_synth, q), "QueueName"]})
        for q in (
            stack.inbox.dlq,
            stack.fanout.outbox_dlq,
            stack.timers.dlq,
            stack.timers.schedule_dlq,
            stack.dispatcher.dlq,
        )
    }
    default_synth.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": metric_names.RESUME_FAILURES,
            "Namespace": constants.METRICS_NAMESPACE,
            "Dimensions": [{"Name": "service", "Value": "agent-wait"}],
            "Threshold": 1,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        },
    )


def _alarm_on(synth: Synth, metric: str, **dimensions: Any) -> dict[str, Any]:
    """The one alarm on ``metric`` whose dimensions include ``dimensions`` (values as in the template)."""
    found = [
        a["Properties"]
        for a in synth.resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == metric
        and all(
            {"Name": name, "Value": value} in a["Properties"].get("Dimensions", [])
            for name, value in dimensions.items()
        )
    ]
    assert len(found) == 1, (metric, dimensions, found)
    return found[0]


def test_alarms_on_inbox_age_lambda_errors_and_throttles_api_5xx_and_failed_runs(
    default_synth: Synth,
) -> None:
    stack = default_synth.stack
    inbox = _alarm_on(
        default_synth,
        "ApproximateAgeOfOldestMessage",
        QueueName={"Fn::GetAtt": [logical_id(default_synth, stack.inbox.queue), "QueueName"]},
    )
    assert inbox["Threshold"] == constants.INBOX_AGE_ALARM_SECONDS
    assert inbox["Threshold"] > INBOX.visibility_timeout
    for construct in (stack.api_function, stack.runner):
        function = {"Ref": logical_id(default_synth, construct.function)}
        for metric in ("Errors", "Throttles"):
            alarm = _alarm_on(default_synth, metric, FunctionName=function)
            assert (alarm["Namespace"], alarm["Statistic"], alarm["Threshold"]) == ("AWS/Lambda", "Sum", 1)
    api = _alarm_on(default_synth, "5XXError", ApiName="agent-wait")
    # the Average of 5XXError is the fraction of requests with a 5xx
    assert (api["Namespace"], api["Statistic"], api["Threshold"]) == (
        "AWS/ApiGateway",
        "Average",
        constants.API_5XX_ALARM_RATE,
    )
    for alarm in default_synth.resources("AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        assert alarm["Properties"]["TreatMissingData"] == "notBreaching"


def test_alarms_notify_the_configured_topic_when_they_fire_and_clear(bucket_synth: Synth) -> None:
    alarms = list(bucket_synth.resources("AWS::CloudWatch::Alarm").values())
    assert len(alarms) == len(bucket_synth.stack.observability.alarms)
    for alarm in alarms:
        assert alarm["Properties"]["AlarmActions"] == ["arn:aws:sns:eu-west-1:123456789012:on-call"]
        assert alarm["Properties"]["OKActions"] == ["arn:aws:sns:eu-west-1:123456789012:on-call"]


def test_outputs(default_synth: Synth) -> None:
    stack = default_synth.stack
    outputs = default_synth.template_json["Outputs"]
    assert set(outputs) == {
        "ApiUrl",
        "TopicArn",
        "OutboxQueueUrl",
        "LedgerTableName",
        "AlarmTopicArn",
        "AuditBucketName",
        "AuditTable",
        "AuditWorkGroup",
        "OperatorPolicyArn",
        "PolicyTableName",
    }
    assert outputs["TopicArn"]["Value"] == {"Ref": logical_id(default_synth, stack.fanout.topic)}
    assert outputs["OutboxQueueUrl"]["Value"] == {"Ref": logical_id(default_synth, stack.fanout.outbox)}
    assert outputs["LedgerTableName"]["Value"] == {"Ref": logical_id(default_synth, stack.ledger.table)}
    assert "Fn::Join" in outputs["ApiUrl"]["Value"]


def test_stack_name_comes_from_context(jwt_synth: Synth) -> None:
    assert jwt_synth.stack.stack_name == "aw-jwt"
    names = {q["Properties"]["QueueName"] for q in jwt_synth.resources("AWS::SQS::Queue").values()}
    assert names == {
        f"aw-jwt-{n}"
        for n in (
            INBOX.name,
            INBOX.dlq_name,
            OUTBOX.name,
            OUTBOX.dlq_name,
            "lifecycle-dlq",
            "timers-dlq",
            "ledger-stream-dlq",
        )
    }


def test_only_the_stacks_roles_may_send_to_the_inbox(default_synth: Synth) -> None:
    """The runner trusts no message, but nobody else may put one on the inbox either."""
    stack = default_synth.stack
    inbox = {"Ref": logical_id(default_synth, stack.inbox.queue)}
    [policy] = [
        p
        for p in default_synth.resources("AWS::SQS::QueuePolicy").values()
        if inbox in p["Properties"]["Queues"]
    ]
    [deny] = [
        s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") == "OnlyTheStackSends"
    ]
    assert (deny["Effect"], deny["Action"], deny["Principal"]) == ("Deny", "sqs:SendMessage", {"AWS": "*"})
    senders = deny["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
    # Only the dispatcher sends starts and resumes, from the ledger's stream.
    assert senders == [arn_of(default_synth, stack.dispatcher.role)]


# -- SnapStart (context snapstart=true) -------------------------------------------------------------


def test_snapstart_runs_the_runner_and_the_api_from_an_alias_of_a_published_version(
    bucket_synth: Synth,
) -> None:
    stack = bucket_synth.stack
    functions = bucket_synth.resources("AWS::Lambda::Function")
    versions = bucket_synth.resources("AWS::Lambda::Version")
    aliases = {
        alias["Properties"]["FunctionName"]["Ref"]: alias
        for alias in bucket_synth.resources("AWS::Lambda::Alias").values()
    }
    for construct in (stack.api_function, stack.runner):
        function_id = logical_id(bucket_synth, construct.function)
        assert functions[function_id]["Properties"]["SnapStart"] == {"ApplyOn": "PublishedVersions"}
        alias = aliases[function_id]["Properties"]
        assert alias["Name"] == constants.SNAPSTART_ALIAS
        version_id = alias["FunctionVersion"]["Fn::GetAtt"][0]
        assert versions[version_id]["Properties"]["FunctionName"] == {"Ref": function_id}
    # The lifecycle function keeps its cold starts: a timer's latency is nobody's wait.
    assert (
        "SnapStart" not in functions[logical_id(bucket_synth, stack.timers.lifecycle.function)]["Properties"]
    )
    assert set(aliases) == {logical_id(bucket_synth, c.function) for c in (stack.api_function, stack.runner)}

    # The triggers invoke the alias: the inbox mapping, every API route, and API Gateway's permission.
    runner_alias = logical_id(bucket_synth, stack.runner.alias)
    mapping = _inbox_mapping(bucket_synth)
    assert runner_alias in json.dumps(mapping["Properties"]["FunctionName"])
    api_alias = logical_id(bucket_synth, stack.api_function.alias)
    for props in _methods(bucket_synth).values():
        assert api_alias in json.dumps(props["Integration"]["Uri"])
    invoked = [
        json.dumps(p["Properties"]["FunctionName"])
        for p in bucket_synth.resources("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    ]
    assert invoked
    assert all(api_alias in function for function in invoked)


def test_without_snapstart_the_triggers_invoke_the_functions(default_synth: Synth) -> None:
    assert default_synth.resources("AWS::Lambda::Alias") == {}
    for props in default_synth.resources("AWS::Lambda::Function").values():
        assert "SnapStart" not in props["Properties"]
    mapping = _inbox_mapping(default_synth)
    assert mapping["Properties"]["FunctionName"] == {
        "Ref": logical_id(default_synth, default_synth.stack.runner.function)
    }


def _inbox_mapping(synth: Synth) -> dict[str, Any]:
    """The event source mapping that hands the inbox's messages to the runner."""
    inbox = json.dumps(arn_of(synth, synth.stack.inbox.queue))
    [mapping] = [
        m
        for m in synth.resources("AWS::Lambda::EventSourceMapping").values()
        if json.dumps(m["Properties"]["EventSourceArn"]) == inbox
    ]
    return mapping


def test_the_tests_reading_the_shared_apps_run_on_one_worker(
    request: pytest.FixtureRequest, default_synth: Synth
) -> None:
    """Under ``make test`` (xdist, ``--dist loadgroup``) the synthesized apps are built once, on the
    worker that runs every test reading them: the test's node id carries its group, as xdist's
    scheduler reads it. Without the group every worker synthesizes every app again."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("runs under make test (pytest-xdist with --dist loadgroup)")
    assert request.node.nodeid.endswith("@infra"), request.node.nodeid
