"""Configuration of the Lambdas, read from the environment in one place.

Only handlers call :meth:`Settings.from_env`; everything below them receives plain values, so the
library and the services never read ``os.environ`` themselves (docs/internals.md lists the
variables).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_wait.aws.dynamodb import MAX_STATUS_SHARDS, STATUS_SHARDS
from wait_service.answer_limits import MAX_ANSWER_BYTES
from wait_service.constants import TTL_DAYS

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

T = TypeVar("T")

# LangGraph's checkpoint durability: when a run's checkpoints are written (see docs/internals.md).
Durability = Literal["sync", "async", "exit"]

DEFAULT_GRAPH = "examples.refund_agent:build_graph"

# Environment variable → field name. Kept as data so the doc table and the model cannot drift.
# Powertools (POWERTOOLS_*, LOG_LEVEL) and boto3 (AWS_ENDPOINT_URL) read their own variables.
ENV_FIELDS: dict[str, str] = {
    "AGENT_WAIT_LEDGER_TABLE": "ledger_table",
    "AGENT_WAIT_POLICY_TABLE": "policy_table",
    "AGENT_WAIT_POLICY_CACHE_SECONDS": "policy_cache_seconds",
    "AGENT_WAIT_INBOX_URL": "inbox_url",
    "AGENT_WAIT_ARCHIVE_STREAM": "archive_stream",
    "AGENT_WAIT_ARCHIVE_DIR": "archive_dir",
    "AGENT_WAIT_STATS_TABLE": "stats_table",
    "AGENT_WAIT_TOPIC_ARN": "topic_arn",
    "AGENT_WAIT_OUTBOX_URL": "outbox_url",
    "AGENT_WAIT_GRAPH": "graph",
    "AGENT_WAIT_FRAMEWORK": "framework",
    "AGENT_WAIT_CHECKPOINTER": "checkpointer",
    "AGENT_WAIT_CHECKPOINT_TABLE": "checkpoint_table",
    "AGENT_WAIT_CHECKPOINT_WRITES_TABLE": "checkpoint_writes_table",
    "AGENT_WAIT_CHECKPOINT_BUCKET": "checkpoint_bucket",
    "AGENT_WAIT_CHECKPOINT_COMPRESSION": "checkpoint_compression",
    "AGENT_WAIT_REPLY_URL": "reply_url",
    "AGENT_WAIT_DEFAULT_TTL": "default_ttl",
    "AGENT_WAIT_LEDGER_TTL_DAYS": "ledger_ttl_days",
    "AGENT_WAIT_LISTING_SHARDS": "listing_shards",
    "AGENT_WAIT_SCHEDULE_GROUP": "schedule_group",
    "AGENT_WAIT_LIFECYCLE_ARN": "lifecycle_arn",
    "AGENT_WAIT_SCHEDULER_ROLE_ARN": "scheduler_role_arn",
    "AGENT_WAIT_SCHEDULE_DLQ_ARN": "schedule_dlq_arn",
    "AGENT_WAIT_SIGNING_KEYS": "signing_keys",
    "AGENT_WAIT_SLACK_CHANNEL": "slack_channel",
    "AGENT_WAIT_SLACK_BOT_TOKEN_SECRET": "slack_bot_token_secret",
    "AGENT_WAIT_SLACK_SIGNING_SECRET": "slack_signing_secret",
    "AGENT_WAIT_SLACK_API_URL": "slack_api_url",
    "AGENT_WAIT_INPUT_SCHEMA": "input_schema",
    "AGENT_WAIT_INBOX_CLIENT_ID": "inbox_client_id",
    "AGENT_WAIT_INBOX_DOMAIN": "inbox_domain",
    "AGENT_WAIT_JWT_AUDIENCE": "jwt_audience",
    "AGENT_WAIT_DURABILITY": "durability",
    "AGENT_WAIT_MAX_ANSWER_BYTES": "max_answer_bytes",
    "AGENT_WAIT_RUNNER_SECRETS": "runner_secrets",
}


class SettingsError(ValueError):
    """A required setting is missing or malformed; the message names the variable."""


class Settings(BaseModel):
    """Everything the api and runner Lambdas read from their environment.

    Fields are optional where only one of the two Lambdas needs them; :meth:`require` turns a
    missing one into an error that names the environment variable.

    Examples
    --------
    >>> s = Settings.from_env({"AGENT_WAIT_LEDGER_TABLE": "ledger", "AGENT_WAIT_DEFAULT_TTL": "60"})
    >>> (s.ledger_table, s.default_ttl, s.checkpointer, s.graph)
    ('ledger', 60, 'aws', 'examples.refund_agent:build_graph')
    >>> s.require("inbox_url")
    Traceback (most recent call last):
    ...
    wait_service.settings.SettingsError: AGENT_WAIT_INBOX_URL is not set
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    ledger_table: str | None = None
    # The policy store's table (per-function overrides); unset: every question keeps its code's policy.
    policy_table: str | None = None
    # How long the runner keeps a function's override (None: the store's default, 30 s).
    policy_cache_seconds: float | None = Field(default=None, ge=0)
    inbox_url: str | None = None
    # The audit archive: a Firehose delivery stream (deployed) or a folder (the local stack).
    archive_stream: str | None = None
    archive_dir: str | None = None
    # The approval analytics' counters (wait_service.stream.analytics): the dispatcher adds, the api reads.
    stats_table: str | None = None
    topic_arn: str | None = None
    outbox_url: str | None = None
    graph: str = DEFAULT_GRAPH
    # The graph's framework (wait_service.runs.graph.FRAMEWORKS); unset: detected from the object.
    framework: Literal["langgraph", "pydantic_ai", "strands"] | None = None
    checkpointer: Literal["aws", "dynamodb"] = "aws"
    checkpoint_table: str | None = None
    checkpoint_writes_table: str | None = None
    checkpoint_bucket: str | None = None
    # DynamoDBSaver gzips a checkpoint or write of 1 KB or more when that saves a tenth; it reads
    # either form, so turning this on or off strands no thread (no effect with checkpointer=dynamodb).
    checkpoint_compression: bool = True
    reply_url: str | None = None
    default_ttl: int | None = Field(default=None, ge=1)
    # Ledger items and checkpoints expire this many days after their last write.
    ledger_ttl_days: int = Field(default=TTL_DAYS, ge=1)
    # The shards of each status listing of the ledger (wait_service.ledger.shards): every function
    # that writes a question's status and the api that pages them use the same count.
    listing_shards: int = Field(default=STATUS_SHARDS, ge=1, le=MAX_STATUS_SHARDS)
    # The largest answer the deployment can always store (wait_service.answer_limits); the stack lowers it
    # when checkpoints have no bucket to offload to.
    max_answer_bytes: int = Field(default=MAX_ANSWER_BYTES, ge=1)
    # The timers of questions (expiry, escalation, reminders): EventBridge Scheduler's schedule
    # group, the lifecycle function its schedules invoke, and the role they invoke it with.
    schedule_group: str | None = None
    lifecycle_arn: str | None = None
    scheduler_role_arn: str | None = None
    # The dead-letter queue every schedule names, for an invocation Scheduler gave up on.
    schedule_dlq_arn: str | None = None
    # Signed requests: key id -> ARN of the Secrets Manager secret holding its shared secret.
    signing_keys: dict[str, str] = Field(default_factory=dict)
    # Slack: the channel questions go to, the secrets (ARNs) of the bot token and the signing
    # secret, and the Web API's base URL (a stand-in locally).
    slack_channel: str | None = None
    slack_bot_token_secret: str | None = None
    slack_signing_secret: str | None = None
    slack_api_url: str | None = None

    # The runner: environment variable name -> ARN of the secret whose value it gets at init
    # (wait_service.runs.secrets); names and ARNs only, never values.
    runner_secrets: dict[str, str] = Field(default_factory=dict)

    @field_validator("signing_keys", "runner_secrets", mode="before")
    @classmethod
    def _mapping_from_json(cls, value: object) -> object:
        if isinstance(value, str):
            return json.loads(value)
        return value

    # Path of the graph's input JSON schema (wait_service.runs.input_schema); unset: any input is taken.
    input_schema: str | None = None
    # The inbox page's sign-in (auth=jwt): a user pool app client, its hosted UI domain, and the
    # scope the authorizer checks (jwt_audience), if any.
    inbox_client_id: str | None = None
    inbox_domain: str | None = None
    jwt_audience: str | None = None
    # Checkpoints only when a run ends (parks on a question, finishes or fails): a crashed run is
    # redone from its message, as the queue redelivers it anyway (docs/internals.md).
    durability: Durability = "exit"

    @field_validator("reply_url")
    @classmethod
    def _reply_url_has_placeholder(cls, value: str | None) -> str | None:
        if value is not None and "{question_id}" not in value:
            raise ValueError("AGENT_WAIT_REPLY_URL must contain '{question_id}'")
        return value

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Build settings from an environment mapping; empty values count as unset.

        Parameters
        ----------
        environ:
            Usually ``os.environ``; tests pass a plain dict.

        Raises
        ------
        SettingsError
            When a value is malformed; the message names the variable.

        Examples
        --------
        >>> Settings.from_env({"AGENT_WAIT_CHECKPOINTER": "dynamodb"}).checkpointer
        'dynamodb'
        """
        values = {field: environ[var] for var, field in ENV_FIELDS.items() if environ.get(var, "").strip()}
        try:
            return cls.model_validate(values)
        except ValueError as exc:
            by_field = {field: var for var, field in ENV_FIELDS.items()}
            names = sorted(
                {
                    by_field.get(str(err["loc"][0]), str(err["loc"][0]))
                    for err in getattr(exc, "errors", list)()
                    if err.get("loc")
                }
            )
            raise SettingsError(f"invalid setting {', '.join(names) or ''}: {exc}") from exc

    @property
    def checkpoint_ttl_seconds(self) -> int:
        """Checkpoints live as long as the ledger items that point at them."""
        return self.ledger_ttl_days * 24 * 3600

    def require(self, field: str) -> str:
        """Return the string value of ``field`` or raise naming its environment variable.

        Examples
        --------
        >>> Settings(ledger_table="t").require("ledger_table")
        't'
        """
        value = getattr(self, field)
        if value is None or value == "":
            var = next((v for v, f in ENV_FIELDS.items() if f == field), field)
            raise SettingsError(f"{var} is not set")
        return str(value)


class FunctionService(Generic[T]):
    """A Lambda function's service: built once per execution environment.

    :meth:`warm` builds it during Lambda's init phase when the function is configured (its
    environment names the ledger), so the first request does not pay for it; tests load the
    handler without that environment and inject their own service.

    Examples
    --------
    >>> built = FunctionService(lambda: object())
    >>> built.get() is built.get()
    True
    """

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._service: T | None = None

    def get(self) -> T:
        if self._service is None:
            self._service = self._build()
        return self._service

    def warm(self, environ: Mapping[str, str]) -> None:
        if environ.get("AGENT_WAIT_LEDGER_TABLE"):
            self.get()
