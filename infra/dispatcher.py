"""The dispatcher: the one reader of the ledger's stream (the outbox relay, the resolution events)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants
from infra.functions import (
    LEDGER_DISPATCHER_ACTIONS,
    STATS_DISPATCHER_ACTIONS,
    TOPIC_KEY_ACTIONS,
    ServiceFunction,
)
from infra.nag import acknowledge
from wait_service.resources import (
    DISPATCHER,
    DISPATCHER_MAX_RECORD_AGE_SECONDS,
    DISPATCHER_TIMEOUT_SECONDS,
)

if TYPE_CHECKING:
    from infra.config import StackConfig
    from infra.fanout import Fanout
    from infra.inbox import Inbox
    from infra.layers import Layers
    from infra.ledger import Ledger

DISPATCHER_SOURCES = {"": "functions/dispatcher", "wait_service": "functions/wait_service"}
# What Lambda's event source mapping calls on the stream with the function's role.
STREAM_READ_ACTIONS = (
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
)


class Dispatcher(Construct):
    """The dispatcher function on the ledger's stream, its event source mapping and its DLQ.

    The mapping hands over up to ``DISPATCHER.batch_size`` records at once, gathered for at most
    ``DISPATCHER.max_batching_window_seconds`` (a decision's resume leaves within a second or two
    of its write; under load the batches fill first), reports failed records
    (``ReportBatchItemFailures``), splits a failing batch in two on each retry, gives up on a record
    after ``DISPATCHER.max_retry_attempts`` retries or :data:`DISPATCHER_MAX_RECORD_AGE_SECONDS`,
    and then sends the record's metadata to ``ledger-stream-dlq`` (a standard queue: a stream
    mapping's on-failure destination cannot be FIFO).

    It also publishes the resolution events (``wait.answered`` ... ``thread.failed``) to the
    topic and the outbox: its role may publish there and use the topic's key.

    Examples
    --------
    >>> Dispatcher(stack, "Dispatcher", config=cfg, layers=layers, ledger=ledger, inbox=inbox,
    ...            fanout=fanout, prefix="agent-wait-")  # doctest: +SKIP
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        layers: Layers,
        ledger: Ledger,
        inbox: Inbox,
        fanout: Fanout,
        prefix: str,
    ) -> None:
        super().__init__(scope, construct_id)
        stream_arn = ledger.table.table_stream_arn
        assert stream_arn is not None, "the ledger's spec gives it a stream"
        self.stream_arn = stream_arn
        self.service = ServiceFunction(
            self,
            "Function",
            sources=DISPATCHER_SOURCES,
            layers=layers.for_api,
            environment={
                "AGENT_WAIT_LEDGER_TABLE": ledger.table.table_name,
                "AGENT_WAIT_INBOX_URL": inbox.queue.queue_url,
                "AGENT_WAIT_TOPIC_ARN": fanout.topic.topic_arn,
                "AGENT_WAIT_OUTBOX_URL": fanout.outbox.queue_url,
                "AGENT_WAIT_LEDGER_TTL_DAYS": str(constants.LEDGER_TTL_DAYS),
                "AGENT_WAIT_STATS_TABLE": ledger.stats.table_name,
                "AGENT_WAIT_LISTING_SHARDS": str(config.listing_shards),
            },
            memory_mb=constants.DISPATCHER_MEMORY_MB,
            timeout_seconds=DISPATCHER_TIMEOUT_SECONDS,
            service=config.stack_name,
            description="agent-wait dispatcher: enqueues starts and resumes, publishes resolution events",
            # Named: `agent-wait dlq redrive` invokes `<stack>-dispatcher` with a failed stream batch.
            function_name=prefix + DISPATCHER.logical_id.lower(),
            system_log_level=config.lambda_system_log_level,
        )
        fn = self.service
        self.function = fn.function
        self.role = fn.role
        fn.allow(LEDGER_DISPATCHER_ACTIONS, [ledger.table.table_arn])
        fn.allow(STREAM_READ_ACTIONS, [stream_arn])
        fn.allow(STATS_DISPATCHER_ACTIONS, [ledger.stats.table_arn])
        fn.allow(["sqs:SendMessage"], [inbox.queue.queue_arn])
        fn.allow(["sqs:SendMessage"], [fanout.outbox.queue_arn])
        fn.allow(["sns:Publish"], [fanout.topic.topic_arn])
        fn.allow(TOPIC_KEY_ACTIONS, [fanout.key.key_arn])

        self.dlq = sqs.Queue(
            self,
            "Dlq",
            queue_name=prefix + DISPATCHER.dlq_name,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(14),
        )
        for rule in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"):
            acknowledge(
                self.dlq,
                rule,
                "This queue is itself the on-failure destination of the ledger stream's mapping.",
            )
        self.mapping = lambda_.EventSourceMapping(
            self,
            "StreamMapping",
            target=self.function,
            event_source_arn=stream_arn,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=DISPATCHER.batch_size,
            max_batching_window=cdk.Duration.seconds(DISPATCHER.max_batching_window_seconds),
            bisect_batch_on_error=DISPATCHER.bisect_on_error,
            # Context dispatcher_parallelization: batches of a shard at once, each item's in order.
            parallelization_factor=config.dispatcher_parallelization,
            retry_attempts=DISPATCHER.max_retry_attempts,
            max_record_age=cdk.Duration.seconds(DISPATCHER_MAX_RECORD_AGE_SECONDS),
            report_batch_item_failures=True,
            on_failure=event_sources.SqsDlq(self.dlq),
        )
        self.mapping.node.add_dependency(self.role)
        acknowledge(
            self.function,
            "Serverless-LambdaDLQ",
            "The dispatcher is invoked only by the stream's event source mapping (synchronously); records "
            "that fail every retry go to ledger-stream-dlq, the mapping's on-failure destination.",
        )
