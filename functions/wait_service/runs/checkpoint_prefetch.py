"""A checkpointer that can start reading a thread's latest checkpoint before the graph asks for it.

The runner's first ledger write of a message (the thread marked running) and the graph's first
checkpoint read (``get_tuple`` of the thread's latest checkpoint) do not depend on each other, yet
LangGraph makes the read only inside ``invoke``: two round trips one after the other. The runner
calls :meth:`PrefetchingSaver.prefetch` just before its ledger write, on a worker thread; the
graph's next ``get_tuple`` of that same checkpoint (``invoke``'s or ``get_state``'s) takes the
result instead of reading again. Any write to the checkpointer, and the end of the message
(:meth:`PrefetchingSaver.discard`), drop a read not taken, so nothing stale is ever served.

Only the latest checkpoint of a thread is read ahead (a config naming a ``checkpoint_id`` reads as
usual), and only while one message runs: inbox messages of one thread run one at a time (one
FIFO group), so nothing else writes the thread's checkpoints between the read and its use.
Everything else goes to the wrapped saver unchanged.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Collection, Iterator, Sequence
    from concurrent.futures import Executor, Future

    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple

_Key = tuple[str, str]


def _latest(config: RunnableConfig) -> _Key | None:
    """The key of a read of a thread's latest checkpoint (``None``: any other read)."""
    configurable = config.get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id is None or configurable.get("checkpoint_id"):
        return None
    return str(thread_id), str(configurable.get("checkpoint_ns") or "")


class PrefetchingSaver(BaseCheckpointSaver[Any]):
    """``inner`` with reads of a thread's latest checkpoint startable ahead (see the module).

    Examples
    --------
    >>> saver = PrefetchingSaver(InMemorySaver())  # doctest: +SKIP
    >>> saver.prefetch({"configurable": {"thread_id": "t-1"}}, executor)  # doctest: +SKIP
    """

    def __init__(self, inner: BaseCheckpointSaver[Any]) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner
        # Shared with the clones `with_allowlist` makes: the runner reads ahead through this one.
        self._ahead: dict[_Key, Future[CheckpointTuple | None]] = {}

    # -- reading ahead ------------------------------------------------------------------------

    def prefetch(self, config: RunnableConfig, executor: Executor) -> None:
        """Start reading the latest checkpoint of ``config``'s thread on ``executor``."""
        key = _latest(config)
        if key is not None:
            self._ahead[key] = executor.submit(self.inner.get_tuple, config)

    def discard(self) -> None:
        """Drop every read not taken (the message ended)."""
        self._ahead.clear()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        key = _latest(config)
        ahead = self._ahead.pop(key, None) if key is not None else None
        if ahead is not None:
            return ahead.result()
        return self.inner.get_tuple(config)

    # -- everything else: the wrapped saver's own ----------------------------------------------

    @property
    def config_specs(self) -> list[Any]:
        return list(self.inner.config_specs)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return self.inner.list(config, filter=filter, before=before, limit=limit)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._ahead.clear()
        return self.inner.put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        self._ahead.clear()
        self.inner.put_writes(config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self._ahead.clear()
        self.inner.delete_thread(thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._ahead.clear()
        self.inner.delete_for_runs(run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._ahead.clear()
        self.inner.copy_thread(source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._ahead.clear()
        self.inner.prune(thread_ids, strategy=strategy)

    def get_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Any:
        return self.inner.get_delta_channel_history(config=config, channels=channels)

    async def aget_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Any:
        return await self.inner.aget_delta_channel_history(config=config, channels=channels)

    def get_next_version(self, current: Any, channel: None = None) -> Any:
        return self.inner.get_next_version(current, channel)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> BaseCheckpointSaver[Any]:
        inner = self.inner.with_allowlist(extra_allowlist)
        if inner is self.inner:
            return self
        clone = copy.copy(self)
        clone.inner = inner
        clone.serde = inner.serde
        return clone

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.inner.aget_tuple(config)

    def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        return self.inner.alist(config, filter=filter, before=before, limit=limit)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._ahead.clear()
        return await self.inner.aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        self._ahead.clear()
        await self.inner.aput_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self._ahead.clear()
        await self.inner.adelete_thread(thread_id)

    def __getattr__(self, name: str) -> Any:
        # Attributes of the wrapped saver the base class does not define (its client, tables).
        if name in ("inner", "_ahead"):
            raise AttributeError(name)
        return getattr(self.inner, name)
