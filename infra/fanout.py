"""Fan-out of ``wait.created``: the SNS topic (KMS, TLS only) and the FIFO outbox queue with its DLQ."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.specs import fifo_queue_from_spec
from wait_service.resources import OUTBOX, TOPIC

if TYPE_CHECKING:
    from collections.abc import Sequence

# What a consumer in another account calls to read the outbox (receive, delete, keep hidden, look up).
OUTBOX_CONSUME_ACTIONS = (
    "sqs:ChangeMessageVisibility",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
    "sqs:GetQueueUrl",
    "sqs:ReceiveMessage",
)


class Fanout(Construct):
    """The ``wait-created`` standard topic and ``outbox.fifo`` (+ ``outbox-dlq.fifo``).

    The topic is standard, not FIFO, so HTTPS endpoints, email, Lambda and standard SQS queues can
    subscribe; ordering and exactly-once for machine consumers come from the outbox queue, whose
    deduplication id is the envelope's ``dedupe_key`` (content-based deduplication off).

    Examples
    --------
    >>> fanout = Fanout(stack, "Fanout", prefix="agent-wait-")  # doctest: +SKIP
    >>> fanout.topic.topic_arn, fanout.outbox.queue_url  # doctest: +SKIP
    """

    def __init__(self, scope: Construct, construct_id: str, *, prefix: str) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "TopicKey",
            description="Encrypts the wait-created topic",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.topic = sns.Topic(
            self,
            TOPIC.logical_id,
            topic_name=prefix + TOPIC.name,
            display_name="agent-wait: a question is waiting for an answer",
            master_key=self.key,
            enforce_ssl=True,
        )
        self.outbox: sqs.Queue
        self.outbox_dlq: sqs.Queue
        self.outbox, self.outbox_dlq = fifo_queue_from_spec(self, OUTBOX, prefix=prefix)

    def share_with(self, accounts: Sequence[str]) -> None:
        """Let ``accounts`` subscribe to the topic and read the outbox (context ``subscriber_accounts``).

        Each account still grants its own principals these actions; the resource policies here are
        the half the stack owns.
        """
        if not accounts:
            return
        principals = [iam.AccountPrincipal(account) for account in accounts]
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="SubscriberAccountsSubscribe",
                principals=principals,
                actions=["sns:Subscribe"],
                resources=[self.topic.topic_arn],
            )
        )
        self.outbox.add_to_resource_policy(
            iam.PolicyStatement(
                sid="SubscriberAccountsRead",
                principals=principals,
                actions=list(OUTBOX_CONSUME_ACTIONS),
                resources=[self.outbox.queue_arn],
            )
        )
