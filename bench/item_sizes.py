"""Sizes of the ledger's question items and of their index entries, measured on real items.

Runs the demo's flow (``examples.demo``: three refund runs parked, answered and resumed, on the
local stack), reads every question item back from the ledger and sizes it by DynamoDB's rules
(attribute names plus values; 3 bytes per list or map and 1 per element; numbers about one byte per
two digits plus one), and sizes the entry each index of ``wait_service.resources.LEDGER`` holds for
it (keys plus the projected attributes). A write costs one write unit per KB of each.

Examples
--------
$ python -m bench.item_sizes
"""

from __future__ import annotations

import io
import math
import sys
import warnings
from typing import Any

from agent_wait.envelope import dedupe_key_for
from bench import parse_no_options
from wait_service.resources import LEDGER, Index

# How a question item's key starts (``wait.created:<question_id>``).
QUESTION_KEY = dedupe_key_for("")


def value_size(value: dict[str, Any]) -> int:
    """The bytes DynamoDB counts for one attribute value (low-level format), its name left out.

    Examples
    --------
    >>> value_size({"S": "abc"}), value_size({"N": "40"}), value_size({"L": [{"S": "a"}, {"NULL": True}]})
    (3, 2, 7)
    """
    ((kind, member),) = value.items()
    if kind == "S":
        return len(member.encode())
    if kind == "N":
        digits = member.lstrip("-").replace(".", "").strip("0") or "0"
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(member)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + value_size(element) for element in member)
    if kind == "M":
        return 3 + sum(1 + len(name.encode()) + value_size(element) for name, element in member.items())
    if kind in ("SS", "NS", "BS"):
        return sum(value_size({kind[0]: element}) for element in member)
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB counts it: every attribute's name and value."""
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def index_entry(item: dict[str, Any], index: Index) -> dict[str, Any] | None:
    """What ``index`` holds for ``item`` (``None``: the item is not in it, a sparse index)."""
    keys = {LEDGER.partition_key, index.partition_key, index.sort_key}
    if not {index.partition_key, index.sort_key} <= set(item):
        return None
    if index.include is None:
        return dict(item)
    return {name: value for name, value in item.items() if name in keys or name in index.include}


def measure(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per question item: its status and the bytes of the item and of each index entry."""
    rows = []
    for item in items:
        key = item.get("dedupe_key", {}).get("S", "")
        if item.get("kind", {}).get("S", "question") != "question" or not key.startswith(QUESTION_KEY):
            continue
        row: dict[str, Any] = {"status": item["status"]["S"], "item": item_size(item)}
        for index in LEDGER.indexes:
            entry = index_entry(item, index)
            row[index.name] = None if entry is None else item_size(entry)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parse_no_options("python -m bench.item_sizes", __doc__, argv)
    from agent_wait_cli.local.stack import LocalStack, StackConfig
    from examples.demo import PROJECT, Demo

    warnings.filterwarnings("ignore", message="No application metrics to publish")
    with LocalStack(StackConfig(project=PROJECT, port=0, moto_port=0)) as stack:
        if Demo(stack, out=io.StringIO()).run() != 0:
            print("the demo failed; no sizes measured", file=sys.stderr)  # noqa: T201
            return 1
        dynamodb = stack.client("dynamodb")
        pages = dynamodb.get_paginator("scan").paginate(TableName=stack.resources.ledger_table)
        items = [item for page in pages for item in page["Items"]]
    rows = measure(items)
    names = [index.name for index in LEDGER.indexes]
    lines = [
        "| question item (status) | item bytes | " + " | ".join(f"{n} entry bytes" for n in names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for row in sorted(rows, key=lambda r: r["item"]):
        cells = [str(row[n]) if row[n] is not None else "—" for n in names]
        lines.append(f"| {row['status']} | {row['item']} | " + " | ".join(cells) + " |")
    print("\n".join(lines))  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
