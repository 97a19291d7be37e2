"""The dashboard and alarms: questions raised / answered / expired, time to answer, failures, DLQ depth,
queue ages, Lambda errors and throttles, DynamoDB throttles, Scheduler and SNS delivery, api 5xx and
latency; and the topic every alarm notifies.

Every alarm's description says what it means and the first thing to do (it is the text of the
notification); the alarm table of docs/operations.md lists the same alarms (a test keeps them equal).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra import constants
from infra.nag import acknowledge
from wait_service import metric_names

if TYPE_CHECKING:
    from aws_cdk import aws_apigateway as apigw
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_sqs as sqs

_PERIOD = cdk.Duration.minutes(constants.ALARM_PERIOD_MINUTES)
_AT_LEAST = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD


@dataclass(frozen=True)
class WatchedTable:
    """A table the alarms watch for throttling, with the names of its global secondary indexes."""

    table: dynamodb.ITable
    indexes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Watched:
    """What the alarms and the dashboard watch besides the functions and the API."""

    dlqs: dict[str, sqs.IQueue] = field(default_factory=dict)
    inbox: sqs.IQueue | None = None
    outbox: sqs.IQueue | None = None
    topic: sns.ITopic | None = None
    tables: dict[str, WatchedTable] = field(default_factory=dict)
    schedule_group: str | None = None
    # The ledger stream's reader: its iterator age is how far behind the outbox is.
    stream_consumer: lambda_.IFunction | None = None


class Observability(Construct):
    """A CloudWatch dashboard, the alarms a human must see, and the topic they notify.

    The question metrics are the ones the Lambdas emit with Powertools Metrics: namespace
    ``POWERTOOLS_METRICS_NAMESPACE`` (``infra.constants.METRICS_NAMESPACE``), dimension ``service`` =
    ``POWERTOOLS_SERVICE_NAME`` (the stack name), so two stacks in one account do not mix.

    Alarms notify ``alarm_topic_arn`` when given (an existing on-call topic); otherwise a topic of the
    stack (KMS-encrypted, TLS only), to which ``alarm_email`` is subscribed when given.

    Examples
    --------
    >>> Observability(stack, "Observability", service="agent-wait", functions={"api": fn},
    ...               watched=Watched(dlqs={"inbox": dlq}), api=rest_api)  # doctest: +SKIP
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        service: str,
        functions: dict[str, lambda_.IFunction],
        api: apigw.RestApi,
        watched: Watched,
        inbox_age_alarm_seconds: int = constants.INBOX_AGE_ALARM_SECONDS,
        alarm_topic_arn: str | None = None,
        alarm_email: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.service = service
        self.all_alarms: list[cloudwatch.Alarm] = []

        self.dlq_alarms = {
            name: self._alarm(
                f"{name.capitalize()}DlqDepth",
                f"Messages in the {name} dead-letter queue: work failed every retry and waits for a human. "
                "First: look at the message (`agent-wait dlq list`) and the logs around its time; redrive "
                "it once the cause is fixed (docs/operations.md, Alarms).",
                queue.metric_approximate_number_of_messages_visible(period=_PERIOD, statistic="Maximum"),
                constants.DLQ_ALARM_THRESHOLD,
                datapoints=1,
            )
            for name, queue in watched.dlqs.items()
        }
        self.resume_failures_alarm = self._alarm(
            "ResumeFailures",
            "A thread could not be resumed with its answer (question resume_failed). First: read the "
            "runner's log for the question id and the thread's state (agent-wait thread).",
            self.question_metric(metric_names.RESUME_FAILURES),
            constants.RESUME_FAILURE_ALARM_THRESHOLD,
            datapoints=1,
        )
        runner = functions.get("runner")
        self.runs_failed_alarm: cloudwatch.Alarm | None = None
        if runner is not None:
            self.runs_failed_alarm = self._alarm(
                "RunsFailedRate",
                f"At least {constants.RUNS_FAILED_RATE_ALARM_PERCENT} % of the runner's invocations ended "
                "with a failed run (the graph raised, or a run failed every retry). First: read the runner's "
                "log for the exceptions; a deploy of the graph is the usual cause.",
                self.runs_failed_rate(runner),
                constants.RUNS_FAILED_RATE_ALARM_PERCENT,
            )
        self.lambda_error_alarms = {
            name: self._alarm(
                f"{name.capitalize()}Errors",
                f"The {name} Lambda raised (an unhandled error or a timeout). First: read its log "
                "group's errors in Logs Insights.",
                fn.metric_errors(period=_PERIOD, statistic="Sum"),
                constants.LAMBDA_ERROR_ALARM_THRESHOLD,
            )
            for name, fn in functions.items()
        }
        self.lambda_throttle_alarms = {
            name: self._alarm(
                f"{name.capitalize()}Throttles",
                f"The {name} Lambda was throttled: account or reserved concurrency is exhausted. First: "
                "compare the account's ConcurrentExecutions with its quota.",
                fn.metric_throttles(period=_PERIOD, statistic="Sum"),
                constants.LAMBDA_THROTTLE_ALARM_THRESHOLD,
            )
            for name, fn in functions.items()
        }
        self.api_5xx_alarm = self._alarm(
            "Api5xx",
            f"At least {constants.API_5XX_ALARM_RATE:.0%} of API requests were answered with a 5xx. First: "
            "the ApiErrors alarm and the api's log; a 5xx with no Lambda error is API Gateway's own "
            "(its access log has the status).",
            api.metric_server_error(period=_PERIOD, statistic="Average"),
            constants.API_5XX_ALARM_RATE,
        )
        self.api_latency_alarm = self._alarm(
            "ApiLatencyP99",
            f"The API's p99 latency is over {constants.API_P99_LATENCY_ALARM_MS} ms. First: the api's "
            "duration on the dashboard, then DynamoDB throttles.",
            api.metric_latency(period=_PERIOD, statistic="p99"),
            constants.API_P99_LATENCY_ALARM_MS,
            evaluation=constants.ALARM_EVALUATION_PERIODS,
            datapoints=constants.ALARM_EVALUATION_PERIODS,
        )
        self.inbox_age_alarm: cloudwatch.Alarm | None = None
        if watched.inbox is not None:
            self.inbox_age_alarm = self._alarm(
                "InboxOldestMessage",
                "The inbox's oldest run or resume has waited longer than a visibility timeout and a run: "
                "the runner is not consuming it. First: RunnerErrors and RunnerThrottles, then the inbox "
                "event source mapping's state.",
                watched.inbox.metric_approximate_age_of_oldest_message(period=_PERIOD, statistic="Maximum"),
                inbox_age_alarm_seconds,
            )
        self.outbox_age_alarm: cloudwatch.Alarm | None = None
        if watched.outbox is not None:
            self.outbox_age_alarm = self._alarm(
                "OutboxOldestMessage",
                f"An envelope has waited in the outbox over {constants.OUTBOX_AGE_ALARM_SECONDS // 60} "
                "minutes: the system that reads it has stopped (messages are dropped after 14 days). "
                "First: check that consumer; if nothing of yours reads the outbox, disable this alarm's "
                "actions.",
                watched.outbox.metric_approximate_age_of_oldest_message(period=_PERIOD, statistic="Maximum"),
                constants.OUTBOX_AGE_ALARM_SECONDS,
            )
        self.table_throttle_alarms = {
            name: self._alarm(
                f"{name}Throttles",
                f"DynamoDB throttled reads or writes on the {name} table or its indexes. First: the "
                "dashboard's DynamoDB panel shows which; on-demand tables throttle on hot keys or sudden "
                "doubling of traffic.",
                self.table_throttles(name, watched_table),
                constants.DYNAMODB_THROTTLE_ALARM_THRESHOLD,
            )
            for name, watched_table in watched.tables.items()
        }
        self.topic_failed_alarm: cloudwatch.Alarm | None = None
        if watched.topic is not None:
            self.topic_failed_alarm = self._alarm(
                "TopicFailedNotifications",
                "The wait-created topic failed to deliver notifications to a subscriber. First: the "
                "subscription's endpoint (and its delivery status logs, if on); a deleted queue or a "
                "key policy are the usual causes.",
                watched.topic.metric_number_of_notifications_failed(period=_PERIOD, statistic="Sum"),
                constants.SNS_FAILED_ALARM_THRESHOLD,
            )
        self.scheduler_alarms: dict[str, cloudwatch.Alarm] = {}
        if watched.schedule_group is not None:
            self.scheduler_alarms = {
                "TimersTargetErrors": self._alarm(
                    "TimersTargetErrors",
                    "EventBridge Scheduler could not invoke the lifecycle function for a timer (it retries). "
                    "First: the lifecycle function's state and the scheduler role's permission.",
                    self.scheduler_metric("TargetErrorCount", watched.schedule_group),
                    constants.SCHEDULER_ERROR_ALARM_THRESHOLD,
                ),
                "TimersDropped": self._alarm(
                    "TimersDropped",
                    "A timer exhausted its retries: its expiry or reminder went to the timers DLQ instead of "
                    "the lifecycle function. First: `agent-wait dlq show` on the timers DLQ.",
                    self.scheduler_metric("InvocationDroppedCount", watched.schedule_group),
                    constants.SCHEDULER_ERROR_ALARM_THRESHOLD,
                    datapoints=1,
                ),
            }

        self.stream_age_alarm: cloudwatch.Alarm | None = None
        if watched.stream_consumer is not None:
            self.stream_age_alarm = self._alarm(
                "LedgerStreamIteratorAge",
                "The dispatcher is behind on the ledger's stream: recorded replies and starts are not "
                "reaching the inbox within their bound (the dispatcher failing, throttled or retrying). "
                "First: the dispatcher's errors and throttles on the dashboard, and its log.",
                watched.stream_consumer.metric("IteratorAge", period=_PERIOD, statistic="Maximum"),
                constants.STREAM_AGE_ALARM_SECONDS * 1000,
            )

        self.topic = self._alarm_topic(alarm_topic_arn, alarm_email)
        action = cloudwatch_actions.SnsAction(self.topic)
        # The on-call topic hears when each alarm fires and when it clears again.
        for alarm in self.alarms:
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"{service}-waits")
        self._add_question_widgets(functions, api)
        self._add_store_widgets(watched)

    # -- alarms ------------------------------------------------------------------------------------

    @property
    def alarms(self) -> list[cloudwatch.Alarm]:
        """Every alarm of the stack."""
        return list(self.all_alarms)

    def _alarm(
        self,
        construct_id: str,
        description: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        *,
        evaluation: int = constants.ALARM_EVALUATION_PERIODS,
        datapoints: int = constants.ALARM_DATAPOINTS,
    ) -> cloudwatch.Alarm:
        """An alarm when ``metric`` reaches ``threshold`` in ``datapoints`` of the last ``evaluation``
        periods; no data is not a breach. Named ``<service>-<construct id>``, as docs/operations.md
        lists it."""
        alarm = cloudwatch.Alarm(
            self,
            construct_id,
            alarm_name=f"{self.service}-{construct_id}",
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            evaluation_periods=evaluation,
            datapoints_to_alarm=datapoints,
            comparison_operator=_AT_LEAST,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.all_alarms.append(alarm)
        return alarm

    def _alarm_topic(self, alarm_topic_arn: str | None, alarm_email: str | None) -> sns.ITopic:
        if alarm_topic_arn is not None:
            return sns.Topic.from_topic_arn(self, "AlarmTopic", alarm_topic_arn)
        key = kms.Key(
            self,
            "AlarmTopicKey",
            description="Encrypts the agent-wait alarm topic",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        # CloudWatch publishes to an encrypted topic only when the key lets it.
        key.grant(iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*")
        topic = sns.Topic(
            self,
            "AlarmTopic",
            display_name=f"agent-wait alarms ({self.service})",
            master_key=key,
            enforce_ssl=True,
        )
        if alarm_email is not None:
            subscription = topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
            acknowledge(
                subscription,
                "Serverless-SNSRedrivePolicy",
                "An email subscription of the alarm topic: SNS retries delivery to the mail server, and an "
                "alarm that could not be mailed stays in ALARM on the console and the dashboard.",
            )
        return topic

    # -- metrics -----------------------------------------------------------------------------------

    def question_metric(self, name: str, *, statistic: str = "Sum") -> cloudwatch.Metric:
        """A metric the Lambdas emit through Powertools (namespace and ``service`` of this stack)."""
        return cloudwatch.Metric(
            namespace=constants.METRICS_NAMESPACE,
            metric_name=name,
            dimensions_map={"service": self.service},
            statistic=statistic,
            period=_PERIOD,
            label=f"{name} ({statistic})" if statistic != "Sum" else None,
        )

    def runs_failed_rate(self, runner: lambda_.IFunction) -> cloudwatch.MathExpression:
        """Percent of runner invocations (one message each) whose run ended failed."""
        return cloudwatch.MathExpression(
            expression="IF(invocations > 0, 100 * FILL(failed, 0) / invocations, 0)",
            using_metrics={
                "failed": self.question_metric(metric_names.RUNS_FAILED),
                "invocations": runner.metric_invocations(period=_PERIOD, statistic="Sum"),
            },
            label="Runs failed (% of runner invocations)",
            period=_PERIOD,
        )

    @staticmethod
    def _throttle_metrics(name: str, watched: WatchedTable) -> dict[str, cloudwatch.IMetric]:
        """Read and write throttle events of the table (``<name>_t_*``) and of each index (``_i<n>_*``);
        ids unique across tables, since one dashboard graph shows every table's expression."""
        metrics: dict[str, cloudwatch.IMetric] = {}
        table = name.lower()
        targets: list[tuple[str, dict[str, str]]] = [(f"{table}_t", {"TableName": watched.table.table_name})]
        targets += [
            (f"{table}_i{n}", {"TableName": watched.table.table_name, "GlobalSecondaryIndexName": index})
            for n, index in enumerate(watched.indexes)
        ]
        for prefix, dimensions in targets:
            for kind in ("Read", "Write"):
                metrics[f"{prefix}_{kind.lower()}"] = cloudwatch.Metric(
                    namespace="AWS/DynamoDB",
                    metric_name=f"{kind}ThrottleEvents",
                    dimensions_map=dimensions,
                    statistic="Sum",
                    period=_PERIOD,
                )
        return metrics

    def table_throttles(self, name: str, watched: WatchedTable) -> cloudwatch.MathExpression:
        """Throttled reads and writes of a table and its indexes, summed."""
        metrics = self._throttle_metrics(name, watched)
        return cloudwatch.MathExpression(
            expression=" + ".join(f"FILL({key}, 0)" for key in metrics),
            using_metrics=metrics,
            label=f"{name} throttle events (table and indexes)",
            period=_PERIOD,
        )

    @staticmethod
    def scheduler_metric(name: str, group: str, *, statistic: str = "Sum") -> cloudwatch.Metric:
        """An EventBridge Scheduler metric of the stack's schedule group."""
        return cloudwatch.Metric(
            namespace="AWS/Scheduler",
            metric_name=name,
            dimensions_map={"ScheduleGroup": group},
            statistic=statistic,
            period=_PERIOD,
        )

    # -- dashboard ---------------------------------------------------------------------------------

    def _add_question_widgets(self, functions: dict[str, lambda_.IFunction], api: apigw.RestApi) -> None:
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Questions",
                left=[
                    self.question_metric(metric_names.QUESTIONS_RAISED),
                    self.question_metric(metric_names.QUESTIONS_ANSWERED),
                    self.question_metric(metric_names.QUESTIONS_RESUMED),
                    self.question_metric(metric_names.QUESTIONS_EXPIRED),
                    self.question_metric(metric_names.QUESTIONS_REVOKED),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Time to answer (ms)",
                left=[
                    self.question_metric(metric_names.TIME_TO_ANSWER, statistic="p50"),
                    self.question_metric(metric_names.TIME_TO_ANSWER, statistic="p90"),
                    self.question_metric(metric_names.TIME_TO_ANSWER, statistic="Maximum"),
                ],
                width=12,
            ),
        )
        self._add_decision_widgets()
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24),
        )
        failures: list[cloudwatch.IWidget] = [
            cloudwatch.AlarmWidget(title="Resume failures", alarm=self.resume_failures_alarm, width=8)
        ]
        if self.runs_failed_alarm is not None:
            failures.append(
                cloudwatch.AlarmWidget(title="Runs failed (%)", alarm=self.runs_failed_alarm, width=8)
            )
        failures.append(
            cloudwatch.GraphWidget(
                title="API errors and p99 latency",
                left=[
                    api.metric_client_error(period=_PERIOD),
                    api.metric_server_error(period=_PERIOD),
                ],
                right=[api.metric_latency(period=_PERIOD, statistic="p99")],
                width=8,
            )
        )
        self.dashboard.add_widgets(*failures)
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Waits ending on their own",
                left=[
                    self.question_metric(metric_names.QUESTIONS_EXPIRED),
                    self.question_metric(metric_names.QUESTIONS_ESCALATED),
                    self.question_metric(metric_names.REMINDERS_SENT),
                    self.question_metric(metric_names.QUESTIONS_REVOKED),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Inbox messages refused",
                left=[
                    self.question_metric(metric_names.RESUMES_REFUSED),
                    self.question_metric(metric_names.POISON_MESSAGES),
                    self.question_metric(metric_names.QUESTIONS_UNRECORDABLE),
                ],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Lambda errors",
                left=[
                    fn.metric_errors(period=_PERIOD, label=f"{name} errors") for name, fn in functions.items()
                ],
                right=[
                    fn.metric_throttles(period=_PERIOD, label=f"{name} throttles")
                    for name, fn in functions.items()
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Lambda duration p90 (ms)",
                left=[
                    fn.metric_duration(period=_PERIOD, statistic="p90", label=name)
                    for name, fn in functions.items()
                ],
                width=12,
            ),
        )

    def _add_decision_widgets(self) -> None:
        """The approval analytics' headline figures, as the dispatcher emits them from the ledger's
        stream (once per question): outcomes by kind, and the time to a person's answer. The
        breakdowns by responder, function and rung are in ``GET /stats`` (CloudWatch cannot read
        the counters table)."""
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Decisions by outcome",
                left=[
                    self.question_metric(metric_names.DECISIONS_APPROVED),
                    self.question_metric(metric_names.DECISIONS_EDITED),
                    self.question_metric(metric_names.DECISIONS_REJECTED),
                    self.question_metric(metric_names.DECISIONS_RESPONDED),
                    self.question_metric(metric_names.EXPIRED_WITH_DEFAULT),
                    self.question_metric(metric_names.EXPIRED_WITHOUT_DEFAULT),
                    self.question_metric(metric_names.QUESTIONS_REVOKED),
                ],
                stacked=True,
                width=12,
            ),
            cloudwatch.SingleValueWidget(
                title="Time to decision (ms, from the stream)",
                metrics=[
                    self.question_metric(metric_names.TIME_TO_DECISION, statistic="p50"),
                    self.question_metric(metric_names.TIME_TO_DECISION, statistic="p90"),
                    self.question_metric(metric_names.TIME_TO_DECISION, statistic="Maximum"),
                ],
                width=12,
                height=6,
            ),
        )

    def _add_store_widgets(self, watched: Watched) -> None:
        """DynamoDB, SQS and Scheduler panels."""
        row: list[cloudwatch.IWidget] = []
        if watched.tables:
            throttles: list[cloudwatch.IMetric] = []
            consumed: list[cloudwatch.IMetric] = []
            for name, table in watched.tables.items():
                throttles.append(self.table_throttle_alarms[name].metric)
                consumed += [
                    table.table.metric_consumed_read_capacity_units(
                        period=_PERIOD, label=f"{name} read units"
                    ),
                    table.table.metric_consumed_write_capacity_units(
                        period=_PERIOD, label=f"{name} write units"
                    ),
                ]
            row.append(cloudwatch.GraphWidget(title="DynamoDB throttle events", left=throttles, width=8))
            row.append(cloudwatch.GraphWidget(title="DynamoDB consumed capacity", left=consumed, width=8))
        queues = {
            name: q for name, q in (("inbox", watched.inbox), ("outbox", watched.outbox)) if q is not None
        }
        row.append(
            cloudwatch.GraphWidget(
                title="SQS: messages waiting (left), oldest message age in s (right)",
                left=[
                    q.metric_approximate_number_of_messages_visible(period=_PERIOD, label=f"{name} visible")
                    for name, q in queues.items()
                ]
                + [alarm.metric for alarm in self.dlq_alarms.values()],
                right=[
                    q.metric_approximate_age_of_oldest_message(period=_PERIOD, label=f"{name} oldest")
                    for name, q in queues.items()
                ],
                width=8,
            )
        )
        self.dashboard.add_widgets(*row)
        if watched.schedule_group is not None:
            group = watched.schedule_group
            self.dashboard.add_widgets(
                cloudwatch.GraphWidget(
                    title="Scheduler: timers fired, failed, dropped",
                    left=[
                        self.scheduler_metric(name, group)
                        for name in (
                            "InvocationAttemptCount",
                            "TargetErrorCount",
                            "InvocationThrottleCount",
                            "InvocationDroppedCount",
                            "InvocationsSentToDeadLetterCount",
                        )
                    ],
                    width=12,
                ),
                cloudwatch.GraphWidget(
                    title="SNS: wait-created published and failed",
                    left=(
                        [
                            watched.topic.metric_number_of_messages_published(period=_PERIOD),
                            watched.topic.metric_number_of_notifications_failed(period=_PERIOD),
                        ]
                        if watched.topic is not None
                        else []
                    ),
                    width=12,
                ),
            )
