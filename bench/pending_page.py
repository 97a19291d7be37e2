"""``GET /questions?status=pending``'s first page with 100,000 questions in the ledger against 1,000.

Two ledger tables (the deployed spec, ``wait_service.resources.LEDGER``: the write-sharded
``by-status`` index) in moto, in process (no HTTP hop: 100,000 items are written in minutes rather
than many). Each is filled directly with ``BatchWriteItem`` (25 items a call): question items
exactly as the ledger writes them (``agent_wait.aws.dynamodb.ledger_put``), most of them decided
(``resumed``) and ``--open-share`` of them still open (``raised``), with ``created_at`` spread over
the last days. Then the api
(``wait_service.api.build_api``, the handler's own wiring) answers ``GET /questions?status=pending``
(first page, the default limit) against each table, interleaved (small, large, small, ...), so
a slower stretch of the shared machine falls on both alike.

Prints the time of each size (min, median, max over ``--rounds``), the ratio large/small of each
(the goal: at most 2× on the median), and what DynamoDB would bill for one page of each (items
read, read units, Query calls: counted by :class:`bench.recorder.CallRecorder`), which does not
depend on moto's speed. moto answers an index Query by scanning the table's items in Python, so
its time grows with the table where DynamoDB's does not: the read units say what AWS would do.
A measurement, never a test gate; it writes nothing.

    python -m bench.pending_page            # --small 1000 --large 100000 --rounds 10
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from bench.prices import REGION

if TYPE_CHECKING:
    from collections.abc import Callable

BATCH = 25
PRINCIPAL = "bench"


def _question_items(table: str, count: int, open_share: float) -> list[dict[str, Any]]:
    """``count`` question items as the ledger stores them; every ``1/open_share``-th one still open."""
    from agent_wait.aws.dynamodb import ledger_put, status_shard
    from agent_wait.envelope import Question, build_envelope
    from wait_service.ledger.shards import listing_of

    start = datetime(2026, 11, 24, tzinfo=UTC)
    step = timedelta(days=7) / max(1, count)
    every = max(1, round(1 / open_share)) if open_share > 0 else 0
    items = []
    for n in range(count):
        question = Question(question_id=f"q-{n:07d}", question=f"Refund order {n} of 40 EUR?")
        envelope = build_envelope(f"t-{n:07d}", question, now=start + n * step)
        item = ledger_put(table, envelope)["Item"]
        if not every or n % every:
            # Decided long ago: answered, then resumed (its listing moves with its status).
            item["status"] = {"S": "resumed"}
            item["status_shard"] = {"S": status_shard(listing_of("resumed"), envelope.question_id)}
            item["answer"] = {"M": {"action": {"S": "approve"}}}
            item["answered_by"] = {"S": "someone@example.com"}
        items.append(item)
    return items


def _fill(client: Any, table: str, items: list[dict[str, Any]]) -> None:
    for first in range(0, len(items), BATCH):
        requests = [{"PutRequest": {"Item": item}} for item in items[first : first + BATCH]]
        pending: dict[str, Any] = {table: requests}
        while pending:
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}


def _page(api: Any, context: Any) -> dict[str, Any]:
    from agent_wait_cli.local.gateway import HttpRequest, to_proxy_event

    event = to_proxy_event(HttpRequest("GET", "/questions?status=pending", []), principal=PRINCIPAL)
    response: dict[str, Any] = api.resolve(event, context)
    if response.get("statusCode") != 200:
        raise RuntimeError(f"GET /questions?status=pending answered {response.get('statusCode')}")
    return response


def _read_cost(recorder: Any, call: Callable[[], Any]) -> tuple[int, float, int]:
    """Query calls, items read and read units of one ``call`` (DynamoDB's bill, not moto's speed)."""
    recorder.clear()
    call()
    queries = [c for c in recorder.calls if c.action == "Query"]
    items = sum(c.usage[0].item_bytes for c in queries if c.usage)
    rru = sum(u.rru for c in queries for u in c.usage)
    return len(queries), rru, items


def _spread(values: list[float]) -> str:
    return f"{min(values) * 1000:.1f} · {statistics.median(values) * 1000:.1f} · {max(values) * 1000:.1f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.pending_page", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--small", type=int, default=1000, help="questions in the small ledger")
    parser.add_argument("--large", type=int, default=100_000, help="questions in the large ledger")
    parser.add_argument("--rounds", type=int, default=10, help="first-page calls of each, interleaved")
    parser.add_argument(
        "--open-share", type=float, default=0.1, help="share of the questions still open (default 0.1)"
    )
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", message="No application metrics to publish")

    import boto3
    from moto import mock_aws

    from agent_wait_cli.local.runtime import context_factory
    from bench.recorder import CallRecorder, current_function
    from wait_service.api import build_api
    from wait_service.resources import LEDGER, create_table
    from wait_service.settings import Settings

    moto = mock_aws()
    moto.start()
    try:

        def client() -> Any:
            return boto3.client(
                "dynamodb", region_name=REGION, aws_access_key_id="local", aws_secret_access_key="local"
            )

        setup = client()
        apis: dict[str, Any] = {}
        clients: dict[str, Any] = {}
        for label, count in (("small", args.small), ("large", args.large)):
            table = f"pending-{label}-ledger"
            create_table(setup, LEDGER, table)
            started = time.perf_counter()
            _fill(setup, table, _question_items(table, count, args.open_share))
            print(
                f"==> {label}: {count:,} questions ({args.open_share:.0%} open) written to {table} "
                f"in {time.perf_counter() - started:.0f} s"
            )
            clients[label] = client()
            apis[label] = build_api(Settings(ledger_table=table), dynamodb=clients[label])
        context = context_factory("agent-wait-api", 29, REGION)()

        recorder = CallRecorder(client)
        token = current_function.set("api")
        try:
            with recorder.installed():
                for api_client in clients.values():
                    recorder.attach(api_client)
                cost = {
                    label: _read_cost(recorder, partial(_page, api, context)) for label, api in apis.items()
                }
        finally:
            current_function.reset(token)

        times: dict[str, list[float]] = {"small": [], "large": []}
        for label in times:  # one warm-up call each
            _page(apis[label], context)
        for _ in range(args.rounds):
            for label in ("small", "large"):
                started = time.perf_counter()
                _page(apis[label], context)
                times[label].append(time.perf_counter() - started)
    finally:
        moto.stop()

    print(
        f"GET /questions?status=pending, first page (default limit), {args.rounds} calls each, interleaved:"
    )
    for label, count in (("small", args.small), ("large", args.large)):
        queries, rru, item_bytes = cost[label]
        print(
            f"  {count:>9,} questions: {_spread(times[label])} (min · median · max); "
            f"DynamoDB: {queries} Query calls, {item_bytes:,} B of index entries read, {rru:g} RRU"
        )
    small, large = times["small"], times["large"]
    print(
        f"  ratio large/small: {min(large) / min(small):.2f}× · "
        f"{statistics.median(large) / statistics.median(small):.2f}× · {max(large) / max(small):.2f}× "
        "(min · median · max; goal: at most 2× on the median)"
    )
    rru_small, rru_large = cost["small"][1], cost["large"][1]
    print(
        f"  read units large/small: {rru_large / rru_small:.2f}× (what DynamoDB bills, whatever moto's speed)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
