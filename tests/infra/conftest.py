"""Synthesize the app once per session per configuration; every infra test reads these assemblies.

Synth with local bundling takes seconds once the layers are cached (``infra.constants.BUNDLE_CACHE_DIR``,
keyed on the pinned requirements, shared by the machine's clones); the first run on a machine
downloads the wheels and builds each layer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
from webhook_context import WEBHOOKS

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from aws_cdk.assertions import Template

    from infra.stack import AgentWaitStack

# The second variant exercises every branch the default does not: Cognito JWT auth with an audience
# scope and the inbox page's sign-in, the langgraph-checkpoint-dynamodb backend, a default ttl and a
# custom stack name.
JWT_CONTEXT = {
    "stack_name": "aw-jwt",
    "auth": "jwt",
    "jwt_issuer": "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Abc123",
    "jwt_audience": "agent-wait/reply",
    "inbox_client_id": "inbox-client-1",
    "inbox_domain": "aw-jwt.auth.eu-west-1.amazoncognito.com",
    "checkpointer": "dynamodb",
    "default_ttl": "3600",
    "graph": "examples.refund_agent:build_graph",
}
# Also SnapStart: the runner and the api invoked through an alias of a published version.
BUCKET_CONTEXT = {
    "stack_name": "aw-bucket",
    "checkpoint_bucket": "true",
    "alarm_topic_arn": "arn:aws:sns:eu-west-1:123456789012:on-call",
    "runner_max_concurrency": "25",
    # Throughput settings: the stage's throttle per method and the runner's reserved concurrency.
    "api_rate": "1200",
    "api_burst": "2400",
    "runner_reserved_concurrency": "40",
    "dispatcher_parallelization": "10",
    "listing_shards": "16",
    "operator_principals": json.dumps(
        ["arn:aws:iam::123456789012:role/on-call", "arn:aws:iam::123456789012:role/sre/*"]
    ),
    "audit_retention_days": "730",
    "audit_object_lock": "governance",
    "snapstart": "true",
    # And a LangChain v1 agent (create_agent, HumanInTheLoopMiddleware) with its own requirements.
    "graph": "examples.middleware_agent:build_graph",
    "graph_requirements": "examples/middleware_agent_requirements.txt",
}

# Signed requests and Slack: two signing keys, a channel, the bot token and the signing secret;
# and two webhooks (a secret by name, one by full ARN with its own key id).
_SECRETS = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:agent-wait/"
SIGNED_CONTEXT = {
    "stack_name": "aw-signed",
    "signing_keys": json.dumps({"ops": _SECRETS + "ops-AbCdEf", "pager": _SECRETS + "pager-GhIjKl"}),
    "slack_channel": "C0123456789",
    "slack_bot_token_secret": _SECRETS + "slack-bot-MnOpQr",
    "slack_signing_secret": _SECRETS + "slack-signing-StUvWx",
    "webhooks": json.dumps(WEBHOOKS),
    # And a Strands agent (its sessions in the checkpoint bucket).
    "framework": "strands",
    "agent": "examples.strands_agent:build_agent",
}

# Every operating option on at once: alarm email, tags, WAF, a customer-managed key, subscriber and
# caller accounts; deletion protection and the API Gateway account role off (their non-defaults).
KMS_KEY_ARN = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
WAF_ACL_ARN = (
    "arn:aws:wafv2:eu-west-1:123456789012:regional/webacl/agent-wait/0f0e0d0c-0b0a-0908-0706-050403020100"
)
OPTIONS_CONTEXT = {
    "stack_name": "aw-options",
    "alarm_email": "on-call@example.com",
    "tags": json.dumps({"team": "payments", "cost-center": "cc 42"}),
    "waf_acl_arn": WAF_ACL_ARN,
    "kms_key_arn": KMS_KEY_ARN,
    "subscriber_accounts": "111122223333, 444455556666",
    "allowed_accounts": json.dumps(["777788889999"]),
    "deletion_protection": "false",
    "api_gateway_account_role": "false",
    "slack_channel": "C0123456789",
    "slack_bot_token_secret": _SECRETS + "slack-bot-MnOpQr",
    "slack_signing_secret": _SECRETS + "slack-signing-StUvWx",
    "lambda_system_log_level": "warn",
    # And a Pydantic AI agent instead of a LangGraph graph (the runner's layer carries its package).
    "framework": "pydantic_ai",
    "agent": "examples.pydantic_ai_agent:agent",
}


def cdk_json_context() -> dict[str, Any]:
    """The context of the checked-in ``cdk.json``, as ``cdk synth`` passes it to the app."""
    from infra.constants import REPO_ROOT

    return dict(json.loads((REPO_ROOT / "cdk.json").read_text())["context"])


@dataclass
class Synth:
    outdir: Path
    stack: AgentWaitStack
    template_path: Path

    @property
    def template_json(self) -> dict[str, Any]:
        return json.loads(self.template_path.read_text())

    @property
    def template(self) -> Template:
        from aws_cdk.assertions import Template

        return Template.from_json(self.template_json)

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template_json["Resources"].items() if v["Type"] == kind}


def _synth(outdir: Path, context: dict[str, Any]) -> Synth:
    import aws_cdk as cdk

    from app import build_app

    app, stack = build_app(cdk.App(outdir=str(outdir), context=context))
    app.synth()
    return Synth(outdir, stack, outdir / f"{stack.stack_name}.template.json")


@pytest.fixture(scope="session")
def synth_factory(tmp_path_factory: pytest.TempPathFactory) -> Callable[[dict[str, Any]], Synth]:
    cache: dict[str, Synth] = {}

    def make(context: dict[str, Any]) -> Synth:
        key = json.dumps(context, sort_keys=True)
        if key not in cache:
            cache[key] = _synth(tmp_path_factory.mktemp("cdk.out"), context)
        return cache[key]

    return make


@pytest.fixture(scope="session")
def default_synth(synth_factory: Callable[[dict[str, str]], Synth]) -> Synth:
    return synth_factory({})


@pytest.fixture(scope="session")
def jwt_synth(synth_factory: Callable[[dict[str, str]], Synth]) -> Synth:
    return synth_factory(JWT_CONTEXT)


@pytest.fixture(scope="session")
def bucket_synth(synth_factory: Callable[[dict[str, str]], Synth]) -> Synth:
    return synth_factory(BUCKET_CONTEXT)


@pytest.fixture(scope="session")
def signed_synth(synth_factory: Callable[[dict[str, str]], Synth]) -> Synth:
    return synth_factory(SIGNED_CONTEXT)


@pytest.fixture(params=["default", "jwt", "bucket", "signed"])
def any_synth(request: pytest.FixtureRequest) -> Synth:
    return request.getfixturevalue(f"{request.param}_synth")


@pytest.fixture(scope="session")
def options_synth(synth_factory: Callable[[dict[str, Any]], Synth]) -> Synth:
    return synth_factory(OPTIONS_CONTEXT)


@pytest.fixture(scope="session")
def cdk_json_synth(synth_factory: Callable[[dict[str, Any]], Synth]) -> Synth:
    return synth_factory(cdk_json_context())


@pytest.fixture(params=["default", "jwt", "bucket", "signed", "options"])
def every_synth(request: pytest.FixtureRequest) -> Synth:
    """``any_synth`` and the one with every operating option on (cdk-nag and cfn-lint run on each)."""
    return request.getfixturevalue(f"{request.param}_synth")
