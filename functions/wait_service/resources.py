"""The resources agent-wait needs, as plain data.

The CDK constructs (``infra/``) and the local stack (``agent_wait_cli.local``) both build from these
specs, so what a user deploys and what ``make demo`` runs on cannot drift apart;
``tests/infra/test_local_matches_template.py`` checks the synthesized template against them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from wait_service.answer_limits import MAX_ANSWER_BYTES_WITHOUT_OFFLOAD

# Re-exported: the infrastructure reads them here, beside the specs.
from wait_service.constants import (  # noqa: F401
    API_TIMEOUT_SECONDS,
    DISPATCHER_BATCH_SIZE,
    DISPATCHER_MAX_BATCHING_WINDOW_SECONDS,
    DISPATCHER_MAX_RECORD_AGE_SECONDS,
    DISPATCHER_MAX_RETRY_ATTEMPTS,
    DISPATCHER_TIMEOUT_SECONDS,
    INBOX_VISIBILITY_SECONDS,
    LIFECYCLE_TIMEOUT_SECONDS,
    LISTED_ATTRIBUTES,
    MAX_RECEIVE_COUNT,
    RUNNER_BATCH_SIZE,
    RUNNER_TIMEOUT_SECONDS,
    TTL_DAYS,
    TTL_DELETION_LAG_DAYS,
    WEBHOOK_BATCH_SIZE,
    WEBHOOK_MAX_ATTEMPTS,
    WEBHOOK_TIMEOUT_SECONDS,
    WEBHOOK_VISIBILITY_SECONDS,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient


@dataclass(frozen=True)
class Index:
    """A global secondary index; ``include`` names the non-key attributes it projects.

    An index stores (and writes, on every change of them) what it projects: it projects only what
    its queries read. ``None`` projects every attribute; ``()`` the keys alone (``KEYS_ONLY``).
    """

    name: str
    partition_key: str
    sort_key: str
    include: tuple[str, ...] | None = None

    def projection(self) -> dict[str, Any]:
        """The projection as DynamoDB's API and CloudFormation spell it."""
        if self.include is None:
            return {"ProjectionType": "ALL"}
        if not self.include:
            return {"ProjectionType": "KEYS_ONLY"}
        return {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(self.include)}


@dataclass(frozen=True)
class TableSpec:
    """A DynamoDB table: string keys, on-demand billing."""

    logical_id: str
    partition_key: str
    sort_key: str | None = None
    indexes: tuple[Index, ...] = ()
    ttl_attribute: str | None = None
    # A DynamoDB stream of the table's changes (``NEW_AND_OLD_IMAGES``, ...); ``None``: no stream.
    stream_view_type: str | None = None

    def key_schema(self) -> list[dict[str, str]]:
        keys = [{"AttributeName": self.partition_key, "KeyType": "HASH"}]
        if self.sort_key:
            keys.append({"AttributeName": self.sort_key, "KeyType": "RANGE"})
        return keys

    def global_secondary_indexes(self) -> list[dict[str, Any]]:
        """The indexes as DynamoDB's API and CloudFormation spell them."""
        return [
            {
                "IndexName": index.name,
                "KeySchema": [
                    {"AttributeName": index.partition_key, "KeyType": "HASH"},
                    {"AttributeName": index.sort_key, "KeyType": "RANGE"},
                ],
                "Projection": index.projection(),
            }
            for index in self.indexes
        ]

    def attribute_names(self) -> list[str]:
        names = [self.partition_key] + ([self.sort_key] if self.sort_key else [])
        for index in self.indexes:
            names += [index.partition_key, index.sort_key]
        return sorted(set(names))


@dataclass(frozen=True)
class QueueSpec:
    """A FIFO queue with a dead-letter queue; content-based deduplication off.

    High-throughput mode (deduplication and the throughput limit per message group): a FIFO queue
    in the default mode takes 300 calls per second per action (3,000 messages with batching) for the
    whole queue; in this mode the limit applies per message group, and every group is one thread,
    so the queue scales with the number of threads while the order within a thread is kept.
    Deduplication per group is what the ids need: a ``dedupe_key`` or run id never repeats in
    another thread's group.
    """

    logical_id: str
    name: str
    dlq_name: str
    max_receive_count: int
    visibility_timeout: int
    retention_seconds: int = 14 * 24 * 3600

    # What a message in its DLQ is (``agent-wait dlq list`` and the runbook say it).
    dlq_holds: str = "messages that failed every receive"

    def attributes(self) -> dict[str, str]:
        return {
            "FifoQueue": "true",
            "ContentBasedDeduplication": "false",
            "DeduplicationScope": "messageGroup",
            "FifoThroughputLimit": "perMessageGroupId",
            "VisibilityTimeout": str(self.visibility_timeout),
            "MessageRetentionPeriod": str(self.retention_seconds),
        }


RedriveKind = Literal["queue", "lambda-destination", "scheduler-target", "stream-batch"]


@dataclass(frozen=True)
class DeadLetterSpec:
    """A dead-letter queue of the stack, and how a message in it goes back to work.

    ``redrive``:

    - ``queue``: the message is a message of the queue ``source`` (``<prefix><source>``) that failed
      every receive; it is sent back there as it was (body, and on FIFO its group and
      deduplication id).
    - ``lambda-destination``: the message is a Lambda on-failure destination record of the
      function ``source`` (``<prefix><source>``); its ``requestPayload`` is invoked again,
      asynchronously, as the first invocation was.
    - ``scheduler-target``: the message is an EventBridge Scheduler dead letter: its body is the
      input the schedule gave the function ``source`` (``<prefix><source>``), which is invoked
      with it again, asynchronously, as the schedule would have.
    - ``stream-batch``: the message is a stream event source mapping's on-failure record: where
      the failed records are in the stream (``DDBStreamBatchInfo``), not the records.

    Every DLQ of the stack is one of these; :func:`dead_letter_queues` lists them all, so
    ``agent-wait dlq`` and the runbook need no list of their own.
    """

    name: str
    queue_name: str
    redrive: RedriveKind
    source: str
    holds: str

    @property
    def fifo(self) -> bool:
        return self.queue_name.endswith(".fifo")


@dataclass(frozen=True)
class BucketSpec:
    """A private bucket whose objects expire ``expiration_days`` after they were written.

    ``rule_id`` names the expiration rule; incomplete multipart uploads are aborted after a day.
    """

    logical_id: str
    name: str
    rule_id: str
    expiration_days: int

    def lifecycle_rules(self) -> list[dict[str, Any]]:
        """The rules as S3's ``PutBucketLifecycleConfiguration`` spells them."""
        return [
            {
                "ID": self.rule_id,
                "Status": "Enabled",
                "Filter": {"Prefix": ""},
                "Expiration": {"Days": self.expiration_days},
                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
            }
        ]


@dataclass(frozen=True)
class WebhookQueueSpec:
    """The delivery queues of webhooks: one standard queue per webhook, one shared standard DLQ.

    Queue ``n`` (from 1) is named ``<name>-<n>`` and subscribed to the topic with raw message
    delivery and a filter policy on the ``type`` message attribute. A message is received at most
    ``max_receive_count`` times (the delivery function moves it to the DLQ itself after its last
    attempt; the redrive policy catches a function that failed instead).
    """

    logical_id: str
    name: str
    dlq_logical_id: str
    dlq_name: str
    max_receive_count: int
    visibility_timeout: int
    retention_seconds: int = 14 * 24 * 3600

    def queue_name(self, number: int) -> str:
        return f"{self.name}-{number}"

    def attributes(self) -> dict[str, str]:
        return {
            "VisibilityTimeout": str(self.visibility_timeout),
            "MessageRetentionPeriod": str(self.retention_seconds),
        }

    @staticmethod
    def filter_policy(types: tuple[str, ...]) -> dict[str, list[str]] | None:
        """The subscription's filter policy for ``types`` (``None``: every event)."""
        return {"type": sorted(types)} if types else None


@dataclass(frozen=True)
class TopicSpec:
    logical_id: str
    name: str


@dataclass(frozen=True)
class ScheduleGroupSpec:
    """An EventBridge Scheduler group holding the one-shot timers of questions.

    Every schedule in it carries a retry policy and a dead-letter queue (``dlq_name``, a standard
    queue: Scheduler sends to no FIFO queue): an invocation of the lifecycle function that Scheduler
    still cannot make after ``retry_attempts`` retries or ``max_event_age_seconds`` lands there
    instead of vanishing. The limits are Scheduler's largest: a late timer changes nothing (the
    lifecycle acts through conditional writes), a lost one leaves a question open forever.
    """

    logical_id: str
    name: str
    dlq_logical_id: str
    dlq_name: str
    retry_attempts: int = 185
    max_event_age_seconds: int = 24 * 3600
    dlq_retention_seconds: int = 14 * 24 * 3600

    def retry_policy(self) -> dict[str, int]:
        """The schedules' ``RetryPolicy`` as Scheduler's API spells it."""
        return {
            "MaximumRetryAttempts": self.retry_attempts,
            "MaximumEventAgeInSeconds": self.max_event_age_seconds,
        }


LEDGER = TableSpec(
    logical_id="Ledger",
    partition_key="dedupe_key",
    indexes=(
        # Keyed on `status_shard` (`<listing>#<n>`), not `status`: its writes spread over sixteen
        # partitions per status (wait_service.ledger.shards says why sixteen).
        Index("by-status", "status_shard", "created_at", include=LISTED_ATTRIBUTES),
        # Keys only: a thread's questions are listed rarely, and read from the table by their keys
        # (wait_service.ledger.paging), so a question's moves never write this index: its entry is
        # written once, when the question is recorded.
        Index("by-thread", "thread_id", "created_at", include=()),
    ),
    ttl_attribute="expires_ttl",
    # The ledger's stream drives everything that follows a recorded decision or start: the
    # dispatcher (``wait_service.stream.ledger_stream``) reads both images of every change.
    stream_view_type="NEW_AND_OLD_IMAGES",
)
# The policy store (wait_service.answers.policy_store): per function, one item per version of its policy
# override, the sort key zero-padded so the latest sorts last. Never expires: it is the history of
# who changed which policy when.
POLICIES = TableSpec(logical_id="Policies", partition_key="function_name", sort_key="version")
# The approval analytics' counters and their once-only markers (wait_service.stream.analytics says why a
# table of their own, and how its keys spread the writes).
STATS = TableSpec(logical_id="Stats", partition_key="pk", sort_key="sk", ttl_attribute="expires_ttl")
# The single-table layout langgraph-checkpoint-aws's DynamoDBSaver reads and writes.
CHECKPOINTS = TableSpec(logical_id="Checkpoints", partition_key="PK", sort_key="SK", ttl_attribute="ttl")
# langgraph-checkpoint-dynamodb 0.1.0 (optional backend): two tables keyed as its saver reads and
# writes them (the tables its README, shipped as the package's metadata, describes; the package has
# no helper that creates them). Checkpoints: one partition per thread, sorted by checkpoint id (the
# latest is the last). Writes: one partition per checkpoint (`thread:::checkpoint:::namespace`), one
# item per `task:::index`. The package writes no TTL attribute: wait_service.runs.checkpointer stamps
# `ttl` on every item it puts, so these items expire with the ledger too.
CHECKPOINTS_DYNAMODB = TableSpec(
    logical_id="CheckpointsLegacy",
    partition_key="thread_id",
    sort_key="checkpoint_id",
    ttl_attribute="ttl",
)
CHECKPOINT_WRITES_DYNAMODB = TableSpec(
    logical_id="CheckpointWritesLegacy",
    partition_key="thread_id_checkpoint_id_checkpoint_ns",
    sort_key="task_id_idx",
    ttl_attribute="ttl",
)
# Where DynamoDBSaver offloads checkpoint payloads over 350 KB. Every object is written with its
# checkpoint item (a rewrite of the item rewrites the object), so expiring objects after the items'
# TTL plus the deletion lag never removes what a readable item points to. The rule carries the id
# DynamoDBSaver gives its own TTL rule (`root-ttl-expiration-<days>d`): finding it, the saver leaves
# the bucket's lifecycle as deployed instead of adding a shorter rule of its own.
CHECKPOINT_BUCKET = BucketSpec(
    logical_id="Bucket",
    name="checkpoints",
    rule_id=f"root-ttl-expiration-{TTL_DAYS}d",
    expiration_days=TTL_DAYS + TTL_DELETION_LAG_DAYS,
)

INBOX = QueueSpec(
    logical_id="Inbox",
    name="inbox.fifo",
    dlq_name="inbox-dlq.fifo",
    max_receive_count=MAX_RECEIVE_COUNT,
    visibility_timeout=INBOX_VISIBILITY_SECONDS,
    dlq_holds="runs and resumes the runner failed on every attempt (their question is resume_failed)",
)
OUTBOX = QueueSpec(
    logical_id="Outbox",
    name="outbox.fifo",
    dlq_name="outbox-dlq.fifo",
    max_receive_count=MAX_RECEIVE_COUNT,
    visibility_timeout=60,
    dlq_holds="wait.created envelopes a subscriber of the outbox failed to take",
)
TOPIC = TopicSpec(logical_id="WaitCreated", name="wait-created")


@dataclass(frozen=True)
class StreamConsumerSpec:
    """A function reading a table's stream as Lambda's event source mapping hands it over.

    ``max_retry_attempts`` retries of a failing batch (split in two each time with
    ``bisect_on_error``), then the record's metadata goes to the standard queue ``dlq_name``.
    """

    logical_id: str
    dlq_name: str
    batch_size: int
    max_retry_attempts: int
    bisect_on_error: bool = True
    # How long the mapping gathers records into a batch (0: each batch as soon as records arrive).
    max_batching_window_seconds: int = 0


# The ledger stream's one reader: the outbox dispatcher (and whatever else plugs into its consumers).
DISPATCHER = StreamConsumerSpec(
    logical_id="Dispatcher",
    dlq_name="ledger-stream-dlq",
    batch_size=DISPATCHER_BATCH_SIZE,
    max_retry_attempts=DISPATCHER_MAX_RETRY_ATTEMPTS,
    max_batching_window_seconds=DISPATCHER_MAX_BATCHING_WINDOW_SECONDS,
)
TIMERS = ScheduleGroupSpec(
    logical_id="Timers", name="timers", dlq_logical_id="ScheduleDlq", dlq_name="timers-dlq"
)
# The lifecycle function's on-failure destination: a timer whose invocation failed Lambda's retries.
LIFECYCLE_FUNCTION = "lifecycle"
LIFECYCLE_DLQ = DeadLetterSpec(
    name="lifecycle",
    queue_name="lifecycle-dlq",
    redrive="lambda-destination",
    source=LIFECYCLE_FUNCTION,
    holds="timers (expiry, escalation, reminder) the lifecycle function failed on every attempt",
)


def dead_letter_queues() -> tuple[DeadLetterSpec, ...]:
    """Every DLQ the stack has: each :class:`QueueSpec`'s and each :class:`DeadLetterSpec` here.

    Read from this module's specs, so a queue or destination added here is listed (and redriven)
    by ``agent-wait dlq`` without another edit.

    Examples
    --------
    >>> [dlq.name for dlq in dead_letter_queues()]
    ['inbox', 'outbox', 'ledger-stream', 'timers', 'lifecycle']
    """
    found: dict[str, DeadLetterSpec] = {}
    for value in list(globals().values()):
        if isinstance(value, QueueSpec):
            spec = DeadLetterSpec(
                name=value.name.removesuffix(".fifo"),
                queue_name=value.dlq_name,
                redrive="queue",
                source=value.name,
                holds=value.dlq_holds,
            )
        elif isinstance(value, StreamConsumerSpec):
            spec = DeadLetterSpec(
                name=value.dlq_name.removesuffix("-dlq"),
                queue_name=value.dlq_name,
                redrive="stream-batch",
                source=value.logical_id.lower(),
                holds="where in the ledger's stream the records are that its reader failed on every retry",
            )
        elif isinstance(value, ScheduleGroupSpec):
            spec = DeadLetterSpec(
                name=value.dlq_name.removesuffix("-dlq"),
                queue_name=value.dlq_name,
                redrive="scheduler-target",
                source=LIFECYCLE_FUNCTION,
                holds="timers (expiry, escalation, reminder) Scheduler could not invoke the lifecycle with",
            )
        elif isinstance(value, DeadLetterSpec):
            spec = value
        else:
            continue
        found.setdefault(spec.queue_name, spec)
    return tuple(found.values())


WEBHOOK_QUEUES = WebhookQueueSpec(
    logical_id="WebhookQueue",
    name="webhook",
    dlq_logical_id="WebhookDlq",
    dlq_name="webhooks-dlq",
    max_receive_count=WEBHOOK_MAX_ATTEMPTS,
    visibility_timeout=WEBHOOK_VISIBILITY_SECONDS,
)
# The local stack's stand-ins for what the stack deploys: the lifecycle function the timers invoke
# and the role they invoke it with (moto stores them; the local clock invokes the handler itself).
LOCAL_ACCOUNT = "123456789012"


@dataclass
class LocalResources:
    """Names and addresses of the resources created by :func:`create_resources`."""

    ledger_table: str
    checkpoint_table: str
    inbox_url: str
    inbox_arn: str
    inbox_dlq_url: str
    outbox_url: str
    outbox_dlq_url: str
    topic_arn: str
    subscriber_url: str
    schedule_group: str | None = None
    lifecycle_arn: str | None = None
    scheduler_role_arn: str | None = None
    schedule_dlq_url: str | None = None
    schedule_dlq_arn: str | None = None
    checkpoint_bucket: str | None = None
    checkpointer: str = "aws"
    checkpoint_writes_table: str | None = None
    # The lifecycle function's on-failure destination (the local clock sends its records there).
    lifecycle_dlq_url: str | None = None
    # The ledger's stream, and the standard queue that takes the records its reader gave up on.
    ledger_stream_arn: str | None = None
    stream_dlq_url: str | None = None
    # The policy store's table (per-function policy overrides).
    policy_table: str | None = None
    stats_table: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        """The environment the Lambdas get from the stack, for these resources."""
        env = {
            "AGENT_WAIT_LEDGER_TABLE": self.ledger_table,
            "AGENT_WAIT_CHECKPOINT_TABLE": self.checkpoint_table,
            "AGENT_WAIT_INBOX_URL": self.inbox_url,
            "AGENT_WAIT_OUTBOX_URL": self.outbox_url,
            "AGENT_WAIT_TOPIC_ARN": self.topic_arn,
            "AGENT_WAIT_LEDGER_TTL_DAYS": str(TTL_DAYS),
            "AGENT_WAIT_CHECKPOINTER": self.checkpointer,
        }
        if self.policy_table:
            # Read on every question locally: a set is seen by the very next one.
            env["AGENT_WAIT_POLICY_TABLE"] = self.policy_table
            env["AGENT_WAIT_POLICY_CACHE_SECONDS"] = "0"
        if self.stats_table:
            env["AGENT_WAIT_STATS_TABLE"] = self.stats_table
        if self.checkpoint_writes_table:
            env["AGENT_WAIT_CHECKPOINT_WRITES_TABLE"] = self.checkpoint_writes_table
        if self.schedule_group and self.lifecycle_arn and self.scheduler_role_arn:
            env |= {
                "AGENT_WAIT_SCHEDULE_GROUP": self.schedule_group,
                "AGENT_WAIT_LIFECYCLE_ARN": self.lifecycle_arn,
                "AGENT_WAIT_SCHEDULER_ROLE_ARN": self.scheduler_role_arn,
            }
            if self.schedule_dlq_arn:
                env["AGENT_WAIT_SCHEDULE_DLQ_ARN"] = self.schedule_dlq_arn
        if self.checkpoint_bucket:
            env["AGENT_WAIT_CHECKPOINT_BUCKET"] = self.checkpoint_bucket
        if self.checkpointer == "dynamodb":
            # As the stack configures the api: with no offload an answer must fit in a checkpoint
            # item beside the state.
            env["AGENT_WAIT_MAX_ANSWER_BYTES"] = str(MAX_ANSWER_BYTES_WITHOUT_OFFLOAD)
        return env


def create_table(client: DynamoDBClient, spec: TableSpec, name: str) -> str:
    """Create ``spec`` as table ``name`` (on-demand, TTL on) and wait until it is active."""
    kwargs: dict[str, Any] = {
        "TableName": name,
        "KeySchema": spec.key_schema(),
        "AttributeDefinitions": [
            {"AttributeName": attr, "AttributeType": "S"} for attr in spec.attribute_names()
        ],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if spec.indexes:
        kwargs["GlobalSecondaryIndexes"] = spec.global_secondary_indexes()
    if spec.stream_view_type:
        kwargs["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": spec.stream_view_type}
    client.create_table(**kwargs)
    # botocore sleeps a float; the stub's int would make moto's instant tables wait a whole second.
    client.get_waiter("table_exists").wait(
        TableName=name,
        WaiterConfig={"Delay": 0.1, "MaxAttempts": 50},  # type: ignore[typeddict-item]
    )
    if spec.ttl_attribute:
        client.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": spec.ttl_attribute},
        )
    return name


def create_queue(client: SQSClient, spec: QueueSpec, prefix: str) -> tuple[str, str, str]:
    """Create the DLQ and the queue with its redrive policy; returns (url, arn, dlq_url)."""
    dlq_url = client.create_queue(
        QueueName=prefix + spec.dlq_name,
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"},
    )["QueueUrl"]
    dlq_arn = client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    attributes = spec.attributes() | {
        "RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": spec.max_receive_count}
        )
    }
    url = client.create_queue(QueueName=prefix + spec.name, Attributes=attributes)["QueueUrl"]  # type: ignore[arg-type]
    arn = client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn, dlq_url


@dataclass
class LocalWebhookQueues:
    """The delivery queues :func:`create_webhook_queues` made: (url, arn) per webhook, and the DLQ."""

    queues: list[tuple[str, str]]
    dlq_url: str


def create_webhook_queues(
    sqs: SQSClient, sns: SNSClient, topic_arn: str, types: list[tuple[str, ...]], prefix: str = "agent-wait-"
) -> LocalWebhookQueues:
    """One delivery queue per entry of ``types`` (its event types; empty: all), subscribed to the topic."""
    spec = WEBHOOK_QUEUES
    dlq_url = sqs.create_queue(
        QueueName=prefix + spec.dlq_name,
        Attributes={"MessageRetentionPeriod": str(spec.retention_seconds)},
    )["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    queues: list[tuple[str, str]] = []
    for number, wanted in enumerate(types, start=1):
        attributes = spec.attributes() | {
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": spec.max_receive_count}
            )
        }
        url = sqs.create_queue(QueueName=prefix + spec.queue_name(number), Attributes=attributes)["QueueUrl"]  # type: ignore[arg-type]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        subscription = {"RawMessageDelivery": "true"}
        policy = spec.filter_policy(wanted)
        if policy is not None:
            subscription["FilterPolicy"] = json.dumps(policy)
        sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=arn, Attributes=subscription)
        queues.append((url, arn))
    return LocalWebhookQueues(queues=queues, dlq_url=dlq_url)


def create_bucket(client: S3Client, spec: BucketSpec, name: str) -> str:
    """Create ``spec`` as bucket ``name``, with its lifecycle rules and public access blocked."""
    client.create_bucket(Bucket=name)
    client.put_public_access_block(
        Bucket=name,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
    )
    client.put_bucket_lifecycle_configuration(
        Bucket=name,
        LifecycleConfiguration={"Rules": spec.lifecycle_rules()},  # type: ignore[typeddict-item]
    )
    return name


def create_resources(
    dynamodb: DynamoDBClient,
    sqs: SQSClient,
    sns: SNSClient,
    prefix: str = "agent-wait-",
    *,
    scheduler: EventBridgeSchedulerClient | None = None,
    s3: S3Client | None = None,
    checkpointer: str = "aws",
) -> LocalResources:
    """Create the ledger, checkpoint table(s) (and bucket, given ``s3``), inbox, outbox and topic (and,
    given a ``scheduler`` client, the timers' schedule group) from the specs above; and the policy store.

    ``checkpointer`` picks the checkpoint tables as the stack's ``checkpointer`` context does:
    ``aws`` (one table, and the bucket given ``s3``) or ``dynamodb`` (its two tables, no bucket:
    that saver cannot offload).

    A standard SQS queue ``<prefix>subscriber`` is subscribed to the topic with raw delivery, so
    that the local stack and tests can see an envelope exactly as a downstream subscriber does.
    """
    if checkpointer not in ("aws", "dynamodb"):
        raise ValueError(f"checkpointer must be 'aws' or 'dynamodb', not {checkpointer!r}")
    ledger = create_table(dynamodb, LEDGER, prefix + "ledger")
    policies = create_table(dynamodb, POLICIES, prefix + "policies")
    stream_arn = dynamodb.describe_table(TableName=ledger)["Table"].get("LatestStreamArn")
    stream_dlq_url = sqs.create_queue(QueueName=prefix + DISPATCHER.dlq_name)["QueueUrl"]
    stats = create_table(dynamodb, STATS, prefix + "stats")
    writes: str | None = None
    bucket: str | None = None
    if checkpointer == "dynamodb":
        checkpoints = create_table(dynamodb, CHECKPOINTS_DYNAMODB, prefix + "checkpoints")
        writes = create_table(dynamodb, CHECKPOINT_WRITES_DYNAMODB, prefix + "checkpoint-writes")
    else:
        checkpoints = create_table(dynamodb, CHECKPOINTS, prefix + "checkpoints")
        if s3 is not None:
            bucket = create_bucket(s3, CHECKPOINT_BUCKET, prefix + CHECKPOINT_BUCKET.name)
    inbox_url, inbox_arn, inbox_dlq_url = create_queue(sqs, INBOX, prefix)
    outbox_url, _, outbox_dlq_url = create_queue(sqs, OUTBOX, prefix)
    topic_arn = sns.create_topic(Name=prefix + TOPIC.name)["TopicArn"]
    subscriber_url = sqs.create_queue(QueueName=prefix + "subscriber")["QueueUrl"]
    subscriber_arn = sqs.get_queue_attributes(QueueUrl=subscriber_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    sns.subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=subscriber_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    lifecycle_dlq_url = sqs.create_queue(QueueName=prefix + LIFECYCLE_DLQ.queue_name)["QueueUrl"]
    group = lifecycle_arn = scheduler_role_arn = schedule_dlq_url = schedule_dlq_arn = None
    if scheduler is not None:
        group = prefix + TIMERS.name
        scheduler.create_schedule_group(Name=group)
        schedule_dlq_url = sqs.create_queue(
            QueueName=prefix + TIMERS.dlq_name,
            Attributes={"MessageRetentionPeriod": str(TIMERS.dlq_retention_seconds)},
        )["QueueUrl"]
        schedule_dlq_arn = sqs.get_queue_attributes(QueueUrl=schedule_dlq_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        region = scheduler.meta.region_name
        lifecycle_arn = f"arn:aws:lambda:{region}:{LOCAL_ACCOUNT}:function:{prefix}{LIFECYCLE_FUNCTION}"
        scheduler_role_arn = f"arn:aws:iam::{LOCAL_ACCOUNT}:role/{prefix}scheduler"
    return LocalResources(
        schedule_group=group,
        lifecycle_arn=lifecycle_arn,
        scheduler_role_arn=scheduler_role_arn,
        schedule_dlq_url=schedule_dlq_url,
        schedule_dlq_arn=schedule_dlq_arn,
        ledger_table=ledger,
        checkpoint_table=checkpoints,
        inbox_url=inbox_url,
        inbox_arn=inbox_arn,
        inbox_dlq_url=inbox_dlq_url,
        outbox_url=outbox_url,
        outbox_dlq_url=outbox_dlq_url,
        topic_arn=topic_arn,
        subscriber_url=subscriber_url,
        checkpoint_bucket=bucket,
        checkpointer=checkpointer,
        checkpoint_writes_table=writes,
        lifecycle_dlq_url=lifecycle_dlq_url,
        ledger_stream_arn=stream_arn,
        stream_dlq_url=stream_dlq_url,
        policy_table=policies,
        stats_table=stats,
    )
