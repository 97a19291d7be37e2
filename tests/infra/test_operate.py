"""Operating the stack: a first deploy, the checked-in cdk.json, alarms someone hears, timers that
survive, deferred runs past Lambda's loop limit, deletion protection, and the operating options."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest

from infra import constants
from infra.config import ConfigError, StackConfig
from infra.fanout import OUTBOX_CONSUME_ACTIONS
from infra.options import STACK_NAME_MAX
from tests.doc_sections import section, table_rows
from tests.infra.conftest import KMS_KEY_ARN, OPTIONS_CONTEXT, WAF_ACL_ARN, cdk_json_context
from wait_service import metric_names
from wait_service.answer_limits import MAX_ANSWER_BYTES
from wait_service.resources import LEDGER, TIMERS

if TYPE_CHECKING:
    from constructs import IConstruct

    from tests.infra.conftest import Synth

pytestmark = pytest.mark.infra


def logical_id(synth: Synth, construct: IConstruct) -> str:
    return synth.stack.get_logical_id(construct.node.default_child)  # type: ignore[arg-type]


def env_of(synth: Synth, construct: IConstruct) -> dict[str, Any]:
    function = synth.template_json["Resources"][logical_id(synth, construct)]
    return dict(function["Properties"]["Environment"]["Variables"])


def statements_of(synth: Synth, role: IConstruct) -> list[dict[str, Any]]:
    role_id = logical_id(synth, role)
    return [
        statement
        for policy in synth.resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return sorted(action if isinstance(action, list) else [action])


# -- 1. a first deploy works -----------------------------------------------------------------------


def test_the_stack_sets_api_gateways_logging_role_and_keeps_it_on_destroy(default_synth: Synth) -> None:
    # Without the account's CloudWatch role a stage with execution or access logging fails to create.
    [account_id] = default_synth.resources("AWS::ApiGateway::Account")
    account = default_synth.template_json["Resources"][account_id]
    role_id = account["Properties"]["CloudWatchRoleArn"]["Fn::GetAtt"][0]
    role = default_synth.template_json["Resources"][role_id]
    assert "apigateway.amazonaws.com" in json.dumps(role["Properties"]["AssumeRolePolicyDocument"])
    assert "AmazonAPIGatewayPushToCloudWatchLogs" in json.dumps(role["Properties"]["ManagedPolicyArns"])
    # Every API of the account logs with it: `cdk destroy` leaves both the role and the setting.
    assert (account["DeletionPolicy"], role["DeletionPolicy"]) == ("Retain", "Retain")
    [stage] = default_synth.resources("AWS::ApiGateway::Stage").values()
    assert account_id in stage["DependsOn"]


def _system_log_levels(synth: Synth) -> dict[str, tuple[str, str]]:
    configs = {
        name: fn["Properties"]["LoggingConfig"]
        for name, fn in synth.resources("AWS::Lambda::Function").items()
        if "LoggingConfig" in fn["Properties"]
    }
    return {name: (config["LogFormat"], config["SystemLogLevel"]) for name, config in configs.items()}


def test_every_function_keeps_lambdas_start_and_report_lines_by_default(default_synth: Synth) -> None:
    levels = _system_log_levels(default_synth)
    # The api, runner, dispatcher and lifecycle functions (CDK's own custom-resource functions set
    # no logging configuration).
    assert {name[:6] for name in levels} >= {"ApiFun", "Runner", "Dispat", "Timers"}
    assert set(levels.values()) == {("JSON", "INFO")}


def test_lambdas_own_lines_can_be_left_out_of_every_functions_logs(options_synth: Synth) -> None:
    levels = _system_log_levels(options_synth)
    assert {name[:6] for name in levels} >= {"ApiFun", "Runner", "Dispat", "Timers"}
    assert set(levels.values()) == {("JSON", "WARN")}


def test_the_account_role_can_be_left_to_the_account(options_synth: Synth) -> None:
    options_synth.template.resource_count_is("AWS::ApiGateway::Account", 0)
    assert not any(
        "apigateway.amazonaws.com" in json.dumps(role["Properties"]["AssumeRolePolicyDocument"])
        for role in options_synth.resources("AWS::IAM::Role").values()
    )


# -- 2. cdk.json, the code's defaults and the docs agree ----------------------------------------


def test_the_checked_in_cdk_json_deploys_the_offload_bucket(cdk_json_synth: Synth) -> None:
    stack = cdk_json_synth.stack
    assert stack.checkpoints.bucket is not None
    # The offload bucket, next to the audit archive's and its query results' (which every variant has).
    assert set(cdk_json_synth.resources("AWS::S3::Bucket")) == {
        logical_id(cdk_json_synth, stack.checkpoints.bucket),
        logical_id(cdk_json_synth, stack.archive.bucket),
        logical_id(cdk_json_synth, stack.audit_queries.results),
    }
    bucket = {"Ref": logical_id(cdk_json_synth, stack.checkpoints.bucket)}
    assert env_of(cdk_json_synth, stack.runner.function)["AGENT_WAIT_CHECKPOINT_BUCKET"] == bucket
    # so the api takes the answers the README promises resume (250 KiB and more)
    api_env = env_of(cdk_json_synth, stack.api_function.function)
    assert api_env["AGENT_WAIT_MAX_ANSWER_BYTES"] == str(MAX_ANSWER_BYTES)
    assert MAX_ANSWER_BYTES >= 250 * 1024


def test_every_setting_in_cdk_json_is_the_codes_default_and_in_the_readme() -> None:
    _, rows = table_rows("| key | default | meaning |")
    documented = {key for row in rows for key in re.findall(r"`([a-z][a-z0-9_]*)`", row.split("|")[1])}
    settings = {key: value for key, value in cdk_json_context().items() if not key.startswith("@")}
    assert "checkpoint_bucket" in settings
    for key, value in settings.items():
        # A key set alone to its cdk.json value gives the same configuration as no context at all.
        assert StackConfig.from_context({key: value}.get) == StackConfig(), key
        assert key in documented, f"{key} is not in the configuration table"


def test_cdk_json_leaves_the_bucket_to_the_checkpointer() -> None:
    # Empty means "the default": on with checkpointer=aws, and `-c checkpointer=dynamodb` on top of
    # the checked-in cdk.json still synthesizes (that saver cannot offload, so no bucket).
    context = cdk_json_context()
    assert StackConfig.from_context(context.get).checkpoint_bucket is True
    dynamodb = StackConfig.from_context((context | {"checkpointer": "dynamodb"}).get)
    assert (dynamodb.checkpointer, dynamodb.checkpoint_bucket) == ("dynamodb", False)


# -- 4. alarms that mean something -----------------------------------------------------------------


def alarm_ids(synth: Synth) -> set[str]:
    return {alarm.node.id for alarm in synth.stack.observability.alarms}


def readme_alarm_names() -> set[str]:
    """The alarm names in the first column of the alarm table (docs/operations.md, "Alarms")."""
    _, body = section("Alarms")
    names: set[str] = set()
    for line in body.splitlines():
        if line.startswith("| `"):
            names |= set(re.findall(r"`([A-Za-z0-9]+)`", line.split("|")[1]))
    return names


def test_the_readme_lists_exactly_the_alarms_of_the_template(
    default_synth: Synth, jwt_synth: Synth, signed_synth: Synth
) -> None:
    for synth in (default_synth, jwt_synth, signed_synth):
        template_alarms = synth.resources("AWS::CloudWatch::Alarm")
        assert len(template_alarms) == len(synth.stack.observability.alarms)
    # The default's alarms, the checkpoint tables' of checkpointer=dynamodb (jwt_synth), and the
    # webhooks' DLQ and delivery function (signed_synth configures webhooks).
    assert readme_alarm_names() == alarm_ids(default_synth) | alarm_ids(jwt_synth) | alarm_ids(signed_synth)
    assert {"WebhooksDlqDepth", "WebhooksErrors", "WebhooksThrottles"} <= alarm_ids(signed_synth)


def test_the_readme_covers_the_alarms_of_every_variant(any_synth: Synth, options_synth: Synth) -> None:
    assert alarm_ids(any_synth) <= readme_alarm_names()
    assert alarm_ids(options_synth) <= readme_alarm_names()


def test_alarms_notify_a_topic_of_the_stack_by_default(default_synth: Synth) -> None:
    topic = default_synth.stack.observability.topic
    topic_ref = {"Ref": logical_id(default_synth, topic)}
    alarms = list(default_synth.resources("AWS::CloudWatch::Alarm").values())
    assert len(alarms) >= 20
    for alarm in alarms:
        assert alarm["Properties"]["AlarmActions"] == [topic_ref]
        assert alarm["Properties"]["OKActions"] == [topic_ref]
    props = default_synth.template_json["Resources"][topic_ref["Ref"]]["Properties"]
    assert "KmsMasterKeyId" in props
    assert default_synth.template_json["Outputs"]["AlarmTopicArn"]["Value"] == topic_ref
    # CloudWatch may use the topic's key (it publishes encrypted), and nobody is subscribed unasked.
    key_id = props["KmsMasterKeyId"]["Fn::GetAtt"][0]
    key_policy = json.dumps(default_synth.template_json["Resources"][key_id]["Properties"]["KeyPolicy"])
    assert "cloudwatch.amazonaws.com" in key_policy
    default_synth.template.resource_count_is("AWS::SNS::Subscription", 0)


def test_alarm_email_subscribes_the_address(options_synth: Synth) -> None:
    topic = {"Ref": logical_id(options_synth, options_synth.stack.observability.topic)}
    options_synth.template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "on-call@example.com", "TopicArn": topic}
    )


def test_alarm_topic_arn_still_overrides(bucket_synth: Synth) -> None:
    assert "AlarmTopic" not in json.dumps(list(bucket_synth.resources("AWS::SNS::Topic")))
    for alarm in bucket_synth.resources("AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == ["arn:aws:sns:eu-west-1:123456789012:on-call"]


def test_every_alarm_looks_at_a_window_not_one_datapoint(default_synth: Synth) -> None:
    for alarm in default_synth.resources("AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        assert props["EvaluationPeriods"] >= 2, props["AlarmName"]
        assert 1 <= props["DatapointsToAlarm"] <= props["EvaluationPeriods"]
        assert props["TreatMissingData"] == "notBreaching"
        assert props["AlarmDescription"].count("First:") == 1, props["AlarmName"]


def alarm_named(synth: Synth, name: str) -> dict[str, Any]:
    [found] = [
        a["Properties"]
        for a in synth.resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"]["AlarmName"] == f"{synth.stack.stack_name}-{name}"
    ]
    return found


def math_metrics(alarm: dict[str, Any]) -> list[dict[str, Any]]:
    return [m["MetricStat"]["Metric"] for m in alarm["Metrics"] if "MetricStat" in m]


def test_graph_failures_alarm_as_a_rate_of_the_runners_invocations(default_synth: Synth) -> None:
    alarm = alarm_named(default_synth, "RunsFailedRate")
    [expression] = [m["Expression"] for m in alarm["Metrics"] if "Expression" in m]
    assert "100 *" in expression and "/ invocations" in expression
    names = {m["MetricName"] for m in math_metrics(alarm)}
    assert names == {metric_names.RUNS_FAILED, "Invocations"}
    assert alarm["Threshold"] == constants.RUNS_FAILED_RATE_ALARM_PERCENT


def test_dynamodb_throttles_are_alarmed_on_tables_and_their_indexes(default_synth: Synth) -> None:
    ledger = alarm_named(default_synth, "LedgerThrottles")
    dimensions = [m["Dimensions"] for m in math_metrics(ledger)]
    indexes = {d["Value"] for dims in dimensions for d in dims if d["Name"] == "GlobalSecondaryIndexName"}
    assert indexes == {index.name for index in LEDGER.indexes}
    assert {m["MetricName"] for m in math_metrics(ledger)} == {"ReadThrottleEvents", "WriteThrottleEvents"}
    checkpoints = alarm_named(default_synth, "CheckpointsThrottles")
    assert len(math_metrics(checkpoints)) == 2


def test_queues_topic_scheduler_and_api_have_their_alarms(default_synth: Synth) -> None:
    stack = default_synth.stack
    outbox = alarm_named(default_synth, "OutboxOldestMessage")
    assert outbox["MetricName"] == "ApproximateAgeOfOldestMessage"
    assert outbox["Dimensions"] == [
        {
            "Name": "QueueName",
            "Value": {"Fn::GetAtt": [logical_id(default_synth, stack.fanout.outbox), "QueueName"]},
        }
    ]
    sns_failed = alarm_named(default_synth, "TopicFailedNotifications")
    assert (sns_failed["Namespace"], sns_failed["MetricName"]) == ("AWS/SNS", "NumberOfNotificationsFailed")
    for name, metric in (
        ("TimersTargetErrors", "TargetErrorCount"),
        ("TimersDropped", "InvocationDroppedCount"),
    ):
        alarm = alarm_named(default_synth, name)
        assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/Scheduler", metric)
        assert alarm["Dimensions"] == [{"Name": "ScheduleGroup", "Value": "agent-wait-timers"}]
    api_5xx = alarm_named(default_synth, "Api5xx")
    assert (api_5xx["MetricName"], api_5xx["Statistic"]) == ("5XXError", "Average")
    assert api_5xx["Threshold"] == constants.API_5XX_ALARM_RATE
    latency = alarm_named(default_synth, "ApiLatencyP99")
    assert (latency["MetricName"], latency["ExtendedStatistic"]) == ("Latency", "p99")
    dlqs = {name for name in alarm_ids(default_synth) if name.endswith("DlqDepth")}
    assert dlqs == {
        "InboxDlqDepth",
        "OutboxDlqDepth",
        "LifecycleDlqDepth",
        "TimersDlqDepth",
        "StreamDlqDepth",
    }
    stream_dlq = alarm_named(default_synth, "StreamDlqDepth")
    assert stream_dlq["Dimensions"] == [
        {
            "Name": "QueueName",
            "Value": {"Fn::GetAtt": [logical_id(default_synth, stack.dispatcher.dlq), "QueueName"]},
        }
    ]


def test_the_dashboard_has_dynamodb_sqs_and_scheduler_panels(default_synth: Synth) -> None:
    [dashboard] = default_synth.resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for needle in (
        "AWS/DynamoDB",
        "ConsumedWriteCapacityUnits",
        "AWS/SQS",
        "ApproximateAgeOfOldestMessage",
        "AWS/Scheduler",
        "InvocationDroppedCount",
        "NumberOfNotificationsFailed",
    ):
        assert needle in body, needle


# -- 5. timers -------------------------------------------------------------------------------------


def test_schedules_get_a_dlq_the_scheduler_role_may_send_to(default_synth: Synth) -> None:
    stack = default_synth.stack
    dlq_arn = {"Fn::GetAtt": [logical_id(default_synth, stack.timers.schedule_dlq), "Arn"]}
    dlq = default_synth.template_json["Resources"][logical_id(default_synth, stack.timers.schedule_dlq)]
    assert dlq["Properties"]["QueueName"] == f"agent-wait-{TIMERS.dlq_name}"
    assert "FifoQueue" not in dlq["Properties"]  # Scheduler sends to standard queues only
    # Both functions that create schedules name the DLQ in them.
    for fn in (stack.runner.function, stack.timers.lifecycle.function):
        assert env_of(default_synth, fn)["AGENT_WAIT_SCHEDULE_DLQ_ARN"] == dlq_arn
    sends = [
        s
        for s in statements_of(default_synth, stack.timers.scheduler_role)
        if "sqs:SendMessage" in actions(s)
    ]
    assert [s["Resource"] for s in sends] == [dlq_arn]


def test_a_stack_update_keeps_the_schedule_group_and_its_pending_timers(default_synth: Synth) -> None:
    # A change of the group's logical id or name replaces it, and deleting a group deletes its
    # schedules: every question's pending expiry and reminders would be lost on that deploy.
    [(group_id, group)] = default_synth.resources("AWS::Scheduler::ScheduleGroup").items()
    assert group_id == "TimersGroup76C79D49"
    assert group["Properties"] == {"Name": "agent-wait-timers"}
    assert "UpdateReplacePolicy" not in group


# -- 6. deferred runs past the loop limit ---------------------------------------------------------


def test_the_runner_may_send_deferred_runs_to_its_own_queue_past_the_loop_limit(default_synth: Synth) -> None:
    runner = default_synth.template_json["Resources"][
        logical_id(default_synth, default_synth.stack.runner.function)
    ]
    assert runner["Properties"]["RecursiveLoop"] == "Allow"
    for fn in (default_synth.stack.api_function.function, default_synth.stack.timers.lifecycle.function):
        assert (
            "RecursiveLoop"
            not in default_synth.template_json["Resources"][logical_id(default_synth, fn)]["Properties"]
        )


# -- 7. deletion protection ------------------------------------------------------------------------


def test_tables_are_protected_from_deletion_by_default(default_synth: Synth, jwt_synth: Synth) -> None:
    for synth in (default_synth, jwt_synth):
        tables = synth.resources("AWS::DynamoDB::Table").values()
        assert tables
        for table in tables:
            assert table["Properties"]["DeletionProtectionEnabled"] is True
            assert table["Properties"]["PointInTimeRecoverySpecification"] == {
                "PointInTimeRecoveryEnabled": True
            }
            assert table["DeletionPolicy"] == "Retain"


def test_deletion_protection_can_be_turned_off_for_development(options_synth: Synth) -> None:
    for table in options_synth.resources("AWS::DynamoDB::Table").values():
        assert "DeletionProtectionEnabled" not in table["Properties"]
        assert table["Properties"]["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


# -- 8. options ------------------------------------------------------------------------------------

TAGGED_TYPES = {
    "AWS::DynamoDB::Table",
    "AWS::SQS::Queue",
    "AWS::SNS::Topic",
    "AWS::Lambda::Function",
    "AWS::IAM::Role",
    "AWS::KMS::Key",
    "AWS::Logs::LogGroup",
    "AWS::S3::Bucket",
    "AWS::ApiGateway::RestApi",
    "AWS::ApiGateway::Stage",
    "AWS::Scheduler::ScheduleGroup",
    "AWS::CloudWatch::Alarm",
}


def tag_map(tags: Any) -> dict[str, str]:
    if isinstance(tags, dict):  # a few types take a map
        return dict(tags)
    return {tag["Key"]: tag["Value"] for tag in tags}


def test_tags_are_on_every_resource(options_synth: Synth) -> None:
    wanted = json.loads(OPTIONS_CONTEXT["tags"])
    seen: set[str] = set()
    for resource in options_synth.template_json["Resources"].values():
        tags = resource.get("Properties", {}).get("Tags")
        if resource["Type"] in TAGGED_TYPES:
            assert tags is not None, resource["Type"]
        if tags is not None:
            assert tag_map(tags).items() >= wanted.items(), resource["Type"]
            seen.add(resource["Type"])
    assert seen >= TAGGED_TYPES


def test_a_waf_web_acl_is_associated_with_the_stage(options_synth: Synth) -> None:
    [association] = options_synth.resources("AWS::WAFv2::WebACLAssociation").values()
    assert association["Properties"]["WebACLArn"] == WAF_ACL_ARN
    stage_id = logical_id(options_synth, options_synth.stack.api.api.deployment_stage)
    assert stage_id in json.dumps(association["Properties"]["ResourceArn"])


def test_a_customer_managed_key_encrypts_tables_queues_bucket_and_logs(options_synth: Synth) -> None:
    stack = options_synth.stack
    for table in options_synth.resources("AWS::DynamoDB::Table").values():
        assert table["Properties"]["SSESpecification"] == {
            "KMSMasterKeyId": KMS_KEY_ARN,
            "SSEEnabled": True,
            "SSEType": "KMS",
        }
    queues = options_synth.resources("AWS::SQS::Queue").values()
    # inbox, outbox, their DLQs, the lifecycle and timers DLQs, the ledger stream's DLQ
    assert len(queues) == 7
    for queue in queues:
        assert queue["Properties"]["KmsMasterKeyId"] == KMS_KEY_ARN
        assert "SqsManagedSseEnabled" not in queue["Properties"]
    buckets = options_synth.resources("AWS::S3::Bucket")
    assert stack.checkpoints.bucket is not None
    assert set(buckets) == {
        logical_id(options_synth, stack.checkpoints.bucket),
        logical_id(options_synth, stack.archive.bucket),
        logical_id(options_synth, stack.audit_queries.results),
    }
    for bucket in buckets.values():
        [rule] = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert rule["ServerSideEncryptionByDefault"] == {
            "SSEAlgorithm": "aws:kms",
            "KMSMasterKeyID": KMS_KEY_ARN,
        }
    log_groups = options_synth.resources("AWS::Logs::LogGroup").values()
    # four functions (api, runner, lifecycle, dispatcher), the API's access log, Firehose's errors
    assert len(log_groups) == 6
    assert all(group["Properties"]["KmsKeyId"] == KMS_KEY_ARN for group in log_groups)
    # Firehose keeps the archive's buffered records under the key too.
    [stream] = options_synth.resources("AWS::KinesisFirehose::DeliveryStream").values()
    assert stream["Properties"]["DeliveryStreamEncryptionConfigurationInput"] == {
        "KeyType": "CUSTOMER_MANAGED_CMK",
        "KeyARN": KMS_KEY_ARN,
    }
    # Every function may use the key (queues, objects, and secrets encrypted under it); so may the
    # scheduler role, which sends to the timers DLQ, and Firehose's, which writes the archive bucket.
    for role in (
        stack.api_function.role,
        stack.runner.role,
        stack.timers.lifecycle.role,
        stack.dispatcher.role,
        stack.timers.scheduler_role,
        stack.archive.role,
    ):
        grants = [s for s in statements_of(options_synth, role) if s["Resource"] == KMS_KEY_ARN]
        assert [actions(s) for s in grants] == [["kms:Decrypt", "kms:GenerateDataKey"]]


def test_subscriber_accounts_may_subscribe_and_read_the_outbox(
    options_synth: Synth, default_synth: Synth
) -> None:
    stack = options_synth.stack
    accounts = [f"arn:{{AWS::Partition}}:iam::{a}:root" for a in ("111122223333", "444455556666")]
    topic_ref = {"Ref": logical_id(options_synth, stack.fanout.topic)}
    [topic_policy] = [
        p
        for p in options_synth.resources("AWS::SNS::TopicPolicy").values()
        if topic_ref in p["Properties"]["Topics"]
    ]
    [subscribe] = [
        s
        for s in topic_policy["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "SubscriberAccountsSubscribe"
    ]
    assert subscribe["Action"] == "sns:Subscribe"
    assert len(json.dumps(subscribe["Principal"]).split(":root")) == 3
    for account in ("111122223333", "444455556666"):
        assert account in json.dumps(subscribe["Principal"])
    outbox_ref = {"Ref": logical_id(options_synth, stack.fanout.outbox)}
    [queue_policy] = [
        p
        for p in options_synth.resources("AWS::SQS::QueuePolicy").values()
        if outbox_ref in p["Properties"]["Queues"]
    ]
    [read] = [
        s
        for s in queue_policy["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "SubscriberAccountsRead"
    ]
    assert actions(read) == sorted(OUTBOX_CONSUME_ACTIONS)
    assert "111122223333" in json.dumps(read["Principal"]) and "444455556666" in json.dumps(read["Principal"])
    assert accounts  # the principals are the accounts' roots, not a wildcard
    assert "SubscriberAccounts" not in json.dumps(default_synth.template_json)


def test_allowed_accounts_get_an_api_resource_policy(options_synth: Synth, default_synth: Synth) -> None:
    api = options_synth.template_json["Resources"][logical_id(options_synth, options_synth.stack.api.api)]
    statements = {s["Sid"]: s for s in api["Properties"]["Policy"]["Statement"]}
    callers = statements["SigV4CallersOfTheseAccounts"]
    assert (callers["Effect"], callers["Action"], callers["Resource"]) == (
        "Allow",
        "execute-api:Invoke",
        "execute-api:/*",
    )
    principals = json.dumps(callers["Principal"])
    assert "777788889999" in principals and "AWS::AccountId" in principals
    # The routes that authenticate in the function stay reachable (a policy that named no one for
    # them would refuse every signed request and every Slack click).
    open_routes = statements["RoutesAuthenticatedInTheFunction"]
    assert open_routes["Principal"] == {"AWS": "*"}
    assert f"execute-api:/{constants.API_STAGE}/POST/signed/questions/*/reply" in open_routes["Resource"]
    assert f"execute-api:/{constants.API_STAGE}/POST/slack/interactions" in open_routes["Resource"]
    default_api = default_synth.template_json["Resources"][
        logical_id(default_synth, default_synth.stack.api.api)
    ]
    assert "Policy" not in default_api["Properties"]


@pytest.mark.parametrize(
    ("context", "key"),
    [
        ({"stack_name": "a" * 58}, "stack_name"),
        ({"stack_name": "a" * (STACK_NAME_MAX + 1)}, "stack_name"),
        ({"stack_name": "1-starts-with-a-digit"}, "stack_name"),
        ({"stack_name": "under_score"}, "stack_name"),
        ({"tags": "team=payments"}, "tags"),
        ({"tags": '["team"]'}, "tags"),
        ({"tags": '{"aws:reserved": "x"}'}, "tags"),
        ({"tags": '{"team": 42}'}, "tags"),
        ({"waf_acl_arn": "arn:aws:wafv2:eu-west-1:123456789012:global/webacl/x/y"}, "waf_acl_arn"),
        ({"kms_key_arn": "alias/agent-wait"}, "kms_key_arn"),
        ({"subscriber_accounts": "1234"}, "subscriber_accounts"),
        ({"subscriber_accounts": '{"a": 1}'}, "subscriber_accounts"),
        ({"allowed_accounts": "111122223333,abc"}, "allowed_accounts"),
        (
            {
                "allowed_accounts": "111122223333",
                "auth": "jwt",
                "jwt_issuer": "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_A",
            },
            "allowed_accounts",
        ),
        ({"alarm_email": "not-an-address"}, "alarm_email"),
        (
            {"alarm_email": "a@example.com", "alarm_topic_arn": "arn:aws:sns:eu-west-1:123456789012:x"},
            "alarm_email",
        ),
        ({"deletion_protection": "maybe"}, "deletion_protection"),
        ({"api_gateway_account_role": "sometimes"}, "api_gateway_account_role"),
        ({"checkpoint_bucket": "ture"}, "checkpoint_bucket"),
    ],
)
def test_a_bad_option_is_one_line_naming_its_key(context: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key) as raised:
        StackConfig.from_context(context.get)
    assert "\n" not in str(raised.value)


def test_the_longest_stack_name_still_fits_every_name_built_from_it() -> None:
    name = "a" * STACK_NAME_MAX
    assert StackConfig.from_context({"stack_name": name}.get).stack_name == name
    assert len(f"{name}-lifecycle") == 64  # Lambda's limit for a function name


def test_the_app_exits_with_one_line_for_a_stack_name_too_long(tmp_path: Any) -> None:
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps({"stack_name": "a" * 58}),
        "CDK_OUTDIR": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "app.py"],
        cwd=constants.REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.startswith("agent-wait:")]
    assert len(lines) == 1 and "context stack_name=" in lines[0], done.stderr
    assert "Traceback" not in done.stderr
