"""One factory for the runner's checkpointer.

``aws`` (default): ``langgraph-checkpoint-aws`` ``DynamoDBSaver``, one table, S3 offload of
payloads over 350 KB when a bucket is configured (the stack and the local stack configure one),
items and objects expiring with the ledger's TTL. ``dynamodb``: ``langgraph-checkpoint-dynamodb``'s
saver over its two tables. Both are imported only when chosen, so the unused backend need not be
installed. ``AWS_ENDPOINT_URL`` (the local stack) is honoured by boto3 itself, so no endpoint is
passed here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_wait.errors import MissingExtraError
from wait_service.settings import Settings, SettingsError

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver


def make_checkpointer(settings: Settings) -> BaseCheckpointSaver[str]:
    """The checkpointer ``settings.checkpointer`` names, over the tables the settings give.

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
            from langgraph_checkpoint_aws import DynamoDBSaver
        except ImportError as exc:
            raise MissingExtraError("service", module="wait_service.checkpointer") from exc
        offload = {"bucket_name": settings.checkpoint_bucket} if settings.checkpoint_bucket else None
        # Checkpoints expire with the ledger items that point at them (the bucket's lifecycle
        # rule, wait_service.resources.CHECKPOINT_BUCKET, keeps offloaded objects longer still).
        return DynamoDBSaver(
            table_name=table, s3_offload_config=offload, ttl_seconds=settings.checkpoint_ttl_seconds
        )
    if settings.checkpointer == "dynamodb":
        checkpoints = settings.require("checkpoint_table")
        writes = settings.require("checkpoint_writes_table")
        try:
            from langgraph_checkpoint_dynamodb.saver import DynamoDBSaver as LegacyDynamoDBSaver
        except ImportError as exc:
            raise MissingExtraError("checkpoint-dynamodb", module="wait_service.checkpointer") from exc
        saver: BaseCheckpointSaver[str] = LegacyDynamoDBSaver(
            checkpoints_table_name=checkpoints, writes_table_name=writes
        )
        return saver
    raise SettingsError(f"AGENT_WAIT_CHECKPOINTER must be 'aws' or 'dynamodb', not {settings.checkpointer!r}")
