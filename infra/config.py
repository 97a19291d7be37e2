"""Deployment settings a user changes without editing code: ``cdk.json`` context or ``-c key=value``.

Examples
--------
>>> cfg = StackConfig.from_context({"auth": "iam", "default_ttl": "3600"}.get)
>>> (cfg.auth, cfg.default_ttl, cfg.checkpointer, cfg.stack_name)
('iam', 3600, 'aws', 'agent-wait')
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

from infra.constants import (
    API_THROTTLE_BURST,
    API_THROTTLE_RATE,
    DEFAULT_STACK_NAME,
    DISPATCHER_PARALLELIZATION,
    RUNNER_MAX_CONCURRENCY,
    RUNNER_MEMORY_MB,
)
from infra.options import (
    context_accounts,
    context_arn,
    context_bool,
    context_choice,
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
from wait_service.ledger.shards import MAX_STATUS_SHARDS, STATUS_SHARDS
from wait_service.resources import RUNNER_TIMEOUT_SECONDS, TTL_DAYS
from wait_service.settings import DEFAULT_GRAPH

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

AuthMode = Literal["iam", "jwt"]
Checkpointer = Literal["aws", "dynamodb"]
# The agent frameworks the runner hosts (wait_service.runs.graph.FRAMEWORKS).
FRAMEWORKS: tuple[str, ...] = ("langgraph", "pydantic_ai", "strands")

_SNS_ARN = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]+(\.fifo)?$")
_GRAPH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
# https://cognito-idp.<region>.amazonaws.com/<pool id>: the issuer of every token a user pool signs.
_COGNITO_ISSUER = re.compile(r"^https://cognito-idp\.([a-z0-9-]+)\.amazonaws\.com/([\w-]+_[0-9A-Za-z]+)/?$")
_SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+$")
_KEY_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
# Requests a second and burst per method: at least 1; the account quota (10,000 a second, burst
# 5,000, both adjustable) caps a stage whatever it sets, so the bounds leave room for raised quotas.
API_RATE_RANGE = (1, 100_000)
API_BURST_RANGE = (1, 100_000)
# An SQS event source mapping's maximum concurrency.
RUNNER_MAX_CONCURRENCY_RANGE = (2, 1000)
# A DynamoDB stream event source mapping's ParallelizationFactor: batches of one shard at once.
DISPATCHER_PARALLELIZATION_RANGE = (1, 10)
# Reserved concurrency of one function: Lambda keeps 100 of the account's unreserved.
RUNNER_RESERVED_RANGE = (1, 100_000)
# Lambda's own lines per invocation (platform.start and platform.report) are INFO; WARN drops them.
SYSTEM_LOG_LEVELS = ("DEBUG", "INFO", "WARN")
_USER_POOL_ARN = re.compile(r"^arn:aws[a-z-]*:cognito-idp:[a-z0-9-]+:\d{12}:userpool/[\w-]+_[0-9A-Za-z]+$")
# A resource server's scope: <resource server identifier>/<scope name>, no spaces.
_SCOPE = re.compile(r"^\S+/[^\s/]+$")
# A Secrets Manager secret's name (1-512 of these characters), or its full ARN.
_SECRET_NAME = re.compile(r"^[A-Za-z0-9/_+=.@-]{1,512}$")
_EVENT_TYPE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
_WEBHOOK_KEYS = frozenset({"url", "secret_name", "types", "key_id"})

__all__ = ["CONTEXT_KEYS", "ConfigError", "StackConfig", "WebhookConfig", "check_known_keys"]


def _signing_keys(value: Any) -> dict[str, str]:
    """``signing_keys`` context: a mapping (``cdk.json``) or its JSON text (``-c signing_keys=...``)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ConfigError(
                f"context signing_keys: not JSON ({exc})", fix='{"key id": "<secret ARN>"} as JSON'
            ) from exc
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


# An IAM role or user; `*` and `?` match as in ArnLike (e.g. a role path of SSO permission sets).
_PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/*?-]+$")


# The audit archive keeps a question at least as long as the ledger could (it is archived when
# decided, the ledger's TTL counts from its end), and S3's lifecycle takes at most 100 years.
AUDIT_RETENTION_DAYS = 400
AUDIT_RETENTION_RANGE = (TTL_DAYS, 36_500)
AUDIT_OBJECT_LOCK_MODES = ("governance", "compliance")


def _saver_option(key: str, get: Callable[[str], Any], checkpointer: str, does: str) -> bool:
    """A setting only langgraph-checkpoint-aws's ``DynamoDBSaver`` has (``does``: what it does):
    on by default with ``checkpointer=aws``, refused when set true with the other backend."""
    on = context_bool(key, get(key), default=checkpointer == "aws")
    if on and checkpointer != "aws":
        raise ConfigError(f"context {key} needs checkpointer=aws (only DynamoDBSaver {does})")
    return on


def _operator_principals(value: Any) -> tuple[str, ...]:
    """``operator_principals`` context: a JSON list of ARNs, or the ARNs separated by commas."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ()
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise ConfigError(
                    f"context operator_principals: not JSON ({exc}); expected a JSON list of ARNs, or "
                    "ARNs separated by commas"
                ) from exc
        else:
            value = [part.strip() for part in text.split(",") if part.strip()]
    if not isinstance(value, list):
        raise ConfigError('context operator_principals: expected ["arn:aws:iam::<account>:role/<name>", ...]')
    for arn in value:
        if not isinstance(arn, str) or not _PRINCIPAL_ARN.match(arn):
            raise ConfigError(
                f"context operator_principals: {arn!r} is not an IAM role or user ARN; expected "
                "arn:aws:iam::<account>:role/<name> or arn:aws:iam::<account>:user/<name>"
            )
    return tuple(value)


@dataclass(frozen=True)
class WebhookConfig:
    """One entry of context ``webhooks``: where to POST which event types, signed with which secret.

    ``key_id`` (optional, default ``secret_name``) is sent as ``X-Wait-Key-Id``.
    """

    url: str
    secret_name: str
    types: tuple[str, ...]
    key_id: str


def _webhooks(value: Any) -> tuple[WebhookConfig, ...]:
    """``webhooks`` context: a list (``cdk.json``) or its JSON text (``-c webhooks=...``)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ConfigError(
                f"context webhooks: not JSON ({exc})",
                fix='[{"url": "https://...", "secret_name": "<secret>", "types": ["wait.created"]}] as JSON',
            ) from exc
    if not isinstance(value, list):
        raise ConfigError('context webhooks: expected a list of {"url", "secret_name", "types"}')
    hooks: list[WebhookConfig] = []
    for index, item in enumerate(value):
        where = f"context webhooks[{index}]"
        if not isinstance(item, dict):
            raise ConfigError(f'{where}: expected {{"url", "secret_name", "types"}}')
        unknown = sorted(set(item) - _WEBHOOK_KEYS)
        if unknown:
            raise ConfigError(
                f"{where}: unknown key {unknown[0]!r} (expected url, secret_name, types, key_id)"
            )
        url = item.get("url")
        if not isinstance(url, str) or not re.match(r"^https?://[^/\s?#]+[^\s]*$", url):
            raise ConfigError(f"{where}.url={url!r}: expected an http(s) URL")
        if url.startswith("http://"):
            raise ConfigError(f"{where}.url={url!r}: expected https:// (events travel signed, not encrypted)")
        secret = item.get("secret_name")
        if not isinstance(secret, str) or not (_SECRET_NAME.match(secret) or _SECRET_ARN.match(secret)):
            raise ConfigError(
                f"{where}.secret_name={secret!r}: expected the name (or full ARN) of a Secrets Manager secret"
            )
        types = item.get("types")
        if not isinstance(types, list) or not types:
            raise ConfigError(
                f'{where}.types={types!r}: expected a non-empty list of event types ("wait.created")'
            )
        for event_type in types:
            if not isinstance(event_type, str) or not _EVENT_TYPE.match(event_type):
                raise ConfigError(
                    f"{where}.types: {event_type!r} is not an event type; expected one like 'wait.created'"
                )
        key_id = item.get("key_id", secret.rsplit(":", 1)[-1] if secret.startswith("arn:") else secret)
        if not isinstance(key_id, str) or not key_id or len(key_id) > 256 or not key_id.isprintable():
            raise ConfigError(f"{where}.key_id={key_id!r}: expected 1-256 printable characters")
        hooks.append(WebhookConfig(url, secret, tuple(dict.fromkeys(types)), key_id))
    return tuple(hooks)


@dataclass(frozen=True)
class StackConfig:
    """The settings read from CDK context.

    Parameters
    ----------
    stack_name
        CloudFormation stack name (context ``stack_name``, default ``agent-wait``).
    graph
        ``module:attribute`` of the graph the runner runs (context ``graph``, or ``agent``).
    framework
        The agent's framework, ``langgraph``, ``pydantic_ai`` or ``strands`` (context
        ``framework``); ``None``: detected from the object ``graph`` names.
    agent
        ``module:attribute`` of the agent (context ``agent``): another name for ``graph``, for
        agents that are not graphs; set one of the two.
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
    checkpoint_compression
        ``DynamoDBSaver`` gzips each checkpoint and write of 1 KB or more that shrinks by a tenth:
        on by default with ``checkpointer=aws``, impossible with ``dynamodb``. It reads either form,
        so turning it on or off strands no parked thread.
    api_rate, api_burst
        The api stage's throttle per method: steady requests a second (default 50) and burst
        (default 100). Above 10,000 a second (burst 5,000) raise API Gateway's account quota too.
    runner_max_concurrency
        At most this many runner invocations at once (the inbox event source mapping's maximum
        concurrency, 2-1000, default 10): a burst of runs cannot take the account's concurrency or
        model budget.
    runner_reserved_concurrency
        Concurrency reserved for the runner (default none: it shares the account's unreserved
        pool). At least ``runner_max_concurrency``, so the inbox never invokes it into a throttle;
        it also caps the runner.
    dispatcher_parallelization
        Batches of one shard of the ledger's stream the dispatcher handles at once (the stream
        mapping's ``ParallelizationFactor``, 1-10, default 2). Each item's changes stay in order
        whatever the value; raise it when the stream's iterator age grows (docs/performance.md).
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
    audit_retention_days, audit_object_lock
        Days the audit archive keeps each record (S3 lifecycle; 400 by default, at least the
        ledger's TTL), and ``governance`` or ``compliance`` to lock each object in the bucket for
        that long (S3 Object Lock; ``None``: no lock).
    operator_principals
        IAM roles (or users) of the people on call: the inbox's policy lets them send, so that they
        can redrive its DLQ (``agent-wait dlq redrive``); no one else but the stack's functions may.
    webhooks
        Receivers the chosen event types are POSTed to, signed (:class:`WebhookConfig`; context
        ``webhooks``, a JSON list of ``{"url", "secret_name", "types"}``).
    snapstart
        Lambda SnapStart on the runner and the api: each deploy publishes a version whose
        initialized environment is snapshotted, and an alias of it is what the inbox and API Gateway
        invoke (see docs/deploy.md, section SnapStart, for its cost and trade-offs).
    lambda_system_log_level
        The level of the lines Lambda itself writes in every function's log group: ``INFO`` (the
        default: each invocation's start and report, with its duration and memory used), ``WARN``
        (only Lambda's warnings and errors, about half of CloudWatch Logs' bytes per question) or
        ``DEBUG``.

    Examples
    --------
    >>> StackConfig.from_context({"auth": "jwt", "jwt_issuer":
    ...     "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Abc123"}.get).user_pool_id
    'eu-west-1_Abc123'
    """

    stack_name: str = DEFAULT_STACK_NAME
    graph: str = DEFAULT_GRAPH
    framework: str | None = None
    agent: str | None = None
    auth: AuthMode = "iam"
    default_ttl: int | None = None
    checkpointer: Checkpointer = "aws"
    checkpoint_bucket: bool = True
    checkpoint_compression: bool = True
    runner_max_concurrency: int = RUNNER_MAX_CONCURRENCY
    runner_reserved_concurrency: int | None = None
    dispatcher_parallelization: int = DISPATCHER_PARALLELIZATION
    api_rate: int = API_THROTTLE_RATE
    api_burst: int = API_THROTTLE_BURST
    # Shards of each status listing of the ledger (wait_service.ledger.shards): 1 reads a page with
    # one Query; more spread the listing's writes for a higher rate (docs/performance.md, Scale).
    listing_shards: int = STATUS_SHARDS
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
    operator_principals: tuple[str, ...] = ()
    audit_retention_days: int = AUDIT_RETENTION_DAYS
    audit_object_lock: str | None = None
    webhooks: tuple[WebhookConfig, ...] = ()
    snapstart: bool = False
    lambda_system_log_level: str = "INFO"

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
        framework = text("framework")
        if framework is not None and framework not in FRAMEWORKS:
            raise ConfigError(
                f"context framework={framework!r}: no such framework",
                fix=f"set framework to one of {', '.join(FRAMEWORKS)}, or unset it to detect it",
            )
        agent = text("agent")
        if agent is not None and text("graph") is not None:
            raise ConfigError(
                "context agent and graph name the same thing",
                fix="set one of the two (agent=module:attribute)",
            )
        if agent is not None and not _GRAPH.match(agent):
            raise ConfigError(
                f"context agent={agent!r}: expected 'package.module:attribute'",
                fix="name the module and the agent object in it, e.g. agent=examples.pydantic_ai_agent:agent",
            )
        graph = agent or text("graph") or DEFAULT_GRAPH
        if not _GRAPH.match(graph):
            raise ConfigError(f"context graph={graph!r}: expected 'package.module:attribute'")
        if framework not in (None, "langgraph") and text("checkpointer") == "dynamodb":
            raise ConfigError(
                f"context checkpointer=dynamodb is a LangGraph checkpointer; framework={framework} keeps its "
                "agent's state in the checkpoint table of checkpointer=aws",
                fix="unset checkpointer (or set it to aws)",
            )
        ttl_text = text("default_ttl")
        default_ttl: int | None = None
        if ttl_text is not None:
            if not ttl_text.isdigit() or int(ttl_text) <= 0:
                raise ConfigError(f"context default_ttl={ttl_text!r}: expected a positive number of seconds")
            default_ttl = int(ttl_text)
        checkpoint_bucket = _saver_option("checkpoint_bucket", get, checkpointer, "offloads")
        checkpoint_compression = _saver_option("checkpoint_compression", get, checkpointer, "compresses")
        concurrency_text = text("runner_max_concurrency") or str(RUNNER_MAX_CONCURRENCY)
        low, high = RUNNER_MAX_CONCURRENCY_RANGE
        if not concurrency_text.isdigit() or not low <= int(concurrency_text) <= high:
            raise ConfigError(
                f"context runner_max_concurrency={concurrency_text!r}: expected a number from {low} to "
                f"{high} (the limits of an SQS event source mapping's maximum concurrency)"
            )
        reserved_text = text("runner_reserved_concurrency")
        reserved: int | None = None
        if reserved_text is not None:
            reserved = context_int(
                "runner_reserved_concurrency", reserved_text, 0, RUNNER_RESERVED_RANGE, "executions"
            )
            if reserved < int(concurrency_text):
                raise ConfigError(
                    f"context runner_reserved_concurrency={reserved}: expected at least "
                    f"runner_max_concurrency ({concurrency_text}): less would"
                    " throttle the inbox's invocations"
                )
        config = cls(
            stack_name=context_stack_name(get("stack_name"), DEFAULT_STACK_NAME),
            graph=graph,
            framework=framework,
            agent=agent,
            auth=auth,  # type: ignore[arg-type]  # checked against the Literal above
            default_ttl=default_ttl,
            checkpointer=checkpointer,  # type: ignore[arg-type]
            checkpoint_bucket=checkpoint_bucket,
            checkpoint_compression=checkpoint_compression,
            runner_max_concurrency=int(concurrency_text),
            runner_reserved_concurrency=reserved,
            dispatcher_parallelization=context_int(
                "dispatcher_parallelization",
                get("dispatcher_parallelization"),
                DISPATCHER_PARALLELIZATION,
                DISPATCHER_PARALLELIZATION_RANGE,
                "batches of a stream shard at once",
            ),
            api_rate=context_int(
                "api_rate", get("api_rate"), API_THROTTLE_RATE, API_RATE_RANGE, "requests a second"
            ),
            api_burst=context_int(
                "api_burst", get("api_burst"), API_THROTTLE_BURST, API_BURST_RANGE, "requests"
            ),
            listing_shards=context_int(
                "listing_shards",
                get("listing_shards"),
                STATUS_SHARDS,
                (1, MAX_STATUS_SHARDS),
                "shards of each status listing",
            ),
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
            operator_principals=_operator_principals(get("operator_principals")),
            audit_retention_days=context_int(
                "audit_retention_days",
                get("audit_retention_days"),
                AUDIT_RETENTION_DAYS,
                AUDIT_RETENTION_RANGE,
                "days",
            ),
            audit_object_lock=text("audit_object_lock"),
            webhooks=_webhooks(get("webhooks")),
            snapstart=context_bool("snapstart", get("snapstart"), default=False),
            lambda_system_log_level=context_choice(
                "lambda_system_log_level", get("lambda_system_log_level"), SYSTEM_LOG_LEVELS, default="INFO"
            ),
        )
        if config.audit_object_lock is not None and config.audit_object_lock not in AUDIT_OBJECT_LOCK_MODES:
            raise ConfigError(
                f"context audit_object_lock={config.audit_object_lock!r}: "
                "expected 'governance' or 'compliance' (or unset: no lock)"
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
                " (see docs/deploy.md, section Configuration)"
            )
        pool_arn = config.cognito_user_pool_arn
        if pool_arn is not None and not _USER_POOL_ARN.match(pool_arn):
            raise ConfigError(
                f"context cognito_user_pool_arn={pool_arn!r}: expected "
                "arn:aws:cognito-idp:<region>:<account>:userpool/<pool id>"
            )
        if config.jwt_audience is not None and not _SCOPE.match(config.jwt_audience):
            raise ConfigError(
                f"context jwt_audience={config.jwt_audience!r}: expected a resource server's scope, "
                "<resource server>/<scope>"
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
        if config.framework == "strands" and not config.checkpoint_bucket:
            raise ConfigError(
                "context framework=strands keeps each thread's session in the checkpoint bucket, and "
                "checkpoint_bucket is false",
                fix="set checkpoint_bucket=true (or unset it)",
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


# Every context key the stack reads: one field of StackConfig each, so a key added there is in this
# registry (a test checks the configuration table of docs/deploy.md lists each, and that a bad value of each
# ends the synth with one line naming it).
CONTEXT_KEYS: tuple[str, ...] = tuple(setting.name for setting in fields(StackConfig))
# CDK's own context keys have a colon, a slash or an '@' ("@aws-cdk/...", "aws:cdk:..."); ours are snake_case.
_OURS = re.compile(r"^[a-z][a-z0-9_]*$")


def check_known_keys(context: dict[str, Any]) -> None:
    """Refuse a snake_case key the stack does not read (a typo would otherwise be ignored silently).

    Examples
    --------
    >>> check_known_keys({"graph_sorce": "~/agent"})
    Traceback (most recent call last):
    ...
    infra.errors.ConfigError: context graph_sorce: no such key
    """
    for key in sorted(context):
        if _OURS.match(key) and key not in CONTEXT_KEYS:
            close = difflib.get_close_matches(key, CONTEXT_KEYS, n=1)
            hint = f"did you mean {close[0]}?" if close else "see the configuration table in docs/deploy.md"
            raise ConfigError(f"context {key}: no such key", fix=f"{hint} (remove it, or correct its name)")
