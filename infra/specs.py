"""Build CDK tables and queues from the plain-data specs in ``wait_service.resources``.

The local stack creates its resources from the same specs (``wait_service.resources.create_resources``),
so key schemas, indexes, TTL attributes and FIFO/redrive settings are stated once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_sqs as sqs

from infra.nag import acknowledge

if TYPE_CHECKING:
    from constructs import Construct

    from wait_service.resources import QueueSpec, TableSpec


def _string(name: str) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=name, type=dynamodb.AttributeType.STRING)


def table_from_spec(
    scope: Construct, spec: TableSpec, *, removal_policy: cdk.RemovalPolicy
) -> dynamodb.Table:
    """An on-demand table with ``spec``'s keys, GSIs (each with its projection), TTL attribute and stream;
    PITR on.

    Examples
    --------
    >>> from wait_service.resources import LEDGER
    >>> table = table_from_spec(stack, LEDGER, removal_policy=cdk.RemovalPolicy.RETAIN)  # doctest: +SKIP
    """
    table = dynamodb.Table(
        scope,
        spec.logical_id,
        partition_key=_string(spec.partition_key),
        sort_key=_string(spec.sort_key) if spec.sort_key else None,
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        time_to_live_attribute=spec.ttl_attribute,
        stream=dynamodb.StreamViewType[spec.stream_view_type] if spec.stream_view_type else None,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        encryption=dynamodb.TableEncryption.AWS_MANAGED,
        removal_policy=removal_policy,
    )
    for index in spec.indexes:
        table.add_global_secondary_index(
            index_name=index.name,
            partition_key=_string(index.partition_key),
            sort_key=_string(index.sort_key),
            projection_type=dynamodb.ProjectionType[index.projection()["ProjectionType"]],
            non_key_attributes=list(index.include) if index.include else None,
        )
    return table


def fifo_queue_from_spec(scope: Construct, spec: QueueSpec, *, prefix: str) -> tuple[sqs.Queue, sqs.Queue]:
    """``spec``'s FIFO queue (high-throughput mode) and its FIFO DLQ (content-based deduplication
    off, SSE, TLS only).

    Both are named ``<prefix><spec name>`` as the local stack names them.

    Returns
    -------
    (queue, dlq)

    Examples
    --------
    >>> from wait_service.resources import INBOX
    >>> queue, dlq = fifo_queue_from_spec(stack, INBOX, prefix="agent-wait-")  # doctest: +SKIP
    """
    retention = cdk.Duration.seconds(spec.retention_seconds)
    dlq = sqs.Queue(
        scope,
        f"{spec.logical_id}Dlq",
        queue_name=prefix + spec.dlq_name,
        fifo=True,
        content_based_deduplication=False,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=retention,
    )
    acknowledge(
        dlq,
        "Serverless-SQSRedrivePolicy",
        f"{spec.dlq_name} is the dead-letter queue of {spec.name}: its messages wait for a human, "
        "not for another retry.",
    )
    queue = sqs.Queue(
        scope,
        spec.logical_id,
        queue_name=prefix + spec.name,
        fifo=True,
        content_based_deduplication=False,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=retention,
        visibility_timeout=cdk.Duration.seconds(spec.visibility_timeout),
        # High-throughput FIFO (the spec's attributes say why).
        deduplication_scope=sqs.DeduplicationScope.MESSAGE_GROUP,
        fifo_throughput_limit=sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
        dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=spec.max_receive_count),
    )
    return queue, dlq
