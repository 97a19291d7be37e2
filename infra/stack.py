"""The agent-wait stack: composes the constructs, wires them together, exports the outputs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aws_cdk as cdk

from infra import constants
from infra.api import RestApi
from infra.checkpoints import Checkpoints
from infra.dispatcher import Dispatcher
from infra.fanout import Fanout
from infra.functions import ApiFunction, RunnerFunction
from infra.inbox import Inbox, inbox_visibility_seconds
from infra.layers import Layers
from infra.ledger import Ledger
from infra.observability import Observability
from infra.timers import Timers

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
        self.inbox.only_senders([self.dispatcher.role])
        self.api = RestApi(self, "Api", config=config, handler=self.api_function.function)
        self.runner.set_reply_url(self.api.url)

        self.observability = Observability(
            self,
            "Observability",
            service=config.stack_name,
            functions={
                "api": self.api_function.function,
                "runner": self.runner.function,
                "lifecycle": self.timers.lifecycle.function,
                "dispatcher": self.dispatcher.function,
            },
            dlqs={
                "inbox": self.inbox.dlq,
                "outbox": self.fanout.outbox_dlq,
                "lifecycle": self.timers.dlq,
                "stream": self.dispatcher.dlq,
            },
            stream_consumer=self.dispatcher.function,
            api=self.api.api,
            inbox=self.inbox.queue,
            # Longer than a whole visibility timeout plus a run, whatever the runner's timeout.
            inbox_age_alarm_seconds=max(
                constants.INBOX_AGE_ALARM_SECONDS,
                inbox_visibility_seconds(config.runner_timeout) + config.runner_timeout,
            ),
            alarm_topic_arn=config.alarm_topic_arn,
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
