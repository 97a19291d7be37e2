"""Context ``webhooks`` in the template: delivery queues on the topic, the function, its DLQ and role.

``signed_synth`` configures two webhooks (tests/infra/conftest.py ``WEBHOOKS``); the other variants
configure none and deploy none of this.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from test_template import arn_of, logical_id, role_actions
from webhook_context import WEBHOOKS

from infra.webhooks import DELIVERY_CONSUME_ACTIONS
from wait_service.resources import WEBHOOK_BATCH_SIZE, WEBHOOK_QUEUES, WEBHOOK_TIMEOUT_SECONDS

if TYPE_CHECKING:
    from conftest import Synth

pytestmark = pytest.mark.infra


def _hooks(synth: Synth) -> Any:
    assert synth.stack.webhooks is not None
    return synth.stack.webhooks


def test_only_a_deployment_with_webhooks_has_them(default_synth: Synth) -> None:
    assert default_synth.stack.webhooks is None
    names = [q["Properties"]["QueueName"] for q in default_synth.resources("AWS::SQS::Queue").values()]
    assert not any("webhook" in name for name in names)


def test_each_webhook_has_a_delivery_queue_redriven_to_the_shared_dlq(signed_synth: Synth) -> None:
    hooks = _hooks(signed_synth)
    queues = signed_synth.resources("AWS::SQS::Queue")
    assert len(hooks.queues) == len(WEBHOOKS)
    dlq = queues[logical_id(signed_synth, hooks.dlq)]["Properties"]
    assert dlq["QueueName"] == "aw-signed-webhooks-dlq" and "FifoQueue" not in dlq
    for number, queue in enumerate(hooks.queues, start=1):
        props = queues[logical_id(signed_synth, queue)]["Properties"]
        assert props["QueueName"] == f"aw-signed-webhook-{number}"
        assert "FifoQueue" not in props  # SNS standard topics deliver to standard queues only
        assert props["VisibilityTimeout"] == WEBHOOK_QUEUES.visibility_timeout >= WEBHOOK_TIMEOUT_SECONDS
        assert props["RedrivePolicy"] == {
            "deadLetterTargetArn": arn_of(signed_synth, hooks.dlq),
            "maxReceiveCount": 5,
        }
        assert props["SqsManagedSseEnabled"] is True


def test_each_queue_is_subscribed_raw_with_a_filter_policy_on_the_type_attribute(signed_synth: Synth) -> None:
    hooks = _hooks(signed_synth)
    topic = {"Ref": logical_id(signed_synth, signed_synth.stack.fanout.topic)}
    subscriptions = sorted(
        (s["Properties"] for s in signed_synth.resources("AWS::SNS::Subscription").values()),
        key=lambda p: json.dumps(p["Endpoint"]),
    )
    expected = sorted(
        (
            {
                "Protocol": "sqs",
                "TopicArn": topic,
                "Endpoint": arn_of(signed_synth, queue),
                "RawMessageDelivery": True,
                "FilterPolicy": {"type": sorted(hook["types"])},
                # what SNS itself cannot deliver lands in the same alarmed DLQ
                "RedrivePolicy": {"deadLetterTargetArn": arn_of(signed_synth, hooks.dlq)},
            }
            for queue, hook in zip(hooks.queues, WEBHOOKS, strict=True)
        ),
        key=lambda p: json.dumps(p["Endpoint"]),
    )
    assert subscriptions == expected


def test_the_delivery_function_consumes_every_queue_with_partial_batch_failures(signed_synth: Synth) -> None:
    hooks = _hooks(signed_synth)
    function_ref = {"Ref": logical_id(signed_synth, hooks.delivery.function)}
    mappings = [
        m["Properties"]
        for m in signed_synth.resources("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == function_ref
    ]
    assert sorted(json.dumps(m["EventSourceArn"]) for m in mappings) == sorted(
        json.dumps(arn_of(signed_synth, q)) for q in hooks.queues
    )
    for mapping in mappings:
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert mapping["BatchSize"] == WEBHOOK_BATCH_SIZE
    function = signed_synth.resources("AWS::Lambda::Function")[
        logical_id(signed_synth, hooks.delivery.function)
    ]
    props = function["Properties"]
    assert props["Timeout"] == WEBHOOK_TIMEOUT_SECONDS
    variables = props["Environment"]["Variables"]
    assert variables["AGENT_WAIT_WEBHOOK_DLQ_URL"] == {"Ref": logical_id(signed_synth, hooks.dlq)}
    # The webhooks as the function reads them: secret names only, never a value.
    rendered = json.dumps(variables["AGENT_WAIT_WEBHOOKS"])
    for hook in WEBHOOKS:
        assert hook["url"] in rendered and hook["secret_name"] in rendered
    assert '\\"key_id\\":\\"payments\\"' in rendered


def test_the_delivery_role_grants_exactly_the_queues_dlq_and_secrets(signed_synth: Synth) -> None:
    hooks = _hooks(signed_synth)
    grants = role_actions(signed_synth, hooks.delivery.role)
    queue_arns = [arn_of(signed_synth, q) for q in hooks.queues]
    by_actions = dict(grants)
    assert by_actions[tuple(sorted(DELIVERY_CONSUME_ACTIONS))] == queue_arns
    assert by_actions[("sqs:SendMessage",)] == arn_of(signed_synth, hooks.dlq)
    secrets = by_actions[("secretsmanager:GetSecretValue",)]
    rendered = json.dumps(secrets)
    # By name: that name plus the six characters Secrets Manager appends; by ARN: that ARN.
    assert ":secret:agent-wait/tickets-webhook-??????" in rendered
    assert WEBHOOKS[1]["secret_name"] in rendered
    assert len(secrets) == 2
    assert {a for actions, _ in grants for a in actions} == {
        *DELIVERY_CONSUME_ACTIONS,
        "sqs:SendMessage",
        "secretsmanager:GetSecretValue",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "xray:PutTelemetryRecords",
        "xray:PutTraceSegments",
    }


def test_the_webhooks_dlq_is_alarmed(signed_synth: Synth) -> None:
    hooks = _hooks(signed_synth)
    alarm = signed_synth.stack.observability.dlq_alarms["webhooks"]
    props = signed_synth.resources("AWS::CloudWatch::Alarm")[logical_id(signed_synth, alarm)]["Properties"]
    assert props["AlarmName"] == "aw-signed-WebhooksDlqDepth"
    assert props["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [logical_id(signed_synth, hooks.dlq), "QueueName"]}}
    ]


def test_the_delivery_handler_imports_from_the_built_assets(signed_synth: Synth) -> None:
    from infra.report import AssemblyReport

    report = AssemblyReport.load(signed_synth.outdir)
    [delivery] = [f for f in report.functions if "The webhooks Lambda" in (f.path / "handler.py").read_text()]
    assert [layer.display_name for layer in delivery.layers] == ["Layers/Core/Code", "Layers/AgentWait/Code"]
    result = report.import_handler(delivery)
    assert result.ok, result.output
    assert "langgraph" not in result.modules
    assert {"handler", "wait_service", "agent_wait", "aws_lambda_powertools"} <= set(result.modules)
