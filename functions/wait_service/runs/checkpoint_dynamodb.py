"""``checkpointer=dynamodb``: langgraph-checkpoint-dynamodb 0.1.0's saver, with what the runner needs.

The package's ``DynamoDBSaver`` is synchronous (its async methods are LangGraph's defaults, which
raise ``NotImplementedError``); the runner only calls ``graph.invoke`` and ``graph.get_state``, so
that is enough. Three things it does not do are added or refused here, and nothing else changes:

- **Expiry.** It writes no TTL attribute. :class:`ExpiringDynamoDBSaver` stamps ``ttl`` (epoch
  seconds, ``ttl_seconds`` after the write) on every checkpoint and write item, so a thread's
  checkpoints expire with the ledger records that point at them, as with ``checkpointer=aws``.
- **Unprocessed writes.** It sends each batch of pending writes once and ignores the
  ``UnprocessedItems`` DynamoDB hands back when throttled, so a question's interrupt could be lost.
  Here they are sent again, with backoff, until none is left (or :class:`UnprocessedWritesError`,
  an infrastructure failure: the inbox message is retried).
- **Checkpoint namespaces (subgraphs).** Its checkpoints table is keyed by thread and checkpoint id
  only, so a subgraph's checkpoints would land in its parent's partition and be read back as the
  parent's latest; and its read of a namespace's latest checkpoint passes the filter wrongly and
  fails. A graph whose nodes run checkpointed subgraphs is refused when the runner is built
  (:func:`refuse_subgraphs`: at Lambda init, so the synth's import check and ``agent-wait local``
  report it), and any checkpoint in a namespace still reaching the saver is refused with
  :class:`NamespaceUnsupportedError`, which ends the run as ``failed`` naming ``checkpointer=aws``.

It never offloads: a checkpoint item holds the graph's whole state in DynamoDB's 400 KB, which is
why the api takes smaller answers without a checkpoint bucket (``wait_service.answer_limits``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from langgraph_checkpoint_dynamodb.saver import DynamoDBSaver
from langgraph_checkpoint_dynamodb.write import Write

from wait_service.resources import CHECKPOINT_WRITES_DYNAMODB, CHECKPOINTS_DYNAMODB
from wait_service.runs.failures import InfrastructureError
from wait_service.settings import SettingsError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple

# BatchWriteItem takes at most 25 items; unprocessed ones are sent again after 0.05, 0.1, 0.2 ... s.
BATCH_SIZE = 25
UNPROCESSED_ATTEMPTS = 8
UNPROCESSED_BACKOFF_SECONDS = 0.05


class NamespaceUnsupportedError(NotImplementedError):
    """A subgraph checkpoint (non-empty ``checkpoint_ns``), which ``checkpointer=dynamodb`` cannot keep."""


class UnprocessedWritesError(InfrastructureError):
    """DynamoDB kept refusing some of a task's pending writes (throttling): the run is retried."""


class _ExpiringTable:
    """The package's checkpoints table, with ``ttl`` added to every item it puts."""

    def __init__(self, table: Any, expires: Callable[[], int]) -> None:
        self._table = table
        self._expires = expires

    def put_item(self, *, Item: dict[str, Any], **kwargs: Any) -> Any:  # noqa: N803 (boto3's name)
        ttl = CHECKPOINTS_DYNAMODB.ttl_attribute
        assert ttl is not None
        return self._table.put_item(Item=Item | {ttl: self._expires()}, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


class ExpiringDynamoDBSaver(DynamoDBSaver):
    """langgraph-checkpoint-dynamodb's saver whose items expire, whose writes all land, and which
    refuses subgraph checkpoints instead of mixing them with their parent's (see the module).

    Parameters
    ----------
    checkpoints_table_name, writes_table_name:
        The two tables (``wait_service.resources.CHECKPOINTS_DYNAMODB`` and
        ``CHECKPOINT_WRITES_DYNAMODB``).
    ttl_seconds:
        Every item expires this long after it was written.
    clock:
        Epoch seconds; injected by tests.
    sleep:
        Waits between resends of unprocessed writes; injected by tests.

    Examples
    --------
    >>> saver = ExpiringDynamoDBSaver(checkpoints_table_name="cp", writes_table_name="cpw",
    ...                               ttl_seconds=90 * 86400)  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        checkpoints_table_name: str,
        writes_table_name: str,
        ttl_seconds: int,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(checkpoints_table_name=checkpoints_table_name, writes_table_name=writes_table_name)
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._sleep = sleep
        # The package's `put` writes through this table: every checkpoint item gets its `ttl`.
        package: Any = self
        package.checkpoints_table = _ExpiringTable(package.checkpoints_table, self.expires_at)

    def expires_at(self) -> int:
        """The ``ttl`` of an item written now."""
        return int(self._clock()) + self.ttl_seconds

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        _refuse_namespace(config)
        result: CheckpointTuple | None = super().get_tuple(config)
        return result

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        _refuse_namespace(config)
        result: RunnableConfig = super().put(config, checkpoint, metadata, new_versions)
        return result

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """The package's ``put_writes`` (its ``Write`` items), with ``ttl`` and unprocessed items resent."""
        _refuse_namespace(config)
        configurable = self.validate_configurable(config.get("configurable"))
        if configurable["checkpoint_id"] is None:
            raise ValueError("Missing checkpoint_id")
        ttl_attribute = CHECKPOINT_WRITES_DYNAMODB.ttl_attribute
        assert ttl_attribute is not None
        ttl = {"N": str(self.expires_at())}
        requests = []
        for idx, (channel, value) in enumerate(writes):
            kind, serialized = self.serde.dumps_typed(value)
            item = Write(
                thread_id=configurable["thread_id"],
                checkpoint_ns=configurable["checkpoint_ns"],
                checkpoint_id=configurable["checkpoint_id"],
                task_id=task_id,
                idx=idx,
                channel=channel,
                type=kind,
                value=serialized,
            ).to_dynamodb_item()
            requests.append({"PutRequest": {"Item": item | {ttl_attribute: ttl}}})
        for start in range(0, len(requests), BATCH_SIZE):
            self._batch_write(requests[start : start + BATCH_SIZE])

    def _batch_write(self, requests: list[dict[str, Any]]) -> None:
        pending: dict[str, Any] = {self.writes_table_name: requests}
        for attempt in range(UNPROCESSED_ATTEMPTS):
            if attempt:
                self._sleep(UNPROCESSED_BACKOFF_SECONDS * 2 ** (attempt - 1))
            pending = self.client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
            if not pending:
                return
        left = sum(len(items) for items in pending.values())
        raise UnprocessedWritesError(
            f"DynamoDB left {left} checkpoint write(s) unprocessed after {UNPROCESSED_ATTEMPTS} attempts"
        )


def _refuse_namespace(config: RunnableConfig) -> None:
    namespace = (config.get("configurable") or {}).get("checkpoint_ns") or ""
    if namespace:
        raise NamespaceUnsupportedError(
            f"checkpointer=dynamodb cannot keep the checkpoints of a subgraph (namespace {namespace!r}): "
            "langgraph-checkpoint-dynamodb 0.1.0 keys checkpoints by thread and checkpoint id only. "
            "Deploy with checkpointer=aws, or compile the subgraph with checkpointer=False "
            "(it then cannot pause: ask the question in the parent graph)."
        )


def refuse_subgraphs(graph: Any, name: str) -> None:
    """Refuse graph ``name`` when any node runs a subgraph that keeps its own checkpoints.

    LangGraph finds those subgraphs itself (``get_subgraphs``: compiled graphs added as nodes or
    called from a node's function); one compiled with ``checkpointer=False`` keeps none and passes.

    Raises
    ------
    SettingsError
        Naming the nodes, ``checkpointer=aws`` and ``checkpointer=False``.
    """
    get_subgraphs = getattr(graph, "get_subgraphs", None)
    nodes = sorted({path for path, _ in get_subgraphs()}) if get_subgraphs is not None else []
    if nodes:
        raise SettingsError(
            f"checkpointer=dynamodb cannot run graph {name}: node(s) {', '.join(nodes)} run subgraphs "
            "that keep their own checkpoints, which langgraph-checkpoint-dynamodb 0.1.0 cannot store "
            "(it keys checkpoints by thread and checkpoint id only). Deploy with checkpointer=aws, "
            "or compile those subgraphs with checkpointer=False (they then cannot pause: ask the "
            "question in the parent graph)."
        )
