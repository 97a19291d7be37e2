"""The signed route set and Slack's interactions in the template: no gateway authorizer, secrets granted."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tests.infra.conftest import SIGNED_CONTEXT
from tests.infra.test_template import _methods, logical_id, role_actions
from wait_service.channels.signing import SIGNED_PREFIX, SIGNED_ROUTES

if TYPE_CHECKING:
    from tests.infra.conftest import Synth

SECRET_READ = ("secretsmanager:GetSecretValue",)


def test_signed_routes_and_slack_have_no_gateway_authorizer_and_no_body_validation(
    signed_synth: Synth,
) -> None:
    methods = _methods(signed_synth)
    unauthenticated = {key for key, props in methods.items() if props["AuthorizationType"] == "NONE"}
    expected = {(m, SIGNED_PREFIX + p) for m, p in SIGNED_ROUTES} | {("POST", "/slack/interactions")}
    assert unauthenticated == expected
    for key in expected:
        assert "RequestValidatorId" not in methods[key] and "RequestModels" not in methods[key]
    # Everything else still needs SigV4.
    assert all(
        props["AuthorizationType"] == "AWS_IAM" for key, props in methods.items() if key not in expected
    )


def test_default_stack_has_the_signed_routes_but_not_slack(default_synth: Synth) -> None:
    methods = _methods(default_synth)
    assert ("POST", "/signed/questions/{question_id}/reply") in methods
    assert ("POST", "/signed/threads/{thread_id}/runs") in methods
    assert not any(path.startswith("/slack") for _, path in methods)


def test_unauthenticated_methods_carry_the_nag_reason(signed_synth: Synth) -> None:
    for method in signed_synth.stack.api.unauthenticated_methods:
        metadata = json.dumps(method.node.metadata, default=str)
        assert "AwsSolutions-APIG4" in metadata and "authenticated in the api Lambda" in metadata


def test_api_gets_the_key_arns_and_may_read_exactly_those_secrets(signed_synth: Synth) -> None:
    stack = signed_synth.stack
    function = signed_synth.resources("AWS::Lambda::Function")[
        logical_id(signed_synth, stack.api_function.function)
    ]
    variables = function["Properties"]["Environment"]["Variables"]
    keys = json.loads(SIGNED_CONTEXT["signing_keys"])
    assert json.loads(variables["AGENT_WAIT_SIGNING_KEYS"]) == keys
    assert variables["AGENT_WAIT_SLACK_SIGNING_SECRET"] == SIGNED_CONTEXT["slack_signing_secret"]
    assert variables["AGENT_WAIT_SLACK_BOT_TOKEN_SECRET"] == SIGNED_CONTEXT["slack_bot_token_secret"]
    [(actions, resources)] = [
        a for a in role_actions(signed_synth, stack.api_function.role) if a[0] == SECRET_READ
    ]
    assert sorted(resources) == sorted(
        [*keys.values(), SIGNED_CONTEXT["slack_signing_secret"], SIGNED_CONTEXT["slack_bot_token_secret"]]
    )


def test_runner_posts_to_the_channel_with_the_bot_token_only(signed_synth: Synth) -> None:
    stack = signed_synth.stack
    function = signed_synth.resources("AWS::Lambda::Function")[
        logical_id(signed_synth, stack.runner.function)
    ]
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["AGENT_WAIT_SLACK_CHANNEL"] == SIGNED_CONTEXT["slack_channel"]
    assert variables["AGENT_WAIT_SLACK_BOT_TOKEN_SECRET"] == SIGNED_CONTEXT["slack_bot_token_secret"]
    assert "AGENT_WAIT_SIGNING_KEYS" not in variables
    assert [a for a in role_actions(signed_synth, stack.runner.role) if a[0] == SECRET_READ] == [
        (SECRET_READ, SIGNED_CONTEXT["slack_bot_token_secret"])
    ]


def test_default_stack_reads_no_secret(default_synth: Synth) -> None:
    stack = default_synth.stack
    for role in (stack.api_function.role, stack.runner.role):
        assert not any(a[0] == SECRET_READ for a in role_actions(default_synth, role))
