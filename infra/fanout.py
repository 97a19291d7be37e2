"""Fan-out of ``wait.created``: the SNS topic (KMS, TLS only) and the FIFO outbox queue with its DLQ."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.specs import fifo_queue_from_spec
from wait_service.resources import OUTBOX, TOPIC


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
