"""Context → StackConfig, and the pinned requirements the layers are built from."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import pytest

from infra.config import SYSTEM_LOG_LEVELS, ConfigError, StackConfig
from infra.requirements import layer_requirements, pinned_versions, remove_distributions_in

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.infra


def test_defaults() -> None:
    empty: dict[str, str] = {}
    config = StackConfig.from_context(empty.get)
    assert config == StackConfig()
    assert (config.auth, config.checkpointer, config.stack_name) == ("iam", "aws", "agent-wait")
    assert config.graph == "examples.refund_agent:build_graph"
    assert config.default_ttl is None
    assert (config.checkpoint_bucket, config.runner_max_concurrency) == (True, 10)
    assert (config.api_rate, config.api_burst, config.runner_reserved_concurrency) == (50, 100, None)


def test_throughput_settings_from_context() -> None:
    config = StackConfig.from_context(
        {
            "api_rate": "1200",
            "api_burst": "2400",
            "runner_max_concurrency": "300",
            "runner_reserved_concurrency": "300",
        }.get
    )
    assert (config.api_rate, config.api_burst) == (1200, 2400)
    assert (config.runner_max_concurrency, config.runner_reserved_concurrency) == (300, 300)


def test_checkpoint_bucket_defaults_to_on_where_the_checkpointer_can_offload() -> None:
    assert StackConfig.from_context({"checkpointer": "dynamodb"}.get).checkpoint_bucket is False
    assert StackConfig.from_context({"checkpoint_bucket": "false"}.get).checkpoint_bucket is False
    assert StackConfig.from_context({"runner_max_concurrency": "200"}.get).runner_max_concurrency == 200


def test_checkpoint_compression_is_on_where_the_checkpointer_compresses() -> None:
    assert StackConfig().checkpoint_compression is True
    assert StackConfig.from_context({"checkpointer": "dynamodb"}.get).checkpoint_compression is False
    assert StackConfig.from_context({"checkpoint_compression": "false"}.get).checkpoint_compression is False


def test_snapstart_is_off_unless_asked_for() -> None:
    assert StackConfig().snapstart is False
    assert StackConfig.from_context({"snapstart": "true"}.get).snapstart is True
    assert StackConfig.from_context({"snapstart": ""}.get).snapstart is False


def test_lambdas_own_log_lines_are_kept_unless_asked_otherwise() -> None:
    from aws_cdk import aws_lambda as lambda_

    assert StackConfig().lambda_system_log_level == "INFO"

    def level(value: str) -> str:
        return StackConfig.from_context({"lambda_system_log_level": value}.get).lambda_system_log_level

    assert (level(" warn "), level("Debug"), level("")) == ("WARN", "DEBUG", "INFO")
    # The levels the setting takes are the ones the CDK (and Lambda) have.
    assert set(SYSTEM_LOG_LEVELS) == {level.name for level in lambda_.SystemLogLevel}


def test_empty_strings_from_cdk_json_mean_unset() -> None:
    assert StackConfig.from_context({"default_ttl": "", "auth": "", "jwt_issuer": ""}.get) == StackConfig()


@pytest.mark.parametrize(
    ("context", "key"),
    [
        ({"auth": "basic"}, "auth"),
        ({"checkpointer": "redis"}, "checkpointer"),
        ({"graph": "no_colon"}, "graph"),
        ({"default_ttl": "-5"}, "default_ttl"),
        ({"auth": "jwt"}, "auth=jwt"),
        ({"auth": "jwt", "jwt_issuer": "https://login.example.com/"}, "auth=jwt"),
        ({"checkpoint_bucket": "true", "checkpointer": "dynamodb"}, "checkpoint_bucket"),
        ({"checkpoint_compression": "true", "checkpointer": "dynamodb"}, "checkpoint_compression"),
        ({"checkpoint_compression": "maybe"}, "checkpoint_compression"),
        ({"alarm_topic_arn": "on-call"}, "alarm_topic_arn"),
        ({"inbox_client_id": "c1"}, "inbox_client_id and inbox_domain"),
        ({"inbox_client_id": "c1", "inbox_domain": "auth.example.com"}, "inbox_client_id needs auth=jwt"),
        ({"runner_max_concurrency": "1"}, "runner_max_concurrency"),
        ({"runner_max_concurrency": "1001"}, "runner_max_concurrency"),
        ({"runner_max_concurrency": "ten"}, "runner_max_concurrency"),
        ({"dispatcher_parallelization": "0"}, "dispatcher_parallelization"),
        ({"dispatcher_parallelization": "11"}, "dispatcher_parallelization"),
        ({"dispatcher_parallelization": "two"}, "dispatcher_parallelization"),
        ({"api_rate": "0"}, "api_rate"),
        ({"api_rate": "fast"}, "api_rate"),
        ({"api_burst": "-1"}, "api_burst"),
        ({"runner_reserved_concurrency": "0"}, "runner_reserved_concurrency"),
        ({"runner_reserved_concurrency": "5"}, "runner_reserved_concurrency"),
        (
            {"runner_reserved_concurrency": "20", "runner_max_concurrency": "50"},
            "runner_reserved_concurrency",
        ),
        ({"snapstart": "sometimes"}, "snapstart"),
        ({"lambda_system_log_level": "ERROR"}, "lambda_system_log_level"),
    ],
)
def test_bad_context_names_the_key(context: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        StackConfig.from_context(context.get)


def test_jwt_pool_from_arn_or_cognito_issuer() -> None:
    from_arn = StackConfig.from_context(
        {
            "auth": "jwt",
            "cognito_user_pool_arn": "arn:aws:cognito-idp:us-east-1:123456789012:userpool/us-east-1_X",
        }.get
    )
    assert (from_arn.user_pool_id, from_arn.user_pool_region) == ("us-east-1_X", None)
    from_issuer = StackConfig.from_context(
        {"auth": "jwt", "jwt_issuer": "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Abc123"}.get
    )
    assert (from_issuer.user_pool_id, from_issuer.user_pool_region) == ("eu-west-1_Abc123", "eu-west-1")


def test_layer_requirements_are_the_pyproject_pins() -> None:
    pins = pinned_versions()
    core = layer_requirements("core")
    assert f"pydantic=={pins['pydantic']}" in core
    assert f"aws-lambda-powertools[tracer,validation]=={pins['aws-lambda-powertools']}" in core
    graph = layer_requirements("graph")
    assert set(core) < set(graph)
    assert f"langgraph=={pins['langgraph']}" in graph
    assert not any(r.startswith("langgraph-checkpoint-dynamodb") for r in graph)
    assert any(
        r.startswith("langgraph-checkpoint-dynamodb==")
        for r in layer_requirements("graph", checkpointer="dynamodb")
    )


def test_remove_distributions_in_drops_only_shared_versions(tmp_path: Path) -> None:
    site, other = tmp_path / "site", tmp_path / "other"
    for root, dists in ((site, ["a-1.0", "b-2.0"]), (other, ["a-1.0", "b-3.0"])):
        for dist in dists:
            name = dist.split("-")[0]
            (root / name).mkdir(parents=True)
            (root / name / "__init__.py").write_text("")
            info = root / f"{dist}.dist-info"
            info.mkdir()
            (info / "RECORD").write_text(f"{name}/__init__.py,,\n{dist}.dist-info/RECORD,,\n")
    assert remove_distributions_in(site, other) == ["a-1.0"]
    assert sorted(p.name for p in site.iterdir()) == ["b", "b-2.0.dist-info"]


OPS_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:agent-wait/ops-AbCdEf"


def test_signing_keys_come_as_a_mapping_or_its_json() -> None:
    as_json = StackConfig.from_context({"signing_keys": json.dumps({"ops": OPS_ARN})}.get)
    mapping: dict[str, Any] = {"signing_keys": {"ops": OPS_ARN}}
    as_mapping = StackConfig.from_context(mapping.get)
    assert as_json.signing_keys == as_mapping.signing_keys == {"ops": OPS_ARN}
    assert StackConfig.from_context({}.get).signing_keys == {}


@pytest.mark.parametrize(
    ("context", "named"),
    [
        ({"signing_keys": "{not json"}, "signing_keys"),
        ({"signing_keys": '["ops"]'}, "signing_keys"),
        ({"signing_keys": json.dumps({"ops": "agent-wait/ops"})}, "signing_keys['ops']"),
        ({"signing_keys": json.dumps({"bad id!": OPS_ARN})}, "key id"),
        ({"slack_signing_secret": "slack-signing"}, "slack_signing_secret"),
        ({"slack_channel": "C1"}, "slack_channel and slack_bot_token_secret"),
    ],
)
def test_signing_and_slack_context_is_checked(context: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(named)):
        StackConfig.from_context(context.get)


def test_slack_interactions_are_on_with_a_signing_secret() -> None:
    assert not StackConfig.from_context({}.get).slack_enabled
    assert StackConfig.from_context({"slack_signing_secret": OPS_ARN}.get).slack_enabled


HOOK = {
    "url": "https://tickets.example.com/hooks",
    "secret_name": "agent-wait/tickets",
    "types": ["wait.created"],
}


def test_webhooks_come_as_a_list_or_its_json() -> None:
    as_json = StackConfig.from_context({"webhooks": json.dumps([HOOK])}.get)
    as_list = StackConfig.from_context({"webhooks": [HOOK, HOOK | {"key_id": "k2"}]}.get)
    [hook] = as_json.webhooks
    assert (hook.url, hook.secret_name, hook.types, hook.key_id) == (
        "https://tickets.example.com/hooks",
        "agent-wait/tickets",
        ("wait.created",),
        "agent-wait/tickets",  # the key id defaults to the secret's name
    )
    assert [h.key_id for h in as_list.webhooks] == ["agent-wait/tickets", "k2"]
    assert StackConfig.from_context({}.get).webhooks == ()
    assert StackConfig.from_context({"webhooks": ""}.get).webhooks == ()
    by_arn = StackConfig.from_context({"webhooks": [HOOK | {"secret_name": OPS_ARN}]}.get)
    assert by_arn.webhooks[0].key_id == OPS_ARN.rsplit(":", 1)[-1]


@pytest.mark.parametrize(
    ("webhooks", "named"),
    [
        ("[not json", "context webhooks: not JSON"),
        (json.dumps(HOOK), "context webhooks: expected a list"),
        (json.dumps(["https://x"]), "context webhooks[0]: expected"),
        (json.dumps([HOOK | {"secrets": "x"}]), "context webhooks[0]: unknown key 'secrets'"),
        (json.dumps([HOOK | {"url": "ftp://x/h"}]), "context webhooks[0].url='ftp://x/h'"),
        (
            json.dumps([HOOK | {"url": "http://x/h"}]),
            "context webhooks[0].url='http://x/h': expected https://",
        ),
        (
            json.dumps([HOOK, HOOK | {"secret_name": "bad name!"}]),
            "context webhooks[1].secret_name='bad name!'",
        ),
        (
            json.dumps([{k: v for k, v in HOOK.items() if k != "secret_name"}]),
            "context webhooks[0].secret_name",
        ),
        (json.dumps([HOOK | {"types": []}]), "context webhooks[0].types=[]"),
        (json.dumps([HOOK | {"types": "wait.created"}]), "context webhooks[0].types='wait.created'"),
        (json.dumps([HOOK | {"types": ["created"]}]), "context webhooks[0].types: 'created'"),
        (json.dumps([HOOK | {"key_id": ""}]), "context webhooks[0].key_id=''"),
    ],
)
def test_webhooks_context_is_checked_with_one_line_naming_the_key(webhooks: str, named: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(named)) as raised:
        StackConfig.from_context({"webhooks": webhooks}.get)
    assert "\n" not in str(raised.value)
