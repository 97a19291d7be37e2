"""The timers of questions: a schedule group, the lifecycle Lambda its schedules invoke, and roles.

The runner creates one-shot ``at()`` schedules in the group when a question is raised (its
expiry and each reminder) and deletes what is left once the question is decided; the lifecycle
function creates the next escalation rung's. EventBridge Scheduler invokes the lifecycle function
asynchronously with a role that may invoke that one function only; an invocation that still fails
after Lambda's two retries lands in the lifecycle DLQ, which is alarmed like the others. An
invocation Scheduler itself cannot make (the function throttled or gone) is retried by each
schedule's retry policy and then sent to the timers DLQ (``wait_service.resources.TIMERS``).

Pending timers live in the schedule group, not in the template: a stack update keeps them as long
as the group is not replaced (its construct id and name stay as they are), and ``cdk destroy``
deletes the group with every timer in it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants
from infra.functions import SECRET_READ_ACTIONS, TOPIC_KEY_ACTIONS, ServiceFunction
from infra.nag import acknowledge
from wait_service.resources import LIFECYCLE_DLQ, LIFECYCLE_FUNCTION, LIFECYCLE_TIMEOUT_SECONDS, TIMERS

if TYPE_CHECKING:
    from infra.config import StackConfig
    from infra.fanout import Fanout
    from infra.layers import Layers
    from infra.ledger import Ledger

LIFECYCLE_SOURCES = {"": "functions/lifecycle", "wait_service": "functions/wait_service"}
# Exactly what the code calls (tests/infra/test_roles_match_calls.py records the calls).
SCHEDULE_ACTIONS = ("scheduler:CreateSchedule", "scheduler:DeleteSchedule")
LEDGER_LIFECYCLE_ACTIONS = ("dynamodb:GetItem", "dynamodb:UpdateItem")


class Timers(Construct):
    """Schedule group, lifecycle function, and the role EventBridge Scheduler invokes it with.

    Examples
    --------
    >>> timers = Timers(stack, "Timers", config=cfg, layers=layers, ledger=ledger, fanout=fanout,
    ...                 prefix="agent-wait-")  # doctest: +SKIP
    >>> timers.allow_scheduling(runner)  # doctest: +SKIP
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        layers: Layers,
        ledger: Ledger,
        fanout: Fanout,
        prefix: str,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.group_name = prefix + TIMERS.name
        # Replacing the group (a new construct id or name) would delete every pending timer with it.
        self.group = scheduler.CfnScheduleGroup(self, "Group", name=self.group_name)
        self.schedule_dlq = sqs.Queue(
            self,
            TIMERS.dlq_logical_id,
            queue_name=prefix + TIMERS.dlq_name,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.seconds(TIMERS.dlq_retention_seconds),
        )
        for rule in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"):
            acknowledge(
                self.schedule_dlq,
                rule,
                "This queue is itself the dead-letter queue of every timer's schedule (EventBridge "
                "Scheduler sends an invocation it gave up on here).",
            )
        self.schedules_arn = stack.format_arn(
            service="scheduler", resource="schedule", resource_name=f"{self.group_name}/*"
        )
        # Named, so that its ARN can be in its own environment (it schedules the next rung itself).
        function_name = prefix + LIFECYCLE_FUNCTION
        self.function_arn = stack.format_arn(
            service="lambda",
            resource="function",
            resource_name=function_name,
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        self.scheduler_role = iam.Role(
            self,
            "SchedulerRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            ),
            description="EventBridge Scheduler: invokes the agent-wait lifecycle function, nothing else",
        )
        self.scheduler_role.add_to_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[self.function_arn])
        )
        # Scheduler sends to a schedule's dead-letter queue with the schedule's own role.
        self.scheduler_role.add_to_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.schedule_dlq.queue_arn])
        )

        environment = {
            "AGENT_WAIT_LEDGER_TABLE": ledger.table.table_name,
            "AGENT_WAIT_TOPIC_ARN": fanout.topic.topic_arn,
            "AGENT_WAIT_OUTBOX_URL": fanout.outbox.queue_url,
            "AGENT_WAIT_LEDGER_TTL_DAYS": str(constants.LEDGER_TTL_DAYS),
            **self.environment(),
            "AGENT_WAIT_LISTING_SHARDS": str(config.listing_shards),
        }
        if config.default_ttl is not None:
            environment["AGENT_WAIT_DEFAULT_TTL"] = str(config.default_ttl)
        slack = bool(config.slack_channel and config.slack_bot_token_secret)
        if slack:
            # Escalations and reminders are posted in the thread of the question's Slack message.
            environment["AGENT_WAIT_SLACK_CHANNEL"] = str(config.slack_channel)
            environment["AGENT_WAIT_SLACK_BOT_TOKEN_SECRET"] = str(config.slack_bot_token_secret)
        self.lifecycle = ServiceFunction(
            self,
            "Lifecycle",
            sources=LIFECYCLE_SOURCES,
            layers=layers.for_api,
            environment=environment,
            memory_mb=constants.API_MEMORY_MB,
            timeout_seconds=LIFECYCLE_TIMEOUT_SECONDS,
            service=config.stack_name,
            description="agent-wait lifecycle: expiry, escalation and reminders of questions",
            function_name=function_name,
            system_log_level=config.lambda_system_log_level,
        )
        fn = self.lifecycle
        fn.allow(LEDGER_LIFECYCLE_ACTIONS, [ledger.table.table_arn])
        # A decision's resume is enqueued by the dispatcher, from the ledger's stream.
        fn.allow(["sqs:SendMessage"], [fanout.outbox.queue_arn])
        fn.allow(["sns:Publish"], [fanout.topic.topic_arn])
        fn.allow(TOPIC_KEY_ACTIONS, [fanout.key.key_arn])
        self.allow_scheduling(fn, creates_only=True)
        if slack:
            fn.allow(SECRET_READ_ACTIONS, [str(config.slack_bot_token_secret)])

        self.dlq = sqs.Queue(
            self,
            "Dlq",
            queue_name=prefix + LIFECYCLE_DLQ.queue_name,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(14),
        )
        acknowledge(
            self.dlq,
            "AwsSolutions-SQS3",
            "This queue is itself the lifecycle function's dead-letter destination.",
        )
        acknowledge(
            self.dlq,
            "Serverless-SQSRedrivePolicy",
            "This queue is itself the lifecycle function's dead-letter destination.",
        )
        fn.function.configure_async_invoke(retry_attempts=2, on_failure=destinations.SqsDestination(self.dlq))
        acknowledge(
            fn.function,
            "Serverless-LambdaDLQ",
            "Failed asynchronous invocations go to the lifecycle DLQ through an on-failure destination "
            "(configure_async_invoke), which replaces the legacy dead-letter queue setting.",
        )

    def environment(self) -> dict[str, str]:
        """What a function that creates timers needs in its environment."""
        return {
            "AGENT_WAIT_SCHEDULE_GROUP": self.group_name,
            "AGENT_WAIT_LIFECYCLE_ARN": self.function_arn,
            "AGENT_WAIT_SCHEDULER_ROLE_ARN": self.scheduler_role.role_arn,
            "AGENT_WAIT_SCHEDULE_DLQ_ARN": self.schedule_dlq.queue_arn,
        }

    def allow_scheduling(self, fn: ServiceFunction, *, creates_only: bool = False) -> None:
        """Let ``fn`` create (and delete) schedules in the group, passing the scheduler role only."""
        actions = ("scheduler:CreateSchedule",) if creates_only else SCHEDULE_ACTIONS
        fn.allow(actions, [self.schedules_arn])
        fn.allow(["iam:PassRole"], [self.scheduler_role.role_arn])
        acknowledge(
            fn.role,
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:"
            f"schedule/{self.group_name}/*]",
            "Schedules are named per question at run time; the grant covers this stack's own schedule "
            "group only.",
        )
        if not creates_only:
            for name, value in self.environment().items():
                fn.function.add_environment(name, value)
