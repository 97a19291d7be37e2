"""``GET /questions?status=pending``'s first page: against the old design, and 100,000 questions vs 1,000.

Two ledger tables in moto, in process (no HTTP hop), each the deployed spec
(``wait_service.resources.LEDGER``: the sparse ``by-status`` index keyed on ``status_shard``,
projecting only what a page shows) plus the old design's index on the same items: keyed on
``status``, projecting ``ALL`` (``OLD_INDEX``). Each is filled straight into moto's backend (no
request per item: 100,000 items in seconds): question items exactly as the ledger writes them
(``agent_wait.aws.dynamodb.ledger_put`` under ``--shards`` shards), most of them decided
(``resumed``) and ``--open-share`` of them still open (8 in 10 ``delivered``, 1 ``raised``, 1
``escalated``), ``created_at`` spread over a week. The table has no stream: the bench reads only.

Then the api (``wait_service.http.api.build_api``, the handler's own wiring) answers
``GET /questions?status=pending`` (first page, the default limit) against each table, and the old
design's page is read as its code read it (``old_page``: one Query per open status, one after
another, each up to the page's limit of whole items, merged newest first). For each:
Query calls (how many sent at once, how many one after another), bytes read and read units (what
DynamoDB bills, counted by :class:`bench.recorder.CallRecorder` from the entries read: an index
Query reads the projected entries); and the CPU time of the api's page with 100,000 questions
against 1,000 (min, median, max over ``--rounds``, interleaved so a slower stretch of the shared machine
falls on both alike). moto answers an index Query by scanning every item of the table in Python
(``moto/dynamodb/models/table.py``, ``query``), so that time grows with the table where
DynamoDB's does not: the read units say what AWS would do. A measurement, never a test gate.

    python -m bench.pending_page            # --small 1000 --large 100000 --rounds 10 --shards 1
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import threading
import time
import warnings
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from bench.figures import Figure
from bench.prices import REGION

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from wait_service.resources import Index, TableSpec

PRINCIPAL = "bench"
# The share of open questions in each open status: most are delivered (announced) soon after raised.
OPEN_MIX = ("delivered",) * 8 + ("raised", "escalated")
# The old design's listing: an index keyed on `status` (a handful of values), projecting ALL.
OLD_INDEX_NAME = "old-by-status"
# The page a caller gets without `limit` (the api's default).
DEFAULT_LIMIT = 50


def old_index() -> Index:
    from wait_service.resources import Index

    return Index(OLD_INDEX_NAME, "status", "created_at")


def bench_spec() -> TableSpec:
    """The deployed ledger's spec with the old design's index beside its own, and no stream."""
    from wait_service.resources import LEDGER

    return dataclasses.replace(LEDGER, indexes=(*LEDGER.indexes, old_index()), stream_view_type=None)


def question_items(count: int, open_share: float, shards: int) -> Iterator[dict[str, Any]]:
    """``count`` question items as the ledger stores them; every ``1/open_share``-th one still open."""
    from agent_wait.aws.dynamodb import ledger_put, status_shard
    from agent_wait.envelope import Question, build_envelope
    from wait_service.ledger.shards import listing_of

    start = datetime(2026, 11, 24, tzinfo=UTC)
    step = timedelta(days=7) / max(1, count)
    every = max(1, round(1 / open_share)) if open_share > 0 else 0
    for n in range(count):
        question = Question(question_id=f"q-{n:07d}", question=f"Refund order {n} of 40 EUR?")
        envelope = build_envelope(f"t-{n:07d}", question, now=start + n * step)
        item = ledger_put("ledger", envelope, shards=shards)["Item"]
        status = OPEN_MIX[(n // every) % len(OPEN_MIX)] if every and not n % every else "resumed"
        if status != "raised":
            item["status"] = {"S": status}
            item["status_shard"] = {"S": status_shard(listing_of(status), envelope.question_id, shards)}
        if status == "resumed":
            # Decided long ago: answered, then resumed (its listing moves with its status).
            item["answer"] = {"M": {"action": {"S": "approve"}}}
            item["answered_by"] = {"S": "someone@example.com"}
        yield item


def fill(table: str, items: Iterator[dict[str, Any]]) -> int:
    """Put ``items`` straight into moto's in-process backend (inside ``mock_aws``): no request each.

    moto's own ``put_item`` re-sizes the whole item for every attribute it sets (its 400 KB check:
    about 5 ms an item here); these items are a few KB, so they are stored as it stores them
    without that check, and a value many items share (a policy, an answer) is converted once.
    """
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict

    stored = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].get_table(table)
    shared: dict[str, DynamoType] = {}
    count = 0
    for attributes in items:
        values = {}
        for name, value in attributes.items():
            if name in SHARED_ATTRIBUTES:
                key = f"{name}={value!r}"
                values[name] = shared.get(key) or shared.setdefault(key, DynamoType(value))
            else:
                values[name] = DynamoType(value)
        item: Any = Item.__new__(Item)
        item.hash_key, item.range_key = values[stored.hash_key_attr], None
        # dict.update, not the size check of LimitedSizeDict.__setitem__
        item.attrs = LimitedSizeDict(values)
        stored.items[item.hash_key] = item
        count += 1
    return count


# Attributes whose value is the same on many items (converted once, shared: the bench only reads).
SHARED_ATTRIBUTES = frozenset({"kind", "policy", "source", "status", "status_shard", "answer", "answered_by"})


def old_page(client: Any, table: str, limit: int = DEFAULT_LIMIT) -> list[dict[str, Any]]:
    """The old design's first ``status=pending`` page: one Query per open status, one after another."""
    from wait_service.ledger.statuses import OPEN

    read: list[dict[str, Any]] = []
    for status in OPEN:
        response = client.query(
            TableName=table,
            IndexName=OLD_INDEX_NAME,
            KeyConditionExpression="#s = :s",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":s": {"S": status}},
            ScanIndexForward=False,
            Limit=limit,
        )
        read += response.get("Items", [])
    read.sort(key=lambda item: (item["created_at"]["S"], item["dedupe_key"]["S"]), reverse=True)
    return read[:limit]


def _page(api: Any, context: Any) -> dict[str, Any]:
    from agent_wait_cli.local.gateway import HttpRequest, to_proxy_event

    event = to_proxy_event(HttpRequest("GET", "/questions?status=pending", []), principal=PRINCIPAL)
    response: dict[str, Any] = api.resolve(event, context)
    if response.get("statusCode") != 200:
        raise RuntimeError(f"GET /questions?status=pending answered {response.get('statusCode')}")
    return response


@dataclasses.dataclass(frozen=True)
class ReadCost:
    """What one page cost DynamoDB: Query calls (all, and how many one after another), bytes, units."""

    queries: int
    in_a_row: int
    item_bytes: int
    rru: float

    def text(self) -> str:
        n = self.queries
        if n == 1:
            how = "1 Query"
        elif self.in_a_row == n:
            how = f"{n} Queries in a row"
        elif self.in_a_row == 1:
            how = f"{n} Queries at once"
        else:
            how = f"{n} Queries, {self.in_a_row} in a row (the others at once)"
        return f"{how}, {self.item_bytes:,} B read, {self.rru:g} RRU"


def _timeline(client: Any, latency: float) -> list[Any]:
    """The Queries ``client`` makes from now on, each first waiting ``latency`` as a round trip would."""
    from bench.calls import TimedCall

    calls: list[Any] = []
    started = threading.local()

    def before(**_: Any) -> None:
        started.at = time.perf_counter()
        time.sleep(latency)

    def after(**_: Any) -> None:
        calls.append(TimedCall("dynamodb.Query", "ledger", started.at, time.perf_counter()))

    client.meta.events.register("before-call.dynamodb.Query", before)
    client.meta.events.register("after-call.dynamodb.Query", after)
    return calls


def read_cost(
    recorder: Any, call: Callable[[], Any], timeline: list[Any], timed: Callable[[], Any]
) -> ReadCost:
    """Query calls, bytes and read units of ``call`` (DynamoDB's bill), and the Queries in a row of
    ``timed`` (the same page on a client of its own: the recorder's image reads would serialize the
    calls they follow)."""
    from bench.calls import in_a_row

    recorder.clear()
    call()
    timeline.clear()
    timed()
    queries = [c for c in recorder.calls if c.action == "Query"]
    return ReadCost(
        queries=len(queries),
        in_a_row=in_a_row(timeline),
        item_bytes=sum(u.item_bytes for c in queries for u in c.usage),
        rru=sum(u.rru for c in queries for u in c.usage),
    )


def _spread(values: list[float]) -> str:
    return (
        f"{min(values) * 1000:.1f} · {statistics.median(values) * 1000:.1f} · {max(values) * 1000:.1f} ms CPU"
    )


@dataclasses.dataclass
class Measured:
    sizes: dict[str, int]
    ours: dict[str, ReadCost]
    old: dict[str, ReadCost]
    times: dict[str, list[float]]
    fill_seconds: dict[str, float]


def measure(
    small: int = 1000,
    large: int = 100_000,
    rounds: int = 10,
    open_share: float = 0.1,
    shards: int = 1,
    write: Callable[[str], None] = print,
) -> Measured:
    """Fill the two ledgers, count one first page of each design, time the api's on each."""
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    import boto3
    from moto import mock_aws

    from agent_wait_cli.local.runtime import context_factory
    from bench.recorder import CallRecorder, current_function
    from wait_service.http.api import build_api
    from wait_service.resources import create_table
    from wait_service.settings import Settings

    sizes = {"small": small, "large": large}
    measured = Measured(sizes, {}, {}, {"small": [], "large": []}, {})
    with mock_aws():

        def client() -> Any:
            return boto3.client(
                "dynamodb", region_name=REGION, aws_access_key_id="local", aws_secret_access_key="local"
            )

        setup = client()
        tables = {label: f"pending-{label}-ledger" for label in sizes}
        for label, count in sizes.items():
            create_table(setup, bench_spec(), tables[label])
            started = time.perf_counter()
            fill(tables[label], question_items(count, open_share, shards))
            measured.fill_seconds[label] = time.perf_counter() - started
            write(
                f"==> {label}: {count:,} questions ({open_share:.0%} open, listing_shards={shards}) put "
                f"into moto in {measured.fill_seconds[label]:.0f} s"
            )
        settings = {
            label: Settings(ledger_table=table, listing_shards=shards) for label, table in tables.items()
        }
        context = context_factory("agent-wait-api", 29, REGION)()

        # What each page costs DynamoDB, on a recorded client; and its Queries in a row on another
        # (each call delayed as a round trip would be: Queries sent at once overlap, in a row not).
        timed = {label: client() for label in tables}  # made before the recorder wraps new clients
        timelines = {label: _timeline(timed[label], latency=0.1) for label in tables}
        timed_apis = {label: build_api(settings[label], dynamodb=timed[label]) for label in tables}
        recorder = CallRecorder(client)
        token = current_function.set("api")
        try:
            with recorder.installed():
                for label, table in tables.items():
                    counted = client()
                    recorder.attach(counted)
                    api = build_api(settings[label], dynamodb=counted)
                    measured.ours[label] = read_cost(
                        recorder,
                        partial(_page, api, context),
                        timelines[label],
                        partial(_page, timed_apis[label], context),
                    )
                    measured.old[label] = read_cost(
                        recorder,
                        partial(old_page, counted, table),
                        timelines[label],
                        partial(old_page, timed[label], table),
                    )
        finally:
            current_function.reset(token)

        apis = {label: build_api(settings[label], dynamodb=client()) for label in tables}
        for label in sizes:  # one warm-up call each
            _page(apis[label], context)
        # CPU time (the page runs in this thread: one shard, one Query, no pool): the other
        # processes of a shared machine do not count.
        for _ in range(rounds):
            for label in sizes:
                started = time.process_time()
                _page(apis[label], context)
                measured.times[label].append(time.process_time() - started)
    return measured


def figures(measured: Measured, shards: int) -> list[Figure]:
    """The ``make bench`` rows: read cost against the old design, and the local 100,000 against 1,000."""
    small, large = measured.sizes["small"], measured.sizes["large"]
    ours, old = measured.ours["large"], measured.old["large"]
    ratio = ours.rru / old.rru if old.rru else None
    cost = Figure(
        name=f"pending first page: Queries / read units vs the old design (listing_shards={shards})",
        ours=ours.text(),
        baseline=f"old design (index on status, projection ALL): {old.text()}",
        ratio=ratio,
        goal="1 Query / ≤ 0.4",
        passed=ours.in_a_row == 1 and ours.queries == 1 and ratio is not None and ratio <= 0.4,
        notes=[
            f"{large:,} questions in the ledger, 10% open; the same with {small:,}: ours "
            f"{measured.ours['small'].text()}, old {measured.old['small'].text()}",
            "read units from the index entries read (an index Query reads what it projects), "
            "eventually consistent: what DynamoDB bills, whatever moto's speed",
        ],
    )
    times = measured.times
    pairs = [b / a for a, b in zip(times["small"], times["large"], strict=True)]
    median = statistics.median(times["large"]) / statistics.median(times["small"])
    scale = Figure(
        name=f"pending first page, {large:,} questions vs {small:,} (local, moto)",
        ours=f"{_spread(times['large'])} with {large:,}",
        baseline=f"{_spread(times['small'])} with {small:,}",
        ratio=median,
        goal="≤ 2× (local)",
        passed=median <= 2,
        spread=(
            f"pairs {len(pairs)}: min {min(pairs):.2f} · median {statistics.median(pairs):.2f} · "
            f"max {max(pairs):.2f}"
        ),
        notes=[
            f"read units {measured.ours['large'].rru:g} against {measured.ours['small'].rru:g} "
            f"({measured.ours['large'].rru / measured.ours['small'].rru:.2f}×): DynamoDB reads a "
            "Query's partition in key order whatever the table holds; moto scans every item of the "
            "table for every Query and sorts the whole partition (moto/dynamodb/models/table.py, query): "
            "with one shard the open listing's partition holds every open question (10% of the "
            "ledger), so moto's time grows with the ledger",
            f"filled straight into moto's backend: {measured.fill_seconds['large']:.0f} s for {large:,}",
        ],
    )
    return [cost, scale]


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
    parser.add_argument("--shards", type=int, default=1, help="the deployment's listing_shards (default 1)")
    args = parser.parse_args(argv)
    measured = measure(args.small, args.large, args.rounds, args.open_share, args.shards)
    for figure in figures(measured, args.shards):
        print(figure.name)
        print(f"    ours: {figure.ours}")
        print(f"    baseline: {figure.baseline}")
        ratio = "—" if figure.ratio is None else f"{figure.ratio:.2f}"
        print(f"    ratio {ratio}; goal {figure.goal} → {'pass' if figure.passed else 'FAIL'}")
        for line in [figure.spread, *figure.notes]:
            if line:
                print(f"    {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
