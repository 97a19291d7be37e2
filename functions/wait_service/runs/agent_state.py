"""Where an agent of another framework than LangGraph keeps each thread: the checkpoint table.

One item per thread, beside LangGraph's checkpoints in the same single table (keys ``PK``/``SK``;
``PK = agent#<thread id>``, which no checkpoint key starts with): the agent's history
(compressed), the calls the thread is parked on, the answers kept until the last of them arrives,
the id of the run that parked it and its last output. It expires with the checkpoints (``ttl``).
The runner is the only writer of a thread (one inbox message at a time per thread), so a plain
put is the write.
"""

from __future__ import annotations

import json
import time
import zlib
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from agent_wait import exact_json
from agent_wait.hosting import ASYNC_ANSWER_KEY
from wait_service.clients import CLIENT_CONFIG

if TYPE_CHECKING:
    from langgraph.types import Interrupt
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = ["INPUT_SCHEMA", "RUN_ID_KEY", "AgentStateStore", "Snapshot", "ThreadState"]

# Metadata key naming the start message that parked a thread (the runner's ``RUN_ID_KEY``).
RUN_ID_KEY = "agent_wait_run_id"
_SK = "thread"

# What a start's input must be, for a hosted agent of any framework: a prompt (or the answer to an
# async question, as its own run).
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prompt": {"type": "string", "minLength": 1, "description": "the user's message to the agent"},
        ASYNC_ANSWER_KEY: {"type": "object", "description": "the answer to an async-mode question"},
    },
    "minProperties": 1,
    "maxProperties": 1,
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Snapshot:
    """What ``get_state`` returns: the shape the runner reads of a LangGraph state snapshot."""

    values: dict[str, Any]
    interrupts: tuple[Interrupt, ...]
    metadata: dict[str, Any]


@dataclass
class ThreadState:
    """What the store keeps of one thread."""

    messages: bytes = b"[]"
    # [{"id", "kind", "value"}] of the calls the thread is parked on, in the agent's order.
    pending: list[dict[str, Any]] = field(default_factory=list)
    # Answers kept while other pending calls are still undecided.
    answers: dict[str, Any] = field(default_factory=dict)
    run_id: str | None = None
    output: Any = None


class AgentStateStore:
    """One item per thread in the checkpoint table (keys ``PK``/``SK``), expiring with the checkpoints.

    Examples
    --------
    >>> store = AgentStateStore("agent-wait-checkpoints", client)  # doctest: +SKIP
    >>> store.load("t-1") is None  # doctest: +SKIP
    True
    """

    def __init__(
        self,
        table: str,
        client: DynamoDBClient | None = None,
        *,
        ttl_seconds: int | None = None,
        prefix: str = "agent",
    ) -> None:
        self.prefix = prefix
        self.table = table
        self._client = client
        self.ttl_seconds = ttl_seconds

    @property
    def client(self) -> DynamoDBClient:
        # Created on first use: a LangGraph deployment builds the store and never calls it.
        if self._client is None:
            import boto3

            self._client = boto3.client("dynamodb", config=CLIENT_CONFIG)
        return self._client

    def _key(self, thread_id: str) -> dict[str, Any]:
        return {"PK": {"S": f"{self.prefix}#{thread_id}"}, "SK": {"S": _SK}}

    def load(self, thread_id: str) -> ThreadState | None:
        key = self._key(thread_id)
        item = self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
        if not item:
            return None
        return ThreadState(
            messages=zlib.decompress(item["messages"]["B"]),
            pending=json.loads(item["pending"]["S"]),
            answers=json.loads(item["answers"]["S"], parse_float=Decimal),
            run_id=item["run_id"]["S"] if "run_id" in item else None,
            output=json.loads(item["output"]["S"]) if "output" in item else None,
        )

    def save(self, thread_id: str, state: ThreadState) -> None:
        item: dict[str, Any] = {
            **self._key(thread_id),
            "messages": {"B": zlib.compress(state.messages)},
            "pending": {"S": exact_json.dumps(state.pending)},
            "answers": {"S": exact_json.dumps(state.answers)},
        }
        if state.run_id is not None:
            item["run_id"] = {"S": state.run_id}
        if state.output is not None:
            item["output"] = {"S": json.dumps(state.output, default=str)}
        if self.ttl_seconds:
            item["ttl"] = {"N": str(int(time.time()) + self.ttl_seconds)}
        self.client.put_item(TableName=self.table, Item=item)
