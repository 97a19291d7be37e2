"""The dashboard and alarms: questions raised / answered / expired, time to answer, failures, DLQ depth,
the inbox's oldest message, Lambda errors and throttles, api 5xx."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra import constants
from wait_service import metric_names

if TYPE_CHECKING:
    from aws_cdk import aws_apigateway as apigw
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_sqs as sqs

_PERIOD = cdk.Duration.minutes(5)


class Observability(Construct):
    """A CloudWatch dashboard and the alarms a human must see.

    The question metrics are the ones the Lambdas emit with Powertools Metrics: namespace
    ``POWERTOOLS_METRICS_NAMESPACE`` (``infra.constants.METRICS_NAMESPACE``), dimension ``service`` =
    ``POWERTOOLS_SERVICE_NAME`` (the stack name), so two stacks in one account do not mix.

    Examples
    --------
    >>> Observability(stack, "Observability", service="agent-wait", functions={"api": fn},
    ...               dlqs={"inbox": dlq}, api=rest_api)  # doctest: +SKIP
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        service: str,
        functions: dict[str, lambda_.IFunction],
        dlqs: dict[str, sqs.IQueue],
        api: apigw.RestApi,
        inbox: sqs.IQueue | None = None,
        inbox_age_alarm_seconds: int = constants.INBOX_AGE_ALARM_SECONDS,
        stream_consumer: lambda_.IFunction | None = None,
        alarm_topic_arn: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.service = service

        self.dlq_alarms = {
            name: cloudwatch.Alarm(
                self,
                f"{name.capitalize()}DlqDepth",
                alarm_description=f"Messages in the {name} dead-letter queue: a run, resume or delivery "
                "failed every retry and needs a human.",
                metric=queue.metric_approximate_number_of_messages_visible(
                    period=_PERIOD, statistic="Maximum"
                ),
                threshold=constants.DLQ_ALARM_THRESHOLD,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            for name, queue in dlqs.items()
        }
        self.resume_failures_alarm = cloudwatch.Alarm(
            self,
            "ResumeFailures",
            alarm_description="A thread could not be resumed with its answer (question resume_failed).",
            metric=self.question_metric(metric_names.RESUME_FAILURES),
            threshold=constants.RESUME_FAILURE_ALARM_THRESHOLD,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.runs_failed_alarm = self._alarm(
            "RunsFailed",
            "A run ended failed: the graph raised, or a run or resume failed every retry.",
            self.question_metric(metric_names.RUNS_FAILED),
            constants.RUNS_FAILED_ALARM_THRESHOLD,
        )
        self.lambda_error_alarms = {
            name: self._alarm(
                f"{name.capitalize()}Errors",
                f"The {name} Lambda raised (an unhandled error, a timeout, or a retried runner batch).",
                fn.metric_errors(period=_PERIOD, statistic="Sum"),
                constants.LAMBDA_ERROR_ALARM_THRESHOLD,
            )
            for name, fn in functions.items()
        }
        self.lambda_throttle_alarms = {
            name: self._alarm(
                f"{name.capitalize()}Throttles",
                f"The {name} Lambda was throttled: account or reserved concurrency is exhausted.",
                fn.metric_throttles(period=_PERIOD, statistic="Sum"),
                constants.LAMBDA_THROTTLE_ALARM_THRESHOLD,
            )
            for name, fn in functions.items()
        }
        self.api_5xx_alarm = self._alarm(
            "Api5xx",
            "The api answered with a 5xx: callers and responders got an error instead of an answer.",
            api.metric_server_error(period=_PERIOD, statistic="Sum"),
            constants.API_5XX_ALARM_THRESHOLD,
        )
        self.inbox_age_alarm: cloudwatch.Alarm | None = None
        if inbox is not None:
            self.inbox_age_alarm = self._alarm(
                "InboxOldestMessage",
                "The inbox's oldest run or resume has waited longer than a visibility timeout and a run: "
                "the runner is not consuming it (failing, throttled or stopped).",
                inbox.metric_approximate_age_of_oldest_message(period=_PERIOD, statistic="Maximum"),
                inbox_age_alarm_seconds,
            )
        self.stream_age_alarm: cloudwatch.Alarm | None = None
        if stream_consumer is not None:
            self.stream_age_alarm = self._alarm(
                "LedgerStreamIteratorAge",
                "The dispatcher is behind on the ledger's stream: recorded replies and starts are not "
                "reaching the inbox within their bound (the dispatcher failing, throttled or retrying).",
                stream_consumer.metric("IteratorAge", period=_PERIOD, statistic="Maximum"),
                constants.STREAM_AGE_ALARM_SECONDS * 1000,
            )

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"{service}-waits")
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
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24),
        )
        self.dashboard.add_widgets(
            cloudwatch.AlarmWidget(title="Resume failures", alarm=self.resume_failures_alarm, width=8),
            cloudwatch.GraphWidget(
                title="Dead-letter queue depth",
                left=[alarm.metric for alarm in self.dlq_alarms.values()],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="API errors",
                left=[
                    api.metric_client_error(period=_PERIOD),
                    api.metric_server_error(period=_PERIOD),
                ],
                width=8,
            ),
        )
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
                left=[self.question_metric(metric_names.RESUMES_REFUSED)],
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

        if alarm_topic_arn is not None:
            action = cloudwatch_actions.SnsAction(
                sns.Topic.from_topic_arn(self, "AlarmTopic", alarm_topic_arn)
            )
            # The on-call topic hears when each alarm fires and when it clears again.
            for alarm in self.alarms:
                alarm.add_alarm_action(action)
                alarm.add_ok_action(action)

    @property
    def alarms(self) -> list[cloudwatch.Alarm]:
        """Every alarm of the stack."""
        return [
            *self.dlq_alarms.values(),
            self.resume_failures_alarm,
            self.runs_failed_alarm,
            *self.lambda_error_alarms.values(),
            *self.lambda_throttle_alarms.values(),
            self.api_5xx_alarm,
            *([self.inbox_age_alarm] if self.inbox_age_alarm is not None else []),
            *([self.stream_age_alarm] if self.stream_age_alarm is not None else []),
        ]

    def _alarm(
        self, construct_id: str, description: str, metric: cloudwatch.IMetric, threshold: float
    ) -> cloudwatch.Alarm:
        """An alarm when ``metric`` reaches ``threshold`` in one period; no data is not a breach."""
        return cloudwatch.Alarm(
            self,
            construct_id,
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

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
