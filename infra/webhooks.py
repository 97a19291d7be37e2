"""Deployed webhooks (context ``webhooks``): delivery queues on the topic, the function, the DLQ.

One standard queue per webhook, subscribed to the topic with raw message delivery and a filter
policy on the ``type`` message attribute; one delivery function consuming them all (it finds the
webhook by the record's queue); one standard DLQ shared by the queues, alarmed like the others.
The retries are the queue's: the function sets a failed message's visibility to the backoff delay
(``wait_service.channels.webhooks``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants
from infra.functions import SECRET_READ_ACTIONS, ServiceFunction
from infra.nag import acknowledge
from infra.runner_config import secret_grant
from wait_service.channels.webhooks import WEBHOOK_DLQ_VARIABLE, WEBHOOKS_VARIABLE
from wait_service.resources import WEBHOOK_BATCH_SIZE, WEBHOOK_QUEUES, WEBHOOK_TIMEOUT_SECONDS

if TYPE_CHECKING:
    from infra.config import StackConfig, WebhookConfig
    from infra.fanout import Fanout
    from infra.layers import Layers

WEBHOOK_SOURCES = {"": "functions/webhooks", "wait_service": "functions/wait_service"}
# Exactly what the code calls: hide a failed message for its backoff delay; move a spent one to the DLQ.
DELIVERY_ACTIONS = ("sqs:ChangeMessageVisibility",)
DEAD_LETTER_ACTIONS = ("sqs:SendMessage",)
# What Lambda's event source mapping calls on each delivery queue with the function's role.
DELIVERY_CONSUME_ACTIONS = (
    "sqs:ChangeMessageVisibility",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
    "sqs:ReceiveMessage",
)


def secret_resource(stack: cdk.Stack, secret_name: str) -> str:
    """The IAM resource for the secret a webhook names: its ARN, or ``...:secret:<name>-??????``."""
    if secret_name.startswith("arn:"):
        return secret_grant(secret_name)
    return secret_grant(
        stack.format_arn(
            service="secretsmanager",
            resource="secret",
            resource_name=secret_name,
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
    )


class Webhooks(Construct):
    """The delivery queues, their DLQ and the delivery function of ``config.webhooks``.

    Examples
    --------
    >>> hooks = Webhooks(stack, "Webhooks", config=cfg, layers=layers, fanout=fanout,
    ...                  prefix="agent-wait-")  # doctest: +SKIP
    >>> hooks.dlq, hooks.queues, hooks.delivery.function  # doctest: +SKIP
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        layers: Layers,
        fanout: Fanout,
        prefix: str,
    ) -> None:
        super().__init__(scope, construct_id)
        spec = WEBHOOK_QUEUES
        retention = cdk.Duration.seconds(spec.retention_seconds)
        self.dlq = sqs.Queue(
            self,
            spec.dlq_logical_id,
            queue_name=prefix + spec.dlq_name,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=retention,
        )
        for rule in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"):
            acknowledge(
                self.dlq,
                rule,
                "This queue is itself the dead-letter queue of the webhook delivery queues: an event "
                "whose delivery ran out of attempts waits here for a human.",
            )
        self.queues: list[sqs.Queue] = []
        for number, hook in enumerate(config.webhooks, start=1):
            self.queues.append(self._delivery_queue(number, hook, fanout.topic, prefix))

        stack = cdk.Stack.of(self)
        hooks = [
            {
                "queue_url": queue.queue_url,
                "url": hook.url,
                "secret_name": hook.secret_name,
                "key_id": hook.key_id,
                "types": list(hook.types),
            }
            for queue, hook in zip(self.queues, config.webhooks, strict=True)
        ]
        self.delivery = ServiceFunction(
            self,
            "Delivery",
            sources=WEBHOOK_SOURCES,
            layers=layers.for_api,
            environment={
                WEBHOOKS_VARIABLE: stack.to_json_string(hooks),
                WEBHOOK_DLQ_VARIABLE: self.dlq.queue_url,
            },
            memory_mb=constants.API_MEMORY_MB,
            timeout_seconds=WEBHOOK_TIMEOUT_SECONDS,
            service=config.stack_name,
            description="agent-wait webhooks: signed POSTs of the topic's events, retried through the queue",
            system_log_level=config.lambda_system_log_level,
        )
        fn = self.delivery
        queue_arns = [queue.queue_arn for queue in self.queues]
        fn.allow(DELIVERY_CONSUME_ACTIONS, queue_arns)
        fn.allow(DEAD_LETTER_ACTIONS, [self.dlq.queue_arn])
        fn.allow(
            SECRET_READ_ACTIONS, sorted({secret_resource(stack, h.secret_name) for h in config.webhooks})
        )
        self.mappings = []
        for number, queue in enumerate(self.queues, start=1):
            mapping = lambda_.EventSourceMapping(
                self,
                f"Mapping{number}",
                target=fn.function,
                event_source_arn=queue.queue_arn,
                batch_size=WEBHOOK_BATCH_SIZE,
                report_batch_item_failures=True,
            )
            mapping.node.add_dependency(fn.role)
            acknowledge(
                mapping,
                "Serverless-LambdaEventSourceMappingDestination",
                "On-failure destinations exist only for stream and Kafka sources; the function moves a "
                "spent delivery to the webhooks DLQ, and the queue's redrive policy catches the rest.",
            )
            self.mappings.append(mapping)
        acknowledge(
            fn.function,
            "Serverless-LambdaDLQ",
            "The delivery function is invoked only by its queues' event source mappings (synchronously); "
            "a spent delivery goes to the webhooks DLQ.",
        )

    def _delivery_queue(self, number: int, hook: WebhookConfig, topic: sns.ITopic, prefix: str) -> sqs.Queue:
        spec = WEBHOOK_QUEUES
        queue = sqs.Queue(
            self,
            f"{spec.logical_id}{number}",
            queue_name=prefix + spec.queue_name(number),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.seconds(spec.retention_seconds),
            visibility_timeout=cdk.Duration.seconds(spec.visibility_timeout),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dlq, max_receive_count=spec.max_receive_count),
        )
        policy = spec.filter_policy(hook.types)
        topic.add_subscription(
            subscriptions.SqsSubscription(
                queue,
                raw_message_delivery=True,
                # An event SNS cannot hand to the delivery queue lands in the same alarmed DLQ.
                dead_letter_queue=self.dlq,
                filter_policy={"type": sns.SubscriptionFilter.string_filter(allowlist=sorted(hook.types))}
                if policy
                else None,
            )
        )
        return queue
