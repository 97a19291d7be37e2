"""The agent-wait stack: composes the constructs, wires them together, exports the outputs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam

from infra import constants
from infra.api import RestApi
from infra.archive import AuditArchive
from infra.audit_query import AuditQueries
from infra.checkpoints import Checkpoints
from infra.dispatcher import Dispatcher
from infra.fanout import Fanout
from infra.functions import ApiFunction, RunnerFunction, agent_framework
from infra.inbox import Inbox, inbox_visibility_seconds
from infra.layers import Layers
from infra.ledger import Ledger
from infra.observability import Observability, Watched, WatchedTable
from infra.operate import KEY_USE_ACTIONS, CustomerManagedKey, DeletionProtection
from infra.operators import OperatorPolicy
from infra.policies import PolicyStore
from infra.timers import Timers
from infra.webhooks import Webhooks
from wait_service.resources import LEDGER

if TYPE_CHECKING:
    from constructs import Construct

    from infra.config import StackConfig


class AgentWaitStack(cdk.Stack):
    """Everything one deployment of agent-wait needs.

    Parameters
    ----------
    config
        The settings read from CDK context (:class:`infra.config.StackConfig`).

    Examples
    --------
    >>> app = cdk.App()  # doctest: +SKIP
    >>> AgentWaitStack(app, "agent-wait", config=StackConfig())  # doctest: +SKIP
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        prefix = f"{config.stack_name}-"

        self.ledger = Ledger(self, "Ledger")
        self.checkpoints = Checkpoints(
            self, "Checkpoints", checkpointer=config.checkpointer, bucket=config.checkpoint_bucket
        )
        self.fanout = Fanout(self, "Fanout", prefix=prefix)
        self.inbox = Inbox(self, "Inbox", prefix=prefix, runner_timeout=config.runner_timeout)
        self.layers = Layers(
            self,
            "Layers",
            checkpointer=config.checkpointer,
            graph_requirements=config.graph_requirements,
            own_agent=config.graph_source is not None or config.graph_requirements is not None,
            framework=agent_framework(config),
        )

        self.api_function = ApiFunction(
            self, "ApiFunction", config=config, layers=self.layers, ledger=self.ledger
        )
        # The one reader of the ledger's stream: enqueues the start or resume every committed
        # request needs (and whatever else follows a ledger change).
        self.dispatcher = Dispatcher(
            self,
            "Dispatcher",
            config=config,
            layers=self.layers,
            ledger=self.ledger,
            inbox=self.inbox,
            fanout=self.fanout,
            prefix=prefix,
        )
        self.runner = RunnerFunction(
            self,
            "Runner",
            config=config,
            layers=self.layers,
            ledger=self.ledger,
            inbox=self.inbox,
            fanout=self.fanout,
            checkpoints=self.checkpoints,
        )
        self.timers = Timers(
            self,
            "Timers",
            config=config,
            layers=self.layers,
            ledger=self.ledger,
            fanout=self.fanout,
            prefix=prefix,
        )
        self.timers.allow_scheduling(self.runner)
        # Per-function policy overrides: the runner reads them, operators set them.
        self.policies = PolicyStore(self, "Policies")
        self.policies.readable_by(self.runner)
        self.inbox.only_senders([self.dispatcher.role], operators=config.operator_principals)
        self.archive = AuditArchive(
            self,
            "Archive",
            stack_name=config.stack_name,
            retention_days=config.audit_retention_days,
            object_lock=config.audit_object_lock,
        )
        self.archive.allow_put(self.dispatcher.service)
        self.operators = OperatorPolicy(
            self,
            "Operators",
            name=f"{config.stack_name}-operator",
            dlqs=[
                self.inbox.dlq,
                self.fanout.outbox_dlq,
                self.timers.dlq,
                self.timers.schedule_dlq,
                self.dispatcher.dlq,
            ],
            sources=[self.inbox.queue, self.fanout.outbox],
            functions=[self.timers.function_arn, self.dispatcher.function.function_arn],
            streams=[self.dispatcher.stream_arn],
            policy_tables=[self.policies.table.table_arn],
            stacks=[self.stack_id],
        )
        # Athena over the archive: the workgroup, the saved reports, and the operators' grants.
        self.audit_queries = AuditQueries(
            self,
            "AuditQueries",
            stack_name=config.stack_name,
            archive=self.archive,
            kms_key_arn=config.kms_key_arn,
        )
        self.audit_queries.grant_query(self.operators.policy)
        self.api = RestApi(self, "Api", config=config, handler=self.api_function.target)
        self.runner.set_reply_url(self.api.url)
        self.fanout.share_with(config.subscriber_accounts)
        self.webhooks: Webhooks | None = None
        if config.webhooks:
            self.webhooks = Webhooks(
                self, "Webhooks", config=config, layers=self.layers, fanout=self.fanout, prefix=prefix
            )
        self._apply_stack_wide(config)

        self.observability = Observability(
            self,
            "Observability",
            service=config.stack_name,
            functions={
                "api": self.api_function.function,
                "runner": self.runner.function,
                "lifecycle": self.timers.lifecycle.function,
                "dispatcher": self.dispatcher.function,
                **({"webhooks": self.webhooks.delivery.function} if self.webhooks else {}),
            },
            api=self.api.api,
            watched=Watched(
                dlqs={
                    "inbox": self.inbox.dlq,
                    "outbox": self.fanout.outbox_dlq,
                    "lifecycle": self.timers.dlq,
                    "timers": self.timers.schedule_dlq,
                    "stream": self.dispatcher.dlq,
                    **({"webhooks": self.webhooks.dlq} if self.webhooks else {}),
                },
                inbox=self.inbox.queue,
                outbox=self.fanout.outbox,
                topic=self.fanout.topic,
                tables={
                    "Ledger": WatchedTable(self.ledger.table, tuple(index.name for index in LEDGER.indexes)),
                    **{table.node.id: WatchedTable(table) for table in self.checkpoints.tables},
                },
                schedule_group=self.timers.group_name,
                stream_consumer=self.dispatcher.function,
            ),
            # Longer than a whole visibility timeout plus a run, whatever the runner's timeout.
            inbox_age_alarm_seconds=max(
                constants.INBOX_AGE_ALARM_SECONDS,
                inbox_visibility_seconds(config.runner_timeout) + config.runner_timeout,
            ),
            alarm_topic_arn=config.alarm_topic_arn,
            alarm_email=config.alarm_email,
        )

        cdk.CfnOutput(self, "ApiUrl", value=self.api.url, description="Base URL of the REST API")
        cdk.CfnOutput(
            self, "TopicArn", value=self.fanout.topic.topic_arn, description="wait.created SNS topic"
        )
        cdk.CfnOutput(
            self, "OutboxQueueUrl", value=self.fanout.outbox.queue_url, description="wait.created FIFO outbox"
        )
        cdk.CfnOutput(
            self, "LedgerTableName", value=self.ledger.table.table_name, description="Question ledger table"
        )
        cdk.CfnOutput(
            self,
            "PolicyTableName",
            value=self.policies.table.table_name,
            description="The policy store (agent-wait policies list | show | set | diff)",
        )
        cdk.CfnOutput(
            self,
            "AlarmTopicArn",
            value=self.observability.topic.topic_arn,
            description="The SNS topic every alarm notifies (subscribe your on-call address or tool)",
        )
        cdk.CfnOutput(
            self,
            "OperatorPolicyArn",
            value=self.operators.policy.managed_policy_arn,
            description="Attach to the roles in operator_principals: agent-wait dlq | policies ...",
        )
        cdk.CfnOutput(
            self,
            "AuditBucketName",
            value=self.archive.bucket.bucket_name,
            description="Audit archive: decided questions as JSON Lines under audit/date=YYYY-MM-DD/",
        )
        cdk.CfnOutput(
            self,
            "AuditTable",
            value=f"{self.archive.database_name}.audit",
            description="Audit archive: the Glue table Athena queries",
        )
        cdk.CfnOutput(
            self,
            "AuditWorkGroup",
            value=self.audit_queries.workgroup.ref,
            description="Audit archive: Athena workgroup and saved reports (agent-wait audit query --api)",
        )

    def _apply_stack_wide(self, config: StackConfig) -> None:
        """Tags, deletion protection and the customer-managed key, on every resource of their kind."""
        for key, value in config.tags.items():
            cdk.Tags.of(self).add(key, value)
        if config.deletion_protection:
            cdk.Aspects.of(self).add(DeletionProtection())
        if config.kms_key_arn is not None:
            cdk.Aspects.of(self).add(CustomerManagedKey(config.kms_key_arn))
            # Every function sends to or reads a queue under the key (and the api and lifecycle may
            # decrypt secrets encrypted with it); Scheduler sends to the timers DLQ with its role;
            # Firehose writes the archive's objects (the bucket's default key) with its role.
            functions = [self.api_function, self.runner, self.timers.lifecycle, self.dispatcher.service]
            if self.webhooks is not None:
                functions.append(self.webhooks.delivery)
            for fn in functions:
                fn.allow(KEY_USE_ACTIONS, [config.kms_key_arn])
            for role in (self.timers.scheduler_role, self.archive.role):
                role.add_to_policy(
                    iam.PolicyStatement(actions=list(KEY_USE_ACTIONS), resources=[config.kms_key_arn])
                )
