"""One factory for the runner's checkpointer, and the AWS clients the runner shares with it.

``aws`` (default): ``langgraph-checkpoint-aws`` ``DynamoDBSaver``, one table, S3 offload of
payloads over 350 KB when a bucket is configured (the stack and the local stack configure one),
items and objects expiring with the ledger's TTL. ``dynamodb``: ``langgraph-checkpoint-dynamodb``'s
saver over its two tables, its items expiring with the ledger's TTL too, no offload and no subgraph
checkpoints (``wait_service.runs.checkpoint_dynamodb``). Both are imported only when chosen, so the
unused backend need not be installed. ``AWS_ENDPOINT_URL`` (the local stack) is honoured by boto3
itself, so no endpoint is passed here.

:func:`runner_clients` builds everything from boto3's one default session, and the ledger, the
announcers and the checkpointer share one DynamoDB client: a cold start creates one session and one
client per service instead of three DynamoDB clients and a second session.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_wait.errors import MissingExtraError
from wait_service.clients import CLIENT_CONFIG
from wait_service.settings import Settings, SettingsError

if TYPE_CHECKING:
    import boto3
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient


def make_checkpointer(
    settings: Settings, *, session: boto3.Session | None = None
) -> BaseCheckpointSaver[str]:
    """The checkpointer ``settings.checkpointer`` names, over the tables the settings give.

    Parameters
    ----------
    settings:
        The runner's settings.
    session:
        The boto3 session the ``aws`` saver creates its clients from; ``None`` lets it create its
        own. (The ``dynamodb`` saver always uses boto3's default session.)

    Raises
    ------
    SettingsError
        A table the backend needs is not configured (the message names the variable).
    MissingExtraError
        The backend's package is not installed (the message names the extra).

    Examples
    --------
    >>> saver = make_checkpointer(Settings(checkpoint_table="agent-wait-checkpoints"))  # doctest: +SKIP
    >>> type(saver).__name__  # doctest: +SKIP
    'DynamoDBSaver'
    """
    if settings.checkpointer == "aws":
        table = settings.require("checkpoint_table")
        try:
            # The saver's own package: the top package imports every saver and store it ships
            # (Bedrock sessions, AgentCore, Valkey), which the runner's handler leaves unrun.
            from langgraph_checkpoint_aws.checkpoint.dynamodb import DynamoDBSaver
        except ImportError as exc:
            raise MissingExtraError("service", module="wait_service.runs.checkpointer") from exc
        offload = {"bucket_name": settings.checkpoint_bucket} if settings.checkpoint_bucket else None
        # Checkpoints expire with the ledger items that point at them (the bucket's lifecycle
        # rule, wait_service.resources.CHECKPOINT_BUCKET, keeps offloaded objects longer still).
        return DynamoDBSaver(
            table_name=table,
            session=session,
            s3_offload_config=offload,
            ttl_seconds=settings.checkpoint_ttl_seconds,
            # An agent's state (a conversation's messages) is text: stored gzipped it takes a
            # fraction of the write and read units, and of the 400 KB an item may hold.
            enable_checkpoint_compression=settings.checkpoint_compression,
            # Merged into the package's own (its retries and user agent).
            boto_config=CLIENT_CONFIG,
        )
    if settings.checkpointer == "dynamodb":
        checkpoints = settings.require("checkpoint_table")
        writes = settings.require("checkpoint_writes_table")
        try:
            # The package itself first: the module below may already be imported.
            importlib.import_module("langgraph_checkpoint_dynamodb.saver")
            from wait_service.runs.checkpoint_dynamodb import ExpiringDynamoDBSaver
        except ImportError as exc:
            raise MissingExtraError("checkpoint-dynamodb", module="wait_service.runs.checkpointer") from exc
        # Its items carry the same TTL as the ledger's (the package itself writes none).
        saver: BaseCheckpointSaver[str] = ExpiringDynamoDBSaver(
            checkpoints_table_name=checkpoints,
            writes_table_name=writes,
            ttl_seconds=settings.checkpoint_ttl_seconds,
        )
        return saver
    raise SettingsError(f"AGENT_WAIT_CHECKPOINTER must be 'aws' or 'dynamodb', not {settings.checkpointer!r}")


@dataclass(frozen=True)
class RunnerClients:
    """The runner's AWS clients, one per service, and the checkpointer sharing the DynamoDB one."""

    checkpointer: BaseCheckpointSaver[Any]
    dynamodb: DynamoDBClient
    sns: SNSClient
    sqs: SQSClient

    def as_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``wait_service.runs.runner.build_runner``."""
        return {
            "checkpointer": self.checkpointer,
            "dynamodb": self.dynamodb,
            "sns": self.sns,
            "sqs": self.sqs,
        }


def runner_clients(settings: Settings, *, session: boto3.Session | None = None) -> RunnerClients:
    """The checkpointer and the runner's clients, all from one boto3 session (the default one).

    The DynamoDB client is the checkpointer's own (``langgraph-checkpoint-aws`` configures it with
    adaptive retries), so ledger writes, the ledger announcer and checkpoints share its connection
    pool.

    Examples
    --------
    >>> clients = runner_clients(Settings.from_env(os.environ))  # doctest: +SKIP
    >>> runner = build_runner(settings, **clients.as_kwargs())  # doctest: +SKIP
    """
    import boto3

    if session is None:
        if boto3.DEFAULT_SESSION is None:
            boto3.setup_default_session()
        session = boto3.DEFAULT_SESSION
    assert session is not None
    saver = make_checkpointer(settings, session=session)
    dynamodb = getattr(saver, "client", None) or session.client("dynamodb", config=CLIENT_CONFIG)
    return RunnerClients(
        checkpointer=saver,
        dynamodb=dynamodb,
        sns=session.client("sns", config=CLIENT_CONFIG),
        sqs=session.client("sqs", config=CLIENT_CONFIG),
    )
