"""The key schema of langgraph-checkpoint-dynamodb's two tables, as the installed package states it.

The package (0.1.0) has no helper that creates or describes its tables; what describes them is its
README, shipped as the distribution's metadata ("Required DynamoDB Tables"), whose Terraform gives
each table's ``hash_key`` and ``range_key``. :func:`package_key_schemas` reads them from there, and
:func:`keys_the_saver_reads` records which attributes the package's saver itself uses as keys
(``GetItem``'s ``Key``, the ``Query`` key conditions, the items ``BatchWriteItem`` puts), so the
tests compare the tables against the package, never against ``wait_service.resources``.
"""

from __future__ import annotations

import json
import re
from importlib.metadata import metadata
from typing import Any

DISTRIBUTION = "langgraph-checkpoint-dynamodb"
# The Terraform resource names of the README, by the role of the table.
_RESOURCES = {"checkpoints": "checkpoints_table", "writes": "writes_table"}


def package_key_schemas() -> dict[str, list[tuple[str, str]]]:
    """``{"checkpoints": [(name, "HASH"), (name, "RANGE")], "writes": [...]}`` from the package's README.

    Examples
    --------
    >>> package_key_schemas()["checkpoints"]
    [('thread_id', 'HASH'), ('checkpoint_id', 'RANGE')]
    """
    readme = metadata(DISTRIBUTION).get_payload()  # type: ignore[attr-defined]
    assert isinstance(readme, str) and "Required DynamoDB Tables" in readme, "the package's README moved"
    schemas: dict[str, list[tuple[str, str]]] = {}
    for role, resource in _RESOURCES.items():
        block = re.search(rf'resource "aws_dynamodb_table" "{resource}" \{{(.*?)\n\}}', readme, re.S)
        assert block, f"no {resource} in the package's README"
        hash_key = re.search(r'hash_key\s*=\s*"([^"]+)"', block.group(1))
        range_key = re.search(r'range_key\s*=\s*"([^"]+)"', block.group(1))
        assert hash_key and range_key, f"{resource}: no hash_key/range_key in the package's README"
        schemas[role] = [(hash_key.group(1), "HASH"), (range_key.group(1), "RANGE")]
    return schemas


def keys_the_saver_reads(saver: Any, thread_id: str = "t-keys") -> dict[str, Any]:
    """Run one checkpoint and one write through ``saver`` (over tables that exist) and record, per
    table, the attributes its requests use as keys.

    Returns ``{"get_item": {table: sorted key names}, "query": {table: [names in key conditions]},
    "put": {table: sorted attribute names of the items put}}``.
    """
    from langgraph.checkpoint.base import empty_checkpoint

    seen: dict[str, dict[str, Any]] = {"get_item": {}, "query": {}, "put": {}}

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        body = json.loads(params["body"] or b"{}")
        name = model.name
        if name == "GetItem":
            seen["get_item"][body["TableName"]] = sorted(body["Key"])
        elif name == "Query":
            condition = body["KeyConditionExpression"]
            names = body.get("ExpressionAttributeNames", {})
            seen["query"][body["TableName"]] = [names[n] for n in re.findall(r"#\w+", condition)]
        elif name == "PutItem":
            seen["put"][body["TableName"]] = sorted(body["Item"])
        elif name == "BatchWriteItem":
            for table, requests in body["RequestItems"].items():
                seen["put"][table] = sorted(requests[0]["PutRequest"]["Item"])

    clients = [saver.client, saver.dynamodb.meta.client]
    for client in clients:
        client.meta.events.register("before-call.dynamodb.*", record)
    try:
        checkpoint = empty_checkpoint()
        stored = saver.put({"configurable": {"thread_id": thread_id}}, checkpoint, {}, {})
        saver.put_writes(stored, [("answer", "yes")], "task-1")
        saver.get_tuple({"configurable": {"thread_id": thread_id}})  # the latest: Query
        saver.get_tuple(stored)  # by id: GetItem
    finally:
        for client in clients:
            client.meta.events.unregister("before-call.dynamodb.*", record)
    return seen
