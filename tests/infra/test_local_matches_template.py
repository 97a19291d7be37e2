"""The resources the local stack builds (``wait_service.resources.create_resources`` on moto server)
match the synthesized template: key schemas, GSIs, TTL attributes, FIFO and deduplication attributes,
visibility timeouts and redrive ``maxReceiveCount``. The raw-delivery SQS subscription is local-only.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from test_template import logical_id
from webhook_context import WEBHOOKS

from tests.checkpoint_dynamodb_schema import package_key_schemas
from wait_service.resources import CHECKPOINT_BUCKET

if TYPE_CHECKING:
    from tests.infra.conftest import Synth
    from wait_service.resources import LocalResources

pytestmark = pytest.mark.infra


def _table_shape(
    key_schema: list[dict[str, str]],
    attributes: list[dict[str, str]],
    gsis: list[Any],
    ttl: Any,
    stream: str | None = None,
) -> dict[str, Any]:
    return {
        "stream": stream,
        "keys": [(k["AttributeName"], k["KeyType"]) for k in key_schema],
        "attributes": sorted((a["AttributeName"], a["AttributeType"]) for a in attributes),
        "indexes": sorted(
            (
                g["IndexName"],
                tuple((k["AttributeName"], k["KeyType"]) for k in g["KeySchema"]),
                g["Projection"]["ProjectionType"],
                tuple(sorted(g["Projection"].get("NonKeyAttributes", []))),
            )
            for g in gsis
        ),
        "ttl": ttl,
    }


def _template_table(synth: Synth, construct: Any) -> dict[str, Any]:
    props = synth.resources("AWS::DynamoDB::Table")[synth.stack.get_logical_id(construct.node.default_child)][
        "Properties"
    ]
    ttl = props.get("TimeToLiveSpecification", {})
    return _table_shape(
        props["KeySchema"],
        props["AttributeDefinitions"],
        props.get("GlobalSecondaryIndexes", []),
        ttl.get("AttributeName") if ttl.get("Enabled") else None,
        props.get("StreamSpecification", {}).get("StreamViewType"),
    )


def _local_table(dynamodb: Any, name: str) -> dict[str, Any]:
    table = dynamodb.describe_table(TableName=name)["Table"]
    ttl = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
    return _table_shape(
        table["KeySchema"],
        table["AttributeDefinitions"],
        table.get("GlobalSecondaryIndexes", []),
        ttl.get("AttributeName") if ttl.get("TimeToLiveStatus") == "ENABLED" else None,
        (table.get("StreamSpecification") or {}).get("StreamViewType"),
    )


def _template_queue(synth: Synth, construct: Any) -> dict[str, Any]:
    props = synth.resources("AWS::SQS::Queue")[synth.stack.get_logical_id(construct.node.default_child)][
        "Properties"
    ]
    return {
        "FifoQueue": str(props["FifoQueue"]).lower(),
        "ContentBasedDeduplication": str(props["ContentBasedDeduplication"]).lower(),
        "DeduplicationScope": props.get("DeduplicationScope", "queue"),
        "FifoThroughputLimit": props.get("FifoThroughputLimit", "perQueue"),
        "VisibilityTimeout": str(props.get("VisibilityTimeout", 30)),
        "MessageRetentionPeriod": str(props["MessageRetentionPeriod"]),
        "maxReceiveCount": props.get("RedrivePolicy", {}).get("maxReceiveCount"),
    }


def _local_queue(sqs: Any, url: str) -> dict[str, Any]:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    redrive = json.loads(attributes.get("RedrivePolicy", "{}"))
    return {
        "FifoQueue": attributes["FifoQueue"],
        "ContentBasedDeduplication": attributes["ContentBasedDeduplication"],
        "DeduplicationScope": attributes.get("DeduplicationScope", "queue"),
        "FifoThroughputLimit": attributes.get("FifoThroughputLimit", "perQueue"),
        "VisibilityTimeout": attributes["VisibilityTimeout"],
        "MessageRetentionPeriod": attributes["MessageRetentionPeriod"],
        "maxReceiveCount": int(redrive["maxReceiveCount"]) if redrive else None,
    }


def test_tables_match(default_synth: Synth, resources: LocalResources, aws_client: Any) -> None:
    dynamodb = aws_client("dynamodb")
    stack = default_synth.stack
    assert _local_table(dynamodb, resources.ledger_table) == _template_table(
        default_synth, stack.ledger.table
    )
    assert _local_table(dynamodb, resources.checkpoint_table) == _template_table(
        default_synth, stack.checkpoints.table
    )
    assert _template_table(default_synth, stack.ledger.table)["ttl"] == "expires_ttl"
    assert resources.policy_table is not None
    assert _local_table(dynamodb, resources.policy_table) == _template_table(
        default_synth, stack.policies.table
    )
    assert resources.stats_table is not None
    assert _local_table(dynamodb, resources.stats_table) == _template_table(default_synth, stack.ledger.stats)


def test_dynamodb_checkpointer_tables_match(jwt_synth: Synth, aws_client: Any) -> None:
    # The local stack's `--checkpointer dynamodb` tables are the stack's `checkpointer=dynamodb` ones,
    # and both are keyed as langgraph-checkpoint-dynamodb reads them.
    from wait_service.resources import create_resources

    dynamodb = aws_client("dynamodb")
    local = create_resources(
        dynamodb, aws_client("sqs"), aws_client("sns"), prefix="t-ddb-", checkpointer="dynamodb"
    )
    stack = jwt_synth.stack
    assert local.checkpoint_writes_table is not None and stack.checkpoints.writes_table is not None
    package = package_key_schemas()
    pairs = {
        "checkpoints": (local.checkpoint_table, stack.checkpoints.table),
        "writes": (local.checkpoint_writes_table, stack.checkpoints.writes_table),
    }
    for role, (name, construct) in pairs.items():
        local_table, deployed = _local_table(dynamodb, name), _template_table(jwt_synth, construct)
        assert local_table == deployed, role
        assert deployed["keys"] == package[role], role


def test_queues_match(default_synth: Synth, resources: LocalResources, aws_client: Any) -> None:
    sqs = aws_client("sqs")
    stack = default_synth.stack
    pairs = {
        "inbox": (resources.inbox_url, stack.inbox.queue),
        "outbox": (resources.outbox_url, stack.fanout.outbox),
    }
    for name, (url, construct) in pairs.items():
        local, deployed = _local_queue(sqs, url), _template_queue(default_synth, construct)
        assert local == deployed, name
        assert deployed["FifoQueue"] == "true" and deployed["ContentBasedDeduplication"] == "false"
        assert deployed["maxReceiveCount"] is not None
        # High-throughput FIFO: the limits apply per message group (per thread), not per queue.
        assert (deployed["DeduplicationScope"], deployed["FifoThroughputLimit"]) == (
            "messageGroup",
            "perMessageGroupId",
        ), name
    for name, url in (("inbox-dlq", resources.inbox_dlq_url), ("outbox-dlq", resources.outbox_dlq_url)):
        local_dlq = _local_queue(sqs, url)
        assert (local_dlq["FifoQueue"], local_dlq["ContentBasedDeduplication"]) == ("true", "false"), name


def test_queue_and_topic_names_share_the_spec_suffix(default_synth: Synth, resources: LocalResources) -> None:
    deployed = {
        q["Properties"]["QueueName"].removeprefix("agent-wait-")
        for q in default_synth.resources("AWS::SQS::Queue").values()
    }
    local = {
        url.rsplit("/", 1)[1].split("-", 1)[1]
        for url in (
            resources.inbox_url,
            resources.outbox_url,
            resources.inbox_dlq_url,
            resources.outbox_dlq_url,
            str(resources.stream_dlq_url),
        )
    }
    # The lifecycle function's dead-letter queue catches failed asynchronous invocations, which the
    # local clock retries itself: the one queue only the deployment has. The timers' DLQ comes with
    # the schedule group (test_schedule_group_matches_the_spec).
    assert local == deployed - {"lifecycle-dlq", "timers-dlq"}
    topic = next(iter(default_synth.resources("AWS::SNS::Topic").values()))["Properties"]["TopicName"]
    assert resources.topic_arn.rsplit(":", 1)[1].split("-", 1)[1] == topic.removeprefix("agent-wait-")


def test_schedule_group_matches_the_spec(default_synth: Synth, aws_client: Any) -> None:
    from wait_service.resources import create_resources

    local = create_resources(
        aws_client("dynamodb"),
        aws_client("sqs"),
        aws_client("sns"),
        prefix="t-sg-",
        scheduler=aws_client("scheduler"),
    )
    [group] = default_synth.resources("AWS::Scheduler::ScheduleGroup").values()
    assert local.schedule_group is not None
    assert local.schedule_group.removeprefix("t-sg-") == group["Properties"]["Name"].removeprefix(
        "agent-wait-"
    )
    aws_client("scheduler").get_schedule_group(Name=local.schedule_group)
    # and the dead-letter queue every schedule names, a standard queue of the same name
    [dlq] = [
        q
        for q in default_synth.resources("AWS::SQS::Queue").values()
        if q["Properties"]["QueueName"] == "agent-wait-timers-dlq"
    ]
    assert local.schedule_dlq_url is not None
    assert local.schedule_dlq_url.rsplit("/", 1)[1].removeprefix("t-sg-") == "timers-dlq"
    sqs = aws_client("sqs")
    queue = sqs.get_queue_attributes(QueueUrl=local.schedule_dlq_url, AttributeNames=["All"])
    attributes = queue["Attributes"]
    assert "FifoQueue" not in attributes and "FifoQueue" not in dlq["Properties"]
    assert attributes["MessageRetentionPeriod"] == str(dlq["Properties"]["MessageRetentionPeriod"])


def test_raw_delivery_subscription_is_local_only(
    default_synth: Synth, resources: LocalResources, aws_client: Any
) -> None:
    sns = aws_client("sns")
    subscriptions = sns.list_subscriptions_by_topic(TopicArn=resources.topic_arn)["Subscriptions"]
    assert len(subscriptions) == 1
    attributes = sns.get_subscription_attributes(SubscriptionArn=subscriptions[0]["SubscriptionArn"])[
        "Attributes"
    ]
    assert attributes["RawMessageDelivery"] == "true"
    assert default_synth.resources("AWS::SNS::Subscription") == {}


def test_checkpoint_bucket_matches(default_synth: Synth, resources: LocalResources, aws_client: Any) -> None:
    # The runner's DynamoDBSaver finds the same lifecycle rule locally as deployed, so it writes none.
    stack = default_synth.stack
    assert stack.checkpoints.bucket is not None and resources.checkpoint_bucket is not None
    deployed = default_synth.resources("AWS::S3::Bucket")[
        logical_id(default_synth, stack.checkpoints.bucket)
    ]["Properties"]
    s3 = aws_client("s3")
    local_rules = s3.get_bucket_lifecycle_configuration(Bucket=resources.checkpoint_bucket)["Rules"]
    assert [
        (
            r["ID"],
            r["Status"],
            r["Expiration"]["Days"],
            r["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"],
        )
        for r in local_rules
    ] == [
        (
            r["Id"],
            r["Status"],
            r["ExpirationInDays"],
            r["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"],
        )
        for r in deployed["LifecycleConfiguration"]["Rules"]
    ]
    local_block = s3.get_public_access_block(Bucket=resources.checkpoint_bucket)[
        "PublicAccessBlockConfiguration"
    ]
    assert local_block == deployed["PublicAccessBlockConfiguration"]
    assert resources.checkpoint_bucket.endswith(CHECKPOINT_BUCKET.name)


def test_the_ledger_streams_mapping_is_the_one_the_local_reader_plays(default_synth: Synth) -> None:
    """The local stack reads the ledger's stream with ``DISPATCHER``'s settings: so does the mapping."""
    from wait_service.resources import DISPATCHER, DISPATCHER_MAX_RECORD_AGE_SECONDS, LEDGER

    stack = default_synth.stack
    ledger_id = logical_id(default_synth, stack.ledger.table)
    [mapping] = [
        resource["Properties"]
        for resource in default_synth.resources("AWS::Lambda::EventSourceMapping").values()
        if resource["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [ledger_id, "StreamArn"]}
    ]
    assert LEDGER.stream_view_type == "NEW_AND_OLD_IMAGES"
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    assert mapping["BatchSize"] == DISPATCHER.batch_size
    assert mapping["BisectBatchOnFunctionError"] is DISPATCHER.bisect_on_error
    assert mapping["MaximumRetryAttempts"] == DISPATCHER.max_retry_attempts
    assert mapping["MaximumRecordAgeInSeconds"] == DISPATCHER_MAX_RECORD_AGE_SECONDS
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    dlq_id = logical_id(default_synth, stack.dispatcher.dlq)
    assert mapping["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": [dlq_id, "Arn"]}


def test_webhook_queues_and_subscriptions_match(signed_synth: Synth, aws_client: Any) -> None:
    # `agent-wait local --webhook` and context `webhooks` build the same delivery queues, DLQ and
    # raw, type-filtered subscriptions (signed_synth configures conftest.WEBHOOKS).
    from wait_service.resources import create_resources, create_webhook_queues

    sqs, sns = aws_client("sqs"), aws_client("sns")
    local = create_resources(aws_client("dynamodb"), sqs, sns, prefix="t-wh-")
    types = [tuple(hook["types"]) for hook in WEBHOOKS]
    created = create_webhook_queues(sqs, sns, local.topic_arn, types, prefix="t-wh-")
    hooks = signed_synth.stack.webhooks
    assert hooks is not None
    queues = signed_synth.resources("AWS::SQS::Queue")
    subscriptions = {
        s["Endpoint"]: sns.get_subscription_attributes(SubscriptionArn=s["SubscriptionArn"])["Attributes"]
        for s in sns.list_subscriptions_by_topic(TopicArn=local.topic_arn)["Subscriptions"]
    }
    deployed_subscriptions = {
        json.dumps(s["Properties"]["Endpoint"]): s["Properties"]
        for s in signed_synth.resources("AWS::SNS::Subscription").values()
    }
    for (url, arn), construct in zip(created.queues, hooks.queues, strict=True):
        deployed = queues[logical_id(signed_synth, construct)]["Properties"]
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert "FifoQueue" not in attributes and "FifoQueue" not in deployed
        assert attributes["VisibilityTimeout"] == str(deployed["VisibilityTimeout"])
        assert attributes["MessageRetentionPeriod"] == str(deployed["MessageRetentionPeriod"])
        assert (
            json.loads(attributes["RedrivePolicy"])["maxReceiveCount"]
            == deployed["RedrivePolicy"]["maxReceiveCount"]
        )
        assert url.rsplit("/", 1)[1].removeprefix("t-wh-") == deployed["QueueName"].removeprefix("aw-signed-")
        subscription = subscriptions[arn]
        template = deployed_subscriptions[
            json.dumps({"Fn::GetAtt": [logical_id(signed_synth, construct), "Arn"]})
        ]
        assert subscription["RawMessageDelivery"] == "true" and template["RawMessageDelivery"] is True
        assert json.loads(subscription["FilterPolicy"]) == template["FilterPolicy"]
    dlq = queues[logical_id(signed_synth, hooks.dlq)]["Properties"]
    assert created.dlq_url.rsplit("/", 1)[1].removeprefix("t-wh-") == dlq["QueueName"].removeprefix(
        "aw-signed-"
    )
    dlq_attributes = sqs.get_queue_attributes(QueueUrl=created.dlq_url, AttributeNames=["All"])["Attributes"]
    assert dlq_attributes["MessageRetentionPeriod"] == str(dlq["MessageRetentionPeriod"])
