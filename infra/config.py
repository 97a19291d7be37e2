"""Deployment settings a user changes without editing code: ``cdk.json`` context or ``-c key=value``.

Examples
--------
>>> cfg = StackConfig.from_context({"auth": "iam", "default_ttl": "3600"}.get)
>>> (cfg.auth, cfg.default_ttl, cfg.checkpointer, cfg.stack_name)
('iam', 3600, 'aws', 'agent-wait')
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from infra.constants import DEFAULT_STACK_NAME, RUNNER_MEMORY_MB
from infra.options import (
    context_accounts,
    context_arn,
    context_bool,
    context_email,
    context_stack_name,
    context_tags,
)
from infra.runner_config import (
    RUNNER_MEMORY_RANGE,
    RUNNER_TIMEOUT_RANGE,
    ConfigError,
    RunnerPolicy,
    check_names_apart,
    context_int,
    context_path,
    runner_environment,
    runner_policy,
    runner_secrets,
)
from wait_service.resources import RUNNER_TIMEOUT_SECONDS
from wait_service.settings import DEFAULT_GRAPH

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

AuthMode = Literal["iam", "jwt"]
Checkpointer = Literal["aws", "dynamodb"]

_SNS_ARN = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]+(\.fifo)?$")
_GRAPH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
# https://cognito-idp.<region>.amazonaws.com/<pool id>: the issuer of every token a user pool signs.
_COGNITO_ISSUER = re.compile(r"^https://cognito-idp\.([a-z0-9-]+)\.amazonaws\.com/([\w-]+_[0-9A-Za-z]+)/?$")
_SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+$")
_KEY_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

__all__ = ["ConfigError", "StackConfig"]


def _signing_keys(value: Any) -> dict[str, str]:
    """``signing_keys`` context: a mapping (``cdk.json``) or its JSON text (``-c signing_keys=...``)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ConfigError(f"context signing_keys: not JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise ConfigError('context signing_keys: expected {"key id": "<secret ARN>"}')
    keys: dict[str, str] = {}
    for key_id, arn in value.items():
        if not isinstance(key_id, str) or not _KEY_ID.match(key_id):
            raise ConfigError(f"context signing_keys: key id {key_id!r} must be 1-64 of A-Z a-z 0-9 . _ -")
        if not isinstance(arn, str) or not _SECRET_ARN.match(arn):
            raise ConfigError(
                f"context signing_keys[{key_id!r}]={arn!r}: expected the full ARN of a Secrets Manager secret"
            )
        keys[key_id] = arn
    return keys


@dataclass(frozen=True)
class StackConfig:
    """The settings read from CDK context.

    Parameters
    ----------
    stack_name
        CloudFormation stack name (context ``stack_name``, default ``agent-wait``).
    graph
        ``module:attribute`` of the graph the runner runs (context ``graph``).
    auth
        ``iam`` (SigV4 on every method, the default) or ``jwt`` (Cognito user pool authorizer).
    default_ttl
        Seconds a question lives when its policy sets no ttl; ``None``: no expiry.
    checkpointer
        ``aws`` (langgraph-checkpoint-aws ``DynamoDBSaver``) or ``dynamodb`` (langgraph-checkpoint-dynamodb).
    checkpoint_bucket
        An S3 bucket ``DynamoDBSaver`` offloads checkpoints over 350 KB to: on by default with
        ``checkpointer=aws``, impossible with ``dynamodb`` (no offload there). Without it the api
        accepts smaller answers (``wait_service.answer_limits``).
    runner_max_concurrency
        At most this many runner invocations at once (the inbox event source mapping's maximum
        concurrency, 2-1000): a burst of runs cannot take the account's concurrency or model budget.
    signing_keys
        ``{"key id": "<secret ARN>"}``: the keys the ``/signed`` routes accept (none: every signed
        request is refused with ``unknown_key``).
    slack_channel, slack_bot_token_secret, slack_signing_secret
        Slack: the channel questions are posted to and the secrets (full ARNs) holding the bot
        token and the app's signing secret; the signing secret turns on ``POST /slack/interactions``.
    cognito_user_pool_arn, jwt_issuer, jwt_audience
        ``jwt`` mode: the user pool (its ARN, or a Cognito issuer URL it is derived from) and the
        resource-server scope an access token must carry (optional).
    inbox_client_id, inbox_domain
        ``jwt`` mode: the user pool app client (no secret, authorization code grant) and the hosted
        UI domain the inbox page signs people in with; set both or neither.
    graph_source
        A folder bundled at the root of the runner's code (``graph`` is imported from it); ``None``:
        the sample (``examples/``). Relative paths are relative to the project root.
    graph_requirements
        A requirements file installed into the graph layer on top of the runner's own pins.
    runner_policy
        IAM statements (from a JSON file) added to the runner's role, and the cdk-nag findings the
        file acknowledges.
    runner_environment, runner_secrets
        The runner's extra environment variables, and ``{"ENV_NAME": "<secret ARN>"}`` whose
        values the runner reads at init (its role may read exactly those secrets).
    runner_memory, runner_timeout
        The runner's memory (MB) and timeout (seconds); the inbox hides a message six times the timeout.
    api_gateway_account_role
        Whether the stack sets API Gateway's account-level CloudWatch role (kept on destroy), so the
        stage's logging works in an account that has none yet.
    deletion_protection
        DynamoDB deletion protection on the tables (``false`` for throwaway development stacks).
    alarm_email
        An address the stack's alarm topic sends every alarm to (it confirms the subscription first).
    tags
        Tags applied to every resource of the stack.
    waf_acl_arn
        A regional WAF web ACL associated with the API's stage.
    kms_key_arn
        A customer-managed KMS key for the tables, queues, bucket and log groups; the functions may
        use it (and so decrypt secrets encrypted under it).
    subscriber_accounts
        Accounts that may subscribe to the topic and read the outbox queue.
    allowed_accounts
        Accounts whose SigV4-signed callers the API's resource policy admits (``auth=iam``).
    snapstart
        Lambda SnapStart on the runner and the api: each deploy publishes a version whose
        initialized environment is snapshotted, and an alias of it is what the inbox and API Gateway
        invoke (see the README, section SnapStart, for its cost and trade-offs).

    Examples
    --------
    >>> StackConfig.from_context({"auth": "jwt", "jwt_issuer":
    ...     "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Abc123"}.get).user_pool_id
    'eu-west-1_Abc123'
    """

    stack_name: str = DEFAULT_STACK_NAME
    graph: str = DEFAULT_GRAPH
    auth: AuthMode = "iam"
    default_ttl: int | None = None
    checkpointer: Checkpointer = "aws"
    checkpoint_bucket: bool = True
    runner_max_concurrency: int = 10
    cognito_user_pool_arn: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    # An existing SNS topic (e.g. the on-call one) every alarm notifies; none: console only.
    alarm_topic_arn: str | None = None
    # Signed requests: key id -> ARN of the Secrets Manager secret holding its shared secret.
    signing_keys: dict[str, str] = field(default_factory=dict)
    # Slack: the channel questions go to, and the secrets holding the bot token and signing secret.
    slack_channel: str | None = None
    slack_bot_token_secret: str | None = None
    slack_signing_secret: str | None = None
    # The inbox page's sign-in (auth=jwt): a public app client of the pool and its hosted UI domain.
    inbox_client_id: str | None = None
    inbox_domain: str | None = None
    # Bring your own agent: the runner's code, graph layer, permissions, environment and size.
    graph_source: Path | None = None
    graph_requirements: Path | None = None
    runner_policy: RunnerPolicy | None = None
    runner_environment: dict[str, str] = field(default_factory=dict)
    runner_secrets: dict[str, str] = field(default_factory=dict)
    runner_memory: int = RUNNER_MEMORY_MB
    runner_timeout: int = RUNNER_TIMEOUT_SECONDS
    # Operating the stack: a first deploy, alarms someone hears, tags, WAF, KMS, other accounts.
    api_gateway_account_role: bool = True
    deletion_protection: bool = True
    alarm_email: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    waf_acl_arn: str | None = None
    kms_key_arn: str | None = None
    subscriber_accounts: tuple[str, ...] = ()
    allowed_accounts: tuple[str, ...] = ()
    snapstart: bool = False

    @classmethod
    def from_context(cls, get: Callable[[str], Any]) -> StackConfig:
        """Read and check every setting; ``get`` is ``app.node.try_get_context`` or a dict's ``get``."""

        def text(key: str) -> str | None:
            value = get(key)
            if value is None or str(value).strip() == "":
                return None
            return str(value).strip()

        auth = text("auth") or "iam"
        if auth not in ("iam", "jwt"):
            raise ConfigError(f"context auth={auth!r}: expected 'iam' or 'jwt'")
        checkpointer = text("checkpointer") or "aws"
        if checkpointer not in ("aws", "dynamodb"):
            raise ConfigError(f"context checkpointer={checkpointer!r}: expected 'aws' or 'dynamodb'")
        graph = text("graph") or DEFAULT_GRAPH
        if not _GRAPH.match(graph):
            raise ConfigError(f"context graph={graph!r}: expected 'package.module:attribute'")
        ttl_text = text("default_ttl")
        default_ttl: int | None = None
        if ttl_text is not None:
            if not ttl_text.isdigit() or int(ttl_text) <= 0:
                raise ConfigError(f"context default_ttl={ttl_text!r}: expected a positive number of seconds")
            default_ttl = int(ttl_text)
        checkpoint_bucket = context_bool(
            "checkpoint_bucket", get("checkpoint_bucket"), default=checkpointer == "aws"
        )
        concurrency_text = text("runner_max_concurrency") or "10"
        if not concurrency_text.isdigit() or not 2 <= int(concurrency_text) <= 1000:
            raise ConfigError(
                f"context runner_max_concurrency={concurrency_text!r}: expected a number from 2 to 1000 "
                "(the limits of an SQS event source mapping's maximum concurrency)"
            )
        config = cls(
            stack_name=context_stack_name(get("stack_name"), DEFAULT_STACK_NAME),
            graph=graph,
            auth=auth,  # type: ignore[arg-type]  # checked against the Literal above
            default_ttl=default_ttl,
            checkpointer=checkpointer,  # type: ignore[arg-type]
            checkpoint_bucket=checkpoint_bucket,
            runner_max_concurrency=int(concurrency_text),
            cognito_user_pool_arn=text("cognito_user_pool_arn"),
            jwt_issuer=text("jwt_issuer"),
            jwt_audience=text("jwt_audience"),
            alarm_topic_arn=text("alarm_topic_arn"),
            signing_keys=_signing_keys(get("signing_keys")),
            slack_channel=text("slack_channel"),
            slack_bot_token_secret=text("slack_bot_token_secret"),
            slack_signing_secret=text("slack_signing_secret"),
            inbox_client_id=text("inbox_client_id"),
            inbox_domain=text("inbox_domain"),
            graph_source=context_path("graph_source", get("graph_source"), folder=True),
            graph_requirements=context_path("graph_requirements", get("graph_requirements"), folder=False),
            runner_policy=runner_policy(get("runner_policy")),
            runner_environment=runner_environment(get("runner_environment")),
            runner_secrets=runner_secrets(get("runner_secrets")),
            runner_memory=context_int(
                "runner_memory", get("runner_memory"), RUNNER_MEMORY_MB, RUNNER_MEMORY_RANGE, "MB"
            ),
            runner_timeout=context_int(
                "runner_timeout",
                get("runner_timeout"),
                RUNNER_TIMEOUT_SECONDS,
                RUNNER_TIMEOUT_RANGE,
                "seconds",
            ),
            api_gateway_account_role=context_bool(
                "api_gateway_account_role", get("api_gateway_account_role"), default=True
            ),
            deletion_protection=context_bool("deletion_protection", get("deletion_protection"), default=True),
            alarm_email=context_email("alarm_email", get("alarm_email")),
            tags=context_tags(get("tags")),
            waf_acl_arn=context_arn("waf_acl_arn", get("waf_acl_arn"), "waf_acl"),
            kms_key_arn=context_arn("kms_key_arn", get("kms_key_arn"), "kms_key"),
            subscriber_accounts=context_accounts("subscriber_accounts", get("subscriber_accounts")),
            allowed_accounts=context_accounts("allowed_accounts", get("allowed_accounts")),
            snapstart=context_bool("snapstart", get("snapstart"), default=False),
        )
        check_names_apart(config.runner_environment, config.runner_secrets)
        for key in ("slack_bot_token_secret", "slack_signing_secret"):
            value = getattr(config, key)
            if value is not None and not _SECRET_ARN.match(value):
                raise ConfigError(
                    f"context {key}={value!r}: expected the full ARN of a Secrets Manager secret "
                    "(arn:aws:secretsmanager:<region>:<account>:secret:<name>-<6 characters>)"
                )
        if (config.slack_channel is None) != (config.slack_bot_token_secret is None):
            raise ConfigError(
                "context slack_channel and slack_bot_token_secret go together: set both or neither"
            )
        if (config.inbox_client_id is None) != (config.inbox_domain is None):
            raise ConfigError("context inbox_client_id and inbox_domain go together: set both or neither")
        if config.inbox_client_id is not None and config.auth != "jwt":
            raise ConfigError(
                "context inbox_client_id needs auth=jwt; with auth=iam use `agent-wait inbox --api <ApiUrl>`"
            )
        if config.auth == "jwt" and config.user_pool_id is None:
            raise ConfigError(
                "context auth=jwt needs cognito_user_pool_arn, or jwt_issuer set to a Cognito user pool "
                "issuer (https://cognito-idp.<region>.amazonaws.com/<pool id>): an API Gateway REST API "
                "validates JWTs natively only through a Cognito user pool authorizer"
                " (see the README, section Deploy to AWS)"
            )
        if config.alarm_topic_arn is not None and not _SNS_ARN.match(config.alarm_topic_arn):
            raise ConfigError(
                f"context alarm_topic_arn={config.alarm_topic_arn!r}: "
                "expected arn:aws:sns:<region>:<account>:<topic name>"
            )
        if config.alarm_email is not None and config.alarm_topic_arn is not None:
            raise ConfigError(
                "context alarm_email goes with the stack's own alarm topic: with alarm_topic_arn, "
                "subscribe the address to that topic instead"
            )
        if config.allowed_accounts and config.auth != "iam":
            raise ConfigError(
                "context allowed_accounts needs auth=iam: the API's resource policy admits SigV4 callers "
                "of those accounts, and a Cognito authorizer has no account"
            )
        if config.checkpoint_bucket and config.checkpointer != "aws":
            raise ConfigError(
                "context checkpoint_bucket needs checkpointer=aws (only DynamoDBSaver offloads)"
            )
        return config

    @property
    def slack_enabled(self) -> bool:
        """Whether Slack interactions are served (``POST /slack/interactions``)."""
        return self.slack_signing_secret is not None

    @property
    def user_pool_id(self) -> str | None:
        """The Cognito user pool id, from ``cognito_user_pool_arn`` or a Cognito ``jwt_issuer``."""
        if self.cognito_user_pool_arn:
            return self.cognito_user_pool_arn.rsplit("/", 1)[-1]
        match = _COGNITO_ISSUER.match(self.jwt_issuer or "")
        return match.group(2) if match else None

    @property
    def user_pool_region(self) -> str | None:
        """The region of the user pool when it comes from ``jwt_issuer``; ``None`` for an ARN."""
        match = _COGNITO_ISSUER.match(self.jwt_issuer or "")
        return match.group(1) if match and not self.cognito_user_pool_arn else None
