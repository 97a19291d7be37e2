"""The capacity run's figures from its counts: rates against quotas, costs, and the results section.

:func:`analyse` turns one :class:`Sample` (every call and invocation of a few questions on the
local stack, recorded by :mod:`bench.recorder`) into the figures at a rate: the hottest partitions,
each table and index, queue action, api route and Scheduler action, Lambda concurrency, each beside
its limit or default quota (:mod:`bench.prices`), and the cost per million questions beside the
Step Functions design (:mod:`bench.costs`, :mod:`bench.stepfunctions`). :func:`render` writes them
as Markdown; :func:`write_section` puts them in ``bench/results.md`` and leaves the rest alone.
"""

from __future__ import annotations

import json
import math
import os
import re
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from bench import costs, stepfunctions
from bench.prices import (
    LAMBDA_ONE_VCPU_MB,
    LATENCIES,
    PRICES,
    PRICES_DATE,
    QUOTAS,
    REGION,
    SECONDS_PER_MONTH,
    Quota,
    cpu_scale,
    latency_ms,
)
from infra.config import DISPATCHER_PARALLELIZATION_RANGE
from infra.constants import API_MEMORY_MB, DISPATCHER_MEMORY_MB, RUNNER_MEMORY_MB
from wait_service.ledger.shards import shards_for_rate
from wait_service.resources import DISPATCHER

if TYPE_CHECKING:
    from pathlib import Path

    from bench.recorder import Call, TableShape

SECTION_START = "<!-- capacity: written by `make capacity`; `make bench` keeps it -->"
SECTION_END = "<!-- /capacity -->"
FLAG_SHARE = 0.5
# The actions that publish to an SNS topic (a batch's messages each count against the quota).
SNS_PUBLISH = ("Publish", "PublishBatch")
# Memory per function as the stack deploys it (infra/functions.py, infra/timers.py, infra/dispatcher.py
# and infra/webhooks.py: the lifecycle and webhooks functions are sized like the api).
# The sample's ledger stream handed to the dispatcher again in full batches (bench.capacity): how
# much one shard's dispatcher takes under load. Not part of the sample's counts or costs.
FULL_BATCH = "dispatcher-full-batch"
# The same stream handed over again in the batches the rate fills (bench.capacity): what the
# dispatcher's work costs at the rate. Priced in place of the sample's own dispatcher invocations.
AT_RATE_BATCH = "dispatcher-at-rate"
# The most batches of one shard handled at once (Lambda's largest ParallelizationFactor, the top
# of the context setting dispatcher_parallelization).
MAX_PARALLELIZATION = DISPATCHER_PARALLELIZATION_RANGE[1]
MEMORY_MB = {
    "api": API_MEMORY_MB,
    "runner": RUNNER_MEMORY_MB,
    "lifecycle": API_MEMORY_MB,
    "dispatcher": DISPATCHER_MEMORY_MB,
    FULL_BATCH: DISPATCHER_MEMORY_MB,
    AT_RATE_BATCH: DISPATCHER_MEMORY_MB,
    "webhooks": API_MEMORY_MB,
}
# DynamoDB splits a table into partitions of at most 1,000 write units a second each; its stream has
# a shard per partition, so a table taking W write units a second has at least W / 1,000 shards.
PARTITION_WRU = 1000
# Firehose bills each record ingested rounded up to the next 5 KB.
FIREHOSE_RECORD_ROUNDING = 5 * 1024
MIB = 1024 * 1024
# Calls the local stack makes for the services it emulates, which on AWS the service makes itself:
# the event source mapping's receives and deletes are billed SQS requests (counted); the stream
# mapping's reads of the ledger's stream (free for a Lambda trigger), the clock's schedule reads and
# deletes and the event lines' ledger reads are not calls AWS would bill.
ESM_ACTIONS = frozenset({"ReceiveMessage", "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility"})


@dataclass
class Invocation:
    function: str
    seconds: float
    question: str | None
    route: str | None = None  # api: "METHOD /path/{template}"
    scheduled: bool = False  # lifecycle: fired by a schedule
    records: int = 0  # dispatcher: the stream records of its batch
    # CPU seconds the handler spent (None: not measured, the wall time stands for the duration)
    cpu_seconds: float | None = None
    calls: tuple[str, ...] = ()  # "service.Action" of each AWS call it made, in order
    # The same calls as the round trips the handler waited for in turn (calls made at once share
    # one); None: not recorded, every call taken as its own round trip.
    rounds: tuple[tuple[str, ...], ...] | None = None

    def round_trips(self) -> tuple[tuple[str, ...], ...]:
        return self.rounds if self.rounds is not None else tuple((call,) for call in self.calls)

    def waiting_seconds(self) -> float:
        """The time spent waiting on AWS in-region: each round trip as long as its slowest call."""
        return sum(max(latency_ms(call) for call in round_) for round_ in self.round_trips()) / 1000

    def modelled_seconds(self, memory_mb: int) -> float:
        """The duration Lambda would bill in-region: the CPU at ``memory_mb``'s share of a vCPU, plus
        the round trips waited for in turn at their modelled latency (:mod:`bench.prices`)."""
        if self.cpu_seconds is None:
            return self.seconds
        return self.cpu_seconds * cpu_scale(memory_mb) + self.waiting_seconds()


@dataclass
class Sample:
    questions: int
    timed: int
    calls: list[Call]
    invocations: list[Invocation]
    log_bytes: Counter[str]
    tables: dict[str, TableShape]
    queues: dict[str, dict[str, str]]  # queue name → attributes
    ledger_table: str
    inbox: str
    per_thread_ids: dict[str, str]
    questions_raised: int
    seconds: float
    load: float = 0.0  # the machine's 1-minute load average at the end of the run
    ttl_seconds: int = 0  # the timed runs' ttl
    reminders: int = 0  # and their reminders
    # Bytes of each audit archive record the dispatcher wrote: deployed, one Firehose record each.
    archive_records: list[int] = field(default_factory=list)
    # Records of each PutRecordBatch the archive made (deployed: one per dispatcher batch with
    # decided questions in it, per 500 records or 4 MiB; wait_service.stream.archive.ArchiveConsumer).
    archive_puts: list[int] = field(default_factory=list)
    # The sample's ledger stream handed again to the dispatcher in full batches (FULL_BATCH).
    full_batches: list[Invocation] = field(default_factory=list)
    # And in the batches the rate fills (AT_RATE_BATCH): None when the run did not replay it.
    at_rate: Replay | None = None


@dataclass
class Replay:
    """The sample's whole ledger stream handed again to the dispatcher in batches of ``size`` records
    (the last one holding what is left), on fresh resources: each batch costs what its first handling
    would."""

    size: int
    invocations: list[Invocation]
    calls: list[Call]
    log_bytes: int  # what the dispatcher's handler wrote to its log over the replay
    archive_puts: list[int] = field(default_factory=list)  # records of each PutRecordBatch it made


@dataclass(frozen=True)
class Counts:
    """What AWS would see and bill for the sample's questions: the calls, the invocations, the
    bytes each function's handler logged and the audit archive's PutRecordBatch calls."""

    calls: list[Call]
    invocations: list[Invocation]
    log_bytes: Counter[str]
    archive_puts: list[int]


def fewest_shards(ledger_wru_per_question: float, rate: float) -> int:
    """The fewest partitions (so stream shards) the ledger has at ``rate``: one per 1,000 WRU a second.

    Examples
    --------
    >>> fewest_shards(22.0, 1000), fewest_shards(22.0, 10)
    (22, 1)
    """
    return max(1, math.ceil(ledger_wru_per_question * rate / PARTITION_WRU))


def batch_at_rate(records_per_question: float, ledger_wru_per_question: float, rate: float) -> int:
    """Records in a dispatcher batch at ``rate``, at the least: what one stream shard carries over the
    mapping's batching window, shared by the most batches of a shard at once, at most a full batch.

    Lambda hands a batch over when it is full or when the window has passed; the largest
    parallelization shares a shard's records among the most batches, so it gives the smallest.

    Examples
    --------
    >>> batch_at_rate(12.0, 22.0, 1000)  # 545 records a second on each of 22 shards, over 10
    54
    >>> batch_at_rate(12.0, 22.0, 10)  # 120 records a second on one shard
    12
    >>> batch_at_rate(12.0, 22.0, 0.1)
    1
    """
    per_shard = records_per_question * rate / fewest_shards(ledger_wru_per_question, rate)
    gathered = per_shard * DISPATCHER.max_batching_window_seconds / MAX_PARALLELIZATION
    return max(1, min(DISPATCHER.batch_size, math.floor(gathered)))


def platform_log_bytes(function: str, memory_mb: int) -> int:
    """Bytes of the lines Lambda itself writes for each invocation.

    The functions log in Lambda's JSON format (``LoggingFormat: JSON``, infra/functions.py): each
    invocation's system lines are ``platform.start`` and ``platform.report`` JSON records.
    """
    request = str(uuid.uuid4())
    at = "2026-12-01T10:00:00.000Z"
    lines = (
        json.dumps(
            {"time": at, "type": "platform.start", "record": {"requestId": request, "version": "$LATEST"}}
        )
        + "\n",
        json.dumps(
            {
                "time": at,
                "type": "platform.report",
                "record": {
                    "requestId": request,
                    "metrics": {
                        "durationMs": 123.45,
                        "billedDurationMs": 124,
                        "memorySizeMB": memory_mb,
                        "maxMemoryUsedMB": 150,
                    },
                    "status": "success",
                },
            }
        )
        + "\n",
    )
    return sum(len(line.encode()) for line in lines)


# -- counting -----------------------------------------------------------------------------------


def counted(sample: Sample) -> tuple[list[Call], Counter[str]]:
    """The calls AWS would see and bill (the handlers' and the event source mapping's), and the rest."""
    kept: list[Call] = []
    left: Counter[str] = Counter()
    for call in sample.calls:
        if call.function != "local stack":
            kept.append(call)
        elif call.service == "sqs" and call.target == sample.inbox and call.action in ESM_ACTIONS:
            if call.action != "ReceiveMessage" or call.messages:
                kept.append(call)  # empty polls: a long-polling mapping under load makes few
        else:
            left[call.name] += 1
    return kept, left


@dataclass
class Row:
    figure: str
    at_rate: float
    unit: str
    limit: float | None
    quota: str

    @property
    def share(self) -> float | None:
        return None if not self.limit else self.at_rate / self.limit

    @property
    def flag(self) -> str:
        share = self.share
        if share is None:
            return ""
        if share > 1:
            return "OVER QUOTA"
        return "above 50%" if share > FLAG_SHARE else "ok"


@dataclass
class Partition:
    where: str
    partition: str
    wru: float = 0.0
    rru: float = 0.0
    item_bytes: int = 0
    questions: set[str] = field(default_factory=set)


@dataclass
class Report:
    rate: float
    sample: Sample
    rows: list[Row]
    partitions: list[Partition]
    per_question: costs.PerQuestion
    ours: list[costs.Line]
    sfn: list[costs.Line]
    transitions: int
    calls_per_question: Counter[str]
    notes: list[str]
    # Ours and Step Functions' cost lines with the dispatcher's work as the sample's small batches
    # made it (what a low rate costs), when the costs above price it in the rate's batches.
    sample_batches: tuple[list[costs.Line], list[costs.Line]] | None = None


def _quota(key: str) -> tuple[float, str]:
    quota: Quota = QUOTAS[key]
    return quota.value, quota.name


def partitions(calls: list[Call]) -> dict[tuple[str, str], Partition]:
    found: dict[tuple[str, str], Partition] = {}
    for call in calls:
        for usage in call.usage:
            part = found.setdefault((usage.where, usage.partition), Partition(usage.where, usage.partition))
            part.wru += usage.wru
            part.rru += usage.rru
            part.item_bytes = max(part.item_bytes, usage.item_bytes)
            if call.question:
                part.questions.add(call.question)
    return found


def per_question_key(part: Partition, ids: dict[str, str]) -> bool:
    """A key of one question (the question's, its thread's or its run's id in the key): no hotter
    at any rate. A key the sample happened to touch for one question only (a counter shard) is
    shared all the same: more questions land on it as the rate grows."""
    return any(token in part.partition for token in ids)


def _row(figure: str, value: float, unit: str, quota: str) -> Row:
    limit, name = _quota(quota)
    return Row(figure, value, unit, limit, name)


def _dynamodb_rows(parts: list[Partition], ids: dict[str, str], per_second: float, rate: float) -> list[Row]:
    """The hottest partitions, and each table and index against its own on-demand limit."""
    rows = []
    # A shared key (a status, a shard) takes its share of every question; a question's own key
    # sees that question's calls whatever the rate.
    shared = [p for p in parts if not per_question_key(p, ids)]
    own = [p for p in parts if per_question_key(p, ids)]
    if shared:
        w = max(shared, key=lambda p: p.wru)
        r = max(shared, key=lambda p: p.rru)
        figure = "hottest shared partition, {}: {} = {!r}"
        rows.append(
            _row(figure.format("writes", w.where, w.partition), w.wru * per_second, "WRU/s", "partition_wru")
        )
        rows.append(
            _row(figure.format("reads", r.where, r.partition), r.rru * per_second, "RRU/s", "partition_rru")
        )
        rows += _sharded_rows(shared, per_second, rate)
    if own:
        w = max(own, key=lambda p: p.wru)
        r = max(own, key=lambda p: p.rru)
        figure = "hottest per-question partition, {} over its whole life (any rate): {}"
        rows.append(_row(figure.format("writes", w.where), w.wru, "WRU", "partition_wru"))
        rows.append(_row(figure.format("reads", r.where), r.rru, "RRU", "partition_rru"))
    by_where: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for p in parts:
        by_where[p.where][0] += p.wru
        by_where[p.where][1] += p.rru
    for where, (w_units, r_units) in sorted(by_where.items()):
        kind = "index" if "/" in where else "table"
        rows.append(_row(f"{kind} {where}, writes", w_units * per_second, "WRU/s", "table_wru"))
        rows.append(_row(f"{kind} {where}, reads", r_units * per_second, "RRU/s", "table_rru"))
    return rows


def _sharded_rows(shared: list[Partition], per_second: float, rate: float) -> list[Row]:
    """A write-sharded listing (keys ``<listing>#<n>``) at an even spread over its shards.

    Which shard a question lands in comes from a hash of its id, so a sample of a hundred questions
    fills the shards unevenly (the hottest one above is the sample's luck); at ``rate`` each shard
    takes its listing's writes divided by the count of shards docs/performance.md sets for that
    rate (:func:`wait_service.ledger.shards.shards_for_rate`), whatever the sampled stack ran with.
    """
    listings: dict[tuple[str, str], float] = defaultdict(float)
    for part in shared:
        listing, sep, number = part.partition.rpartition("#")
        if sep and number.isdigit():
            listings[(part.where, listing)] += part.wru
    if not listings:
        return []
    (where, listing), wru = max(listings.items(), key=lambda kv: kv[1])
    # The count docs/performance.md's Scale table sets for this rate (context listing_shards).
    shards = shards_for_rate(rate)
    figure = (
        f"hottest sharded listing, writes per shard at an even spread: {where} = "
        f"'{listing}#0..{shards - 1}' (listing_shards={shards} at this rate)"
    )
    return [_row(figure, wru / shards * per_second, "WRU/s", "partition_wru")]


def _messaging_rows(calls: list[Call], queues: dict[str, dict[str, str]], per_second: float) -> list[Row]:
    """Each queue's actions (against the FIFO mode's limit) and the messages published to SNS."""
    rows = []
    for (queue, action), count in sorted(
        Counter((c.target, c.action) for c in calls if c.service == "sqs").items()
    ):
        attributes = queues.get(queue, {})
        high = (
            attributes.get("DeduplicationScope") == "messageGroup"
            and attributes.get("FifoThroughputLimit") == "perMessageGroupId"
        )
        quota = "sqs_fifo_ht_tps" if high else "sqs_fifo_tps"
        rows.append(_row(f"SQS {queue} {action}", count * per_second, "calls/s", quota))
    # SNS's quota counts messages, a PublishBatch's each (SQS's counts calls, a batch one).
    publishes = sum(c.messages for c in calls if c.service == "sns" and c.action in SNS_PUBLISH)
    if publishes:
        rows.append(_row("SNS messages published", publishes * per_second, "messages/s", "sns_publish_tps"))
    return rows


def _firehose_rows(record_sizes: list[int], puts: list[int], per_second: float) -> list[Row]:
    """The archive's delivery stream: one PutRecordBatch per dispatcher batch, its records and bytes."""
    if not record_sizes:
        return []
    count = len(record_sizes)
    return [
        _row("Firehose archive PutRecordBatch", len(puts) * per_second, "requests/s", "firehose_requests"),
        _row("Firehose archive records", count * per_second, "records/s", "firehose_records"),
        _row("Firehose archive bytes", sum(record_sizes) * per_second / MIB, "MiB/s", "firehose_mib"),
    ]


def _api_rows(invocations: list[Invocation], per_second: float) -> list[Row]:
    """Each route against the stage's throttle (per method), all of them against the account's."""
    routes = Counter(i.route for i in invocations if i.function == "api" and i.route)
    stage_rate, stage_name = _stage_throttle()
    rows = [
        Row(f"API {route}", n * per_second, "requests/s", stage_rate, stage_name)
        for route, n in sorted(routes.items())
    ]
    rows.append(
        _row("API Gateway, all routes", sum(routes.values()) * per_second, "requests/s", "apigw_account_rps")
    )
    return rows


def _scheduler_rows(
    calls: list[Call], invocations: list[Invocation], per_second: float, answer_after: float | None
) -> list[Row]:
    """Schedules created and deleted a second, live at once, and fired a second."""
    creates = [c for c in calls if c.service == "scheduler" and c.action == "CreateSchedule"]
    deletes = sum(1 for c in calls if c.service == "scheduler" and c.action == "DeleteSchedule")
    # A schedule lives until its time, or until the question is decided (``answer_after``) and it is deleted.
    lifetimes = [c.schedule_lifetime or 0.0 for c in creates]
    if answer_after is not None:
        lifetimes = [min(life, answer_after) for life in lifetimes]
    fired = sum(1 for i in invocations if i.scheduled)
    live = (
        "each until its time"
        if answer_after is None
        else f"each until its time or the answer at {answer_after:g} s"
    )
    return [
        _row("Scheduler CreateSchedule", len(creates) * per_second, "calls/s", "scheduler_create_tps"),
        _row("Scheduler DeleteSchedule", deletes * per_second, "calls/s", "scheduler_delete_tps"),
        _row(
            f"Scheduler schedules live ({live})", sum(lifetimes) * per_second, "schedules", "scheduler_live"
        ),
        _row("Scheduler invocations", fired * per_second, "invocations/s", "scheduler_invocations_tps"),
    ]


def _lambda_rows(busy: dict[str, float], per_second: float) -> list[Row]:
    """Concurrency by Little's law: invocations a second times their duration, i.e. busy seconds a second."""
    rows = [
        _row(f"Lambda {function} concurrency", seconds * per_second, "executions", "lambda_concurrency")
        for function, seconds in sorted(busy.items())
    ]
    rows.append(
        _row(
            "Lambda concurrency, all functions",
            sum(busy.values()) * per_second,
            "executions",
            "lambda_concurrency",
        )
    )
    if "runner" not in busy:
        return rows
    runner = busy["runner"] * per_second
    reserved = getattr(_infra_config(), "runner_reserved_concurrency", None)
    if reserved:
        name = f"reserved concurrency (runner_reserved_concurrency, default {reserved})"
        rows.append(
            Row(
                "Lambda runner concurrency against its reserved concurrency",
                runner,
                "executions",
                float(reserved),
                name,
            )
        )
    mapping = _runner_max_concurrency()
    name = f"event source mapping MaximumConcurrency (runner_max_concurrency, default {mapping})"
    rows.append(
        Row(
            "Lambda runner concurrency against the inbox mapping's MaximumConcurrency",
            runner,
            "executions",
            float(mapping),
            name,
        )
    )
    return rows


@dataclass(frozen=True)
class StreamShard:
    """What one shard of the ledger's stream carries at a rate, and what its dispatcher takes."""

    records_per_second: float  # the stream's records a second on each shard, at the fewest shards
    shards: int  # the fewest shards the ledger has at this write rate
    taken_per_batch: float  # records a second the dispatcher takes one full batch at a time
    parallelization: int  # batches of a shard at once (dispatcher_parallelization, default)

    def needed(self, share: float = FLAG_SHARE) -> int:
        """The fewest batches of a shard at once that keep the dispatcher under ``share`` busy."""
        return max(1, math.ceil(self.records_per_second / (self.taken_per_batch * share)))


def stream_shard(sample: Sample, calls: list[Call], rate: float) -> StreamShard | None:
    """The ledger stream's load on one shard at ``rate`` against the dispatcher's full batches."""
    full = [i for i in sample.full_batches if i.records]
    sample_batches = [i.records for i in sample.invocations if i.function == "dispatcher"]
    if not full or not sample_batches:
        return None
    shards = fewest_shards(ledger_wru_per_question(calls, sample.ledger_table, sample.questions), rate)
    records = sum(sample_batches) / sample.questions * rate
    taken = sum(i.records for i in full) / sum(_modelled(i) for i in full)
    parallelization = int(getattr(_infra_config(), "dispatcher_parallelization", 1))
    return StreamShard(records / shards, shards, taken, parallelization)


def ledger_wru_per_question(calls: list[Call], ledger_table: str, questions: int) -> float:
    """Write units a question costs the ledger table (its indexes are partitioned apart)."""
    return sum(u.wru for c in calls for u in c.usage if u.where == ledger_table) / questions


def _full_batch_rates(full: list[Invocation], records_per_second: float) -> str:
    """The dispatcher at a rate in full batches: invocations, concurrency and calls a second."""
    batches = records_per_second / DISPATCHER.batch_size
    busy = batches * sum(_modelled(i) for i in full) / len(full)
    made: Counter[str] = Counter(call for i in full for call in i.calls)
    calls = ", ".join(f"{name} {count / len(full) * batches:,.0f}/s" for name, count in sorted(made.items()))
    return (
        f"In full batches the dispatcher would take {batches:,.0f} invocations a second, about "
        f"{busy:,.0f} executions at once, and make {calls} (the rows above count the sample's batches)"
    )


def _stream_rows(sample: Sample, calls: list[Call], rate: float) -> list[Row]:
    shard = stream_shard(sample, calls, rate)
    if shard is None:
        return []
    p = shard.parallelization
    return [
        Row(
            f"ledger stream records per shard (at least {shard.shards} shards at this write rate), "
            f"against what the dispatcher takes in full batches",
            shard.records_per_second,
            "records/s",
            shard.taken_per_batch * p,
            f"{shard.taken_per_batch:,.0f} records/s a batch at a time × dispatcher_parallelization={p} "
            f"(default; {shard.needed()} keeps it under half)",
        )
    ]


def analyse(sample: Sample, rate: float, *, answer_after: float | None) -> Report:
    """Every figure at ``rate`` questions a second, and the costs, from one sample's counts.

    With the sample's stream replayed in the rate's batches (:attr:`Sample.at_rate`), the figures
    and costs count the dispatcher's work as those batches made it; the costs of the sample's own
    small batches (a low rate's) are kept beside them.
    """
    n = sample.questions
    calls, left = counted(sample)
    own = Counts(calls, sample.invocations, sample.log_bytes, sample.archive_puts)
    at = at_rate(sample, own)
    counts = at or own
    per_second = rate / n
    parts = list(partitions(counts.calls).values())
    busy: dict[str, float] = defaultdict(float)
    for invocation in counts.invocations:
        busy[invocation.function] += _modelled(invocation)
    rows = [
        *_dynamodb_rows(parts, sample.per_thread_ids, per_second, rate),
        *_messaging_rows(counts.calls, sample.queues, per_second),
        *_firehose_rows(sample.archive_records, counts.archive_puts, per_second),
        *_api_rows(counts.invocations, per_second),
        *_scheduler_rows(counts.calls, counts.invocations, per_second, answer_after),
        *_lambda_rows(busy, per_second),
        *_stream_rows(sample, calls, rate),
    ]

    questions_per_thread = max(1, round(sample.questions_raised / n))
    fired = sum(1 for i in sample.invocations if i.scheduled)
    transitions = stepfunctions.transitions(questions_per_thread, timers_fired=round(fired / n))
    token = _token_task(sample, calls)

    def priced(q: costs.PerQuestion, monthly: float | None) -> tuple[list[costs.Line], list[costs.Line]]:
        sfn = costs.step_functions(
            q, transitions, questions_per_thread, token, inbox=sample.inbox, monthly_questions=monthly
        )
        return costs.itemised(q, monthly), sfn

    # The rate sustained for a month reaches the volume tiers of the prices that have them; the
    # sample's small batches stand for a low rate, priced at the first tier.
    per_q = _per_question(sample, counts)
    ours, sfn = priced(per_q, rate * SECONDS_PER_MONTH)
    sample_batches = None if at is None else priced(_per_question(sample, own), None)

    notes = []
    if left:
        notes.append(
            "not counted, made by no function (the local stack's stand-ins for what AWS does itself: "
            "the stream mapping's reads of the ledger's stream, free for a Lambda trigger; the clock's "
            "schedule reads; the event lines' ledger reads; empty polls): "
            + ", ".join(f"{k} {v}" for k, v in sorted(left.items()))
        )
    streams = [t.name for t in sample.tables.values() if t.stream]
    notes.append(f"streams: {', '.join(streams) if streams else 'none on the tables touched'}")
    batches = [i.records for i in sample.invocations if i.function == "dispatcher"]
    if batches:
        notes.append(
            f"the ledger's stream: {sum(batches) / n:.1f} records per question, handed to the dispatcher "
            f"in the sample in {len(batches) / n:.1f} invocations per question "
            f"({sum(batches) / len(batches):.1f} records each: the local reader's batching, what a low "
            "rate gives)"
            + (
                ""
                if at is None or sample.at_rate is None
                else f"; the figures above count it in the rate's batches of {sample.at_rate.size} "
                f"records, {len(sample.at_rate.invocations) / n:.2f} invocations per question (see the costs)"
            )
        )
    shard = stream_shard(sample, calls, rate)
    if shard is not None:
        full = [i for i in sample.full_batches if i.records]
        modelled = sum(_modelled(i) for i in full) / len(full)
        cpu = sum(i.cpu_seconds or 0.0 for i in full) / len(full)
        trips = sum(len(i.round_trips()) for i in full) / len(full)
        notes.append(
            f"under load: the sample's stream handed to the dispatcher again in {len(full)} batches of "
            f"{DISPATCHER.batch_size} records (fresh queues, topic, counters and archive: each batch "
            f"costs what its first handling would): {sum(len(i.calls) for i in full) / len(full):.1f} "
            f"calls a batch in {trips:.1f} round trips, modelled {modelled * 1000:,.0f} ms (CPU "
            f"{cpu * 1000:,.0f} ms × {cpu_scale(DISPATCHER_MEMORY_MB):.2f} at {DISPATCHER_MEMORY_MB} MB, "
            f"plus the round trips): {shard.taken_per_batch:,.0f} records a second a batch at a time. "
            f"A DynamoDB stream has a shard per table partition, and a partition takes at most "
            f"{PARTITION_WRU:,} write units a second: at {rate:g} questions a second the ledger has at "
            f"least {shard.shards} shards, {shard.records_per_second:,.0f} records a second each (fewer "
            "with more shards); the mapping hands a shard's records to at most dispatcher_parallelization "
            "invocations at once, each item's in order. "
            + _full_batch_rates(full, shard.records_per_second * shard.shards)
        )
    if sample.archive_records:
        sizes = sample.archive_records
        puts = counts.archive_puts
        notes.append(
            f"audit archive: {len(sizes) / n:.1f} records per question, {min(sizes)}–{max(sizes)} B "
            f"each, billed as 5 KB each by Firehose; put in {len(puts) / n:.2f} PutRecordBatch calls "
            f"per question ({len(sizes) / max(1, len(puts)):.1f} records each: one call per dispatcher "
            "batch holding a decided question's change)"
        )
    notes += _duration_notes(sample, counts.invocations, busy)
    memory_note = runner_memory_note(sample)
    if memory_note:
        notes.append(memory_note)
    logged = counts.log_bytes
    platform = sum(platform_log_bytes(i.function, _memory(i.function)) for i in counts.invocations)
    notes.append(
        f"logs per question: {sum(logged.values()) / n:,.0f} B written by the handlers ("
        + ", ".join(f"{f} {b / n:,.0f} B" for f, b in sorted(logged.items()))
        + f"), {platform / n:,.0f} B of Lambda's own platform.start and platform.report lines "
        f"({platform / max(1, len(counts.invocations)):.0f} B an invocation)"
    )
    notes.append(
        "the event source mapping's receives and deletes are counted one batch per message as the "
        "local poller made them; Lambda's pollers batch up to 10 messages under load, so fewer"
    )
    notes.append(
        "not priced: API Gateway access logs, X-Ray traces (sampled), data transfer, the outbox's "
        "and the topic's subscribers, the archive's S3 storage and Athena queries"
    )
    return Report(
        rate=rate,
        sample=sample,
        rows=rows,
        partitions=sorted(parts, key=lambda p: (-p.wru, -p.rru)),
        per_question=per_q,
        ours=ours,
        sfn=sfn,
        sample_batches=sample_batches,
        transitions=transitions,
        calls_per_question=Counter(c.name for c in counts.calls),
        notes=notes,
    )


def _infra_config() -> Any:
    """The deployment's settings at their defaults (what ``cdk deploy`` gives without context)."""
    from infra.config import StackConfig as InfraConfig

    return InfraConfig()


def _runner_max_concurrency() -> int:
    return int(_infra_config().runner_max_concurrency)


def _stage_throttle() -> tuple[float, str]:
    """The stage's default throttle per method: the ``api_rate`` setting's default, else the constant."""
    from infra import constants

    setting = getattr(_infra_config(), "api_rate", None)
    if setting is not None:
        return float(setting), f"stage throttle per method (context api_rate, default {setting} rps)"
    rate = getattr(constants, "API_THROTTLE_RATE", 0)
    return float(rate), f"stage throttle per method (API_THROTTLE_RATE {rate} rps)"


def _memory(function: str) -> int:
    return MEMORY_MB.get(function, API_MEMORY_MB)


def _modelled(invocation: Invocation) -> float:
    return invocation.modelled_seconds(_memory(invocation.function))


def _billed_gb_seconds(invocation: Invocation, memory_mb: int | None = None) -> float:
    """GB-s as Lambda bills them (each invocation rounded up to the millisecond), at the modelled
    duration; at ``memory_mb`` when given, else at the function's memory as deployed."""
    memory = memory_mb or _memory(invocation.function)
    return math.ceil(invocation.modelled_seconds(memory) * 1000) / 1000 * memory / 1024


# Runner memory sizes the report prices beside the deployed one (context runner_memory).
RUNNER_MEMORY_OPTIONS = (512, 1024, LAMBDA_ONE_VCPU_MB)


def runner_memory_note(sample: Sample) -> str | None:
    """The runner's warm invocations priced at other memory sizes (context ``runner_memory``): how
    long each takes and what its GB-s cost a million questions, from the same CPU and calls."""
    runs = [i for i in sample.invocations if i.function == "runner" and i.cpu_seconds is not None]
    if not runs:
        return None
    price = PRICES["lambda_gb_second"]
    options = []
    for memory in sorted({*RUNNER_MEMORY_OPTIONS, RUNNER_MEMORY_MB}):
        ms = sum(i.modelled_seconds(memory) for i in runs) / len(runs) * 1000
        gb = sum(_billed_gb_seconds(i, memory) for i in runs) / sample.questions
        deployed = " (deployed)" if memory == RUNNER_MEMORY_MB else ""
        options.append(f"{memory} MB{deployed} {ms:.0f} ms, ${price.cost(gb * costs.MILLION):.2f}")
    return (
        "the runner at other memory sizes (context runner_memory; a warm invocation's modelled "
        "duration, and its GB-s per million questions): " + "; ".join(options) + ". Less memory is a "
        "smaller share of a vCPU: the CPU of each run, and of each cold start's imports, takes longer"
    )


def _duration_notes(sample: Sample, invocations: list[Invocation], busy: dict[str, float]) -> list[str]:
    """How each function's billed duration is modelled, beside the wall time measured on this machine."""
    by_function: dict[str, list[Invocation]] = defaultdict(list)
    for invocation in invocations:
        by_function[invocation.function].append(invocation)
    parts = []
    for function, invocations in sorted(by_function.items()):
        n = len(invocations)
        memory = _memory(function)
        wall = sum(i.seconds for i in invocations) / n * 1000
        measured = [i for i in invocations if i.cpu_seconds is not None]
        if not measured:
            parts.append(
                f"{function} ({memory} MB) {busy[function] / n * 1000:.0f} ms (wall time, no CPU measured)"
            )
            continue
        cpu = sum(i.cpu_seconds or 0.0 for i in measured) / len(measured) * 1000
        calls = sum(len(i.calls) for i in measured) / len(measured)
        rounds = sum(len(i.round_trips()) for i in measured) / len(measured)
        waiting = sum(i.waiting_seconds() for i in measured) / len(measured) * 1000
        parts.append(
            f"{function} ({memory} MB) {busy[function] / n * 1000:.0f} ms = CPU {cpu:.0f} ms × "
            f"{cpu_scale(memory):.2f} + {calls:.1f} calls in {rounds:.1f} round trips {waiting:.0f} ms "
            f"(measured wall time {wall:.0f} ms)"
        )
    figures = "; ".join(
        f"{name} {latency.ms:g} ms ({latency.basis}{', ' + latency.source if latency.source else ''})"
        for name, latency in LATENCIES.items()
    )
    return [
        "Lambda durations, modelled (GB-s and concurrency use these): the CPU each invocation spent, "
        "measured per thread in-process (its fan-out's worker threads included, the recorder's own "
        f"reads left out), times the function's share of a vCPU ({LAMBDA_ONE_VCPU_MB} MB is one vCPU; "
        "one CPU-second here taken as one vCPU-second there), plus the AWS calls it made at a per-call "
        "in-region latency, round trip by round trip: calls the handler made at once (their time on "
        "the wire overlapped here) wait as long as the slowest of them; cold starts "
        "(their init, billed too) are not in it: the sample's invocations are warm, as a steady rate "
        "keeps them. Mean per "
        "invocation: " + "; ".join(parts) + f". The wall time is this machine's against moto, with "
        f"its load average at {sample.load:.1f} on {os.cpu_count()} CPUs (shared, so slower than alone)",
        f"per-call latencies of the model: {figures}",
    ]


def at_rate(sample: Sample, own: Counts) -> Counts | None:
    """The sample's counts with the dispatcher's as the rate's batches made them (the replay of the
    whole stream, :attr:`Sample.at_rate`) instead of the sample's own small batches."""
    replay = sample.at_rate
    if replay is None or not replay.invocations:
        return None
    invocations = [i for i in own.invocations if i.function != "dispatcher"]
    invocations += [replace(i, function="dispatcher") for i in replay.invocations]
    calls = [replace(c, function="dispatcher") for c in replay.calls]
    log_bytes = Counter(own.log_bytes)
    log_bytes["dispatcher"] = replay.log_bytes
    return Counts(
        [c for c in own.calls if c.function != "dispatcher"] + calls,
        invocations,
        log_bytes,
        replay.archive_puts,
    )


def _per_question(sample: Sample, counts: Counts) -> costs.PerQuestion:
    n = sample.questions
    calls, invocations, log_bytes = counts.calls, counts.invocations, counts.log_bytes
    requests: Counter[str] = Counter(i.function for i in invocations)
    gb: dict[str, float] = defaultdict(float)
    for invocation in invocations:
        gb[invocation.function] += _billed_gb_seconds(invocation)
    wru_tables = sum(u.wru for c in calls for u in c.usage if "/" not in u.where)
    wru_indexes = sum(u.wru for c in calls for u in c.usage if "/" in u.where)
    rru = sum(u.rru for c in calls for u in c.usage)
    sqs: dict[str, float] = defaultdict(float)
    for call in calls:
        if call.service == "sqs":
            sqs[call.target] += call.billable / n
    logs = sum(log_bytes.values()) + sum(
        platform_log_bytes(i.function, MEMORY_MB.get(i.function, API_MEMORY_MB)) for i in invocations
    )
    return costs.PerQuestion(
        lambda_requests={f: c / n for f, c in requests.items()},
        lambda_gb_seconds={f: s / n for f, s in gb.items()},
        dynamodb_wru_tables=wru_tables / n,
        dynamodb_wru_indexes=wru_indexes / n,
        dynamodb_rru=rru / n,
        stream_tables=tuple(sorted(t.name for t in sample.tables.values() if t.stream)),
        sqs_requests=dict(sqs),
        sns_publishes=sum(c.billable for c in calls if c.service == "sns" and c.action in SNS_PUBLISH) / n,
        api_requests=sum(1 for i in invocations if i.function == "api") / n,
        scheduler_invocations=sum(1 for i in invocations if i.scheduled) / n,
        log_bytes=logs / n,
        firehose_billed_bytes=sum(firehose_billed(size) for size in sample.archive_records) / n,
    )


def firehose_billed(size: int) -> int:
    """Bytes Firehose bills for one record: rounded up to the next 5 KB.

    Examples
    --------
    >>> firehose_billed(1), firehose_billed(5120), firehose_billed(5121)
    (5120, 5120, 10240)
    """
    return max(1, math.ceil(size / FIREHOSE_RECORD_ROUNDING)) * FIREHOSE_RECORD_ROUNDING


def _token_task(sample: Sample, calls: list[Call]) -> costs.TokenTask:
    """The WaitForAnswer task, from the same counts: an api-sized invocation and one question update."""
    api = [i for i in sample.invocations if i.function == "api"]
    gb = sum(_billed_gb_seconds(i) for i in api) / len(api) if api else 0.0
    updates = [c for c in calls if c.action == "UpdateItem" and c.target == sample.ledger_table and c.ok]
    wru = sum(u.wru for c in updates for u in c.usage) / len(updates) if updates else 1.0
    return costs.TokenTask(gb_seconds=gb, wru=wru)


# -- output -------------------------------------------------------------------------------------


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:,.1f}"
    return f"{value:.3g}"


def render(report: Report) -> list[str]:
    """The report as Markdown lines (printed and written alike)."""
    s = report.sample
    rate = report.rate
    q = report.per_question
    lines = [
        "## Capacity and cost",
        "",
        f"Written by `make capacity RATE={rate:g}` ({s.seconds:.0f} s). A sample of {s.questions} questions "
        f"({s.timed} of them with a ttl of {s.ttl_seconds} s and {s.reminders} reminders) went through the "
        "local stack "
        "(start, park, the human reads and answers, resume); every AWS call the handlers and the inbox's "
        f"event source mapping made was counted, then divided by the sample and multiplied by {rate:g} "
        "questions a second. Request units are computed from the stored item sizes by DynamoDB's rules; "
        "Lambda durations are modelled from each invocation's CPU time and its AWS calls at a stated "
        "in-region latency (the notes say how, beside the wall time measured here). Quotas are the "
        f"default ones; prices are {REGION} list prices read {PRICES_DATE} "
        "(`bench/prices.py`). Flag: above 50% of the limit.",
        "",
        f"### At {rate:g} questions a second",
        "",
        "| figure | at this rate | limit or default quota | use | flag |",
        "|---|---|---|---|---|",
    ]
    for row in report.rows:
        share = "—" if row.share is None else f"{row.share:.0%}"
        limit = f"{_number(row.limit)} ({row.quota})" if row.limit else row.quota or "—"
        flag = f"**{row.flag}**" if row.flag in ("above 50%", "OVER QUOTA") else (row.flag or "—")
        lines.append(f"| {row.figure} | {_number(row.at_rate)} {row.unit} | {limit} | {share} | {flag} |")
    lines += [
        "",
        f"AWS calls per question, and per second at {rate:g} questions a second (the handlers' and the "
        "event source mapping's): "
        + ", ".join(
            f"{name} {count / s.questions:.2f} ({_number(count / s.questions * rate)}/s)"
            for name, count in sorted(report.calls_per_question.items())
        )
        + ".",
        "",
        "Hottest partitions in the sample (WRU and RRU summed over the sample; "
        "per-question keys carry one question's id):",
        "",
        "| table or index | partition key | WRU | RRU | largest item | questions |",
        "|---|---|---|---|---|---|",
    ]
    for part in report.partitions[:8]:
        kind = "one" if per_question_key(part, s.per_thread_ids) else f"{len(part.questions)} (shared)"
        lines.append(
            f"| {part.where} | `{part.partition[:60]}` | {part.wru:g} | {part.rru:g} | "
            f"{part.item_bytes} B | {kind} |"
        )
    lines += ["", f"### Cost per million questions ({REGION} list prices)", ""]
    replay = s.at_rate
    if report.sample_batches is not None and replay is not None:
        lines += [
            f"At {rate:g} questions a second the dispatcher's work is priced as the rate's batches make "
            f"it: the sample's whole ledger stream handed to it again in batches of {replay.size} records "
            f"(what a shard carries over the mapping's {DISPATCHER.max_batching_window_seconds} s "
            f"batching window, shared by the most batches of a shard at once, {MAX_PARALLELIZATION}: "
            "the fewest records a batch holds at this rate, at the fewest shards). The last two "
            "columns price it as the sample's small batches made it: what a low rate costs.",
            "",
        ]
    monthly = rate * SECONDS_PER_MONTH
    rest_name, gb_name, logs_name = "apigw_rest_request", "lambda_gb_second", "logs_ingested_gb"
    rest, gb_s, logs = PRICES[rest_name], PRICES[gb_name], PRICES[logs_name]
    month = costs.monthly_volumes(q, monthly)
    requests, gb_seconds, log_gb = (month[name] or 0.0 for name in (rest_name, gb_name, logs_name))
    lines += [
        f"At {rate:g} questions a second a month of 730 hours holds {monthly:,.3g} questions: the "
        "prices that fall with the month's volume are averaged over the tiers it fills (the account's "
        "other use in the Region reaches them sooner): REST requests "
        f"${rest.blended(requests):.2f} a million ({requests:,.3g} a month; the first tier's "
        f"${rest.usd:.2f}), Lambda GB-s ${gb_s.blended(gb_seconds) * 1e6:.2f} a million "
        f"({gb_seconds:,.3g} a month; the first tier's ${gb_s.usd * 1e6:.2f}), Lambda's "
        f"logs ${logs.blended(log_gb):.3f} a GB ({log_gb:,.0f} GB a month; the first tier's "
        f"${logs.usd:.2f}). DynamoDB on demand, SNS, Firehose and Step Functions have one price; SQS's "
        "volume discounts start past 100 billion requests a month (not modelled: this rate makes "
        f"{sum(q.sqs_requests.values()) * monthly:,.3g})."
        + (
            ""
            if report.sample_batches is None
            else " The sample's-batches columns, a low rate's, are priced at the first tier."
        ),
        "",
        f"Step Functions: the same flow as a Standard `.waitForTaskToken` workflow "
        f"(`bench/stepfunctions_flow.asl.json`), {report.transitions} transitions per question, "
        "walked in the ASL for the sample's path; same Lambda work (the dispatcher's too), tables, "
        "api requests, announcements, audit archive and logs, no inbox queue and no Scheduler, "
        "plus a WaitForAnswer task per question storing its token.",
        "",
    ]
    columns = [report.ours, report.sfn, *(report.sample_batches or ())]
    if report.sample_batches is None:
        lines += ["| item | ours | Step Functions |", "|---|---|---|"]
    else:
        lines += [
            f"| item | ours at {rate:g}/s | Step Functions at {rate:g}/s | ours, the sample's batches | "
            "Step Functions, the sample's batches |",
            "|---|---|---|---|---|",
        ]
    for item, usd in _cost_rows(columns):
        lines.append(f"| {item} | " + " | ".join("—" if v is None else f"${v:,.2f}" for v in usd) + " |")
    totals = [costs.total(column) for column in columns]
    lines += [
        "| **total** | " + " | ".join(f"**${total:,.2f}**" for total in totals) + " |",
        "",
        f"Ours against the Step Functions design: {_ratio(totals[0], totals[1])}"
        + (
            ""
            if report.sample_batches is None
            else f" ({_ratio(totals[2], totals[3])} in the sample's batches)"
        )
        + f". Per question: {q.dynamodb_wru_tables:.1f} WRU on tables, {q.dynamodb_wru_indexes:.1f} WRU "
        f"of index replication, {q.dynamodb_rru:.1f} RRU, {q.log_bytes / 1024:.1f} KiB of logs.",
    ]
    lines += [f"- {note}" for note in report.notes]
    return lines


def _ratio(ours: float, theirs: float) -> str:
    """Three decimals: a ratio of 0.2515 is not shown as a goal of 0.25 met.

    Examples
    --------
    >>> _ratio(50.24, 199.73), _ratio(1.0, 0.0)
    ('0.252', '—')
    """
    return f"{ours / theirs:.3f}" if theirs else "—"


def _cost_rows(columns: list[list[costs.Line]]) -> list[tuple[str, list[float | None]]]:
    """One row per cost item over the columns (ours, Step Functions, ...), each column's dollars
    or None where it has no such item. An item is named as the first column holding it names it
    (the Lambda items name their counts, which differ from column to column)."""

    def key(item: str) -> str:
        return item.split(" (", 1)[0] if item.startswith("Lambda ") else item

    rows: dict[str, tuple[str, list[float | None]]] = {}
    for n, column in enumerate(columns):
        for line in column:
            _, usd = rows.setdefault(key(line.item), (line.item, [None] * len(columns)))
            usd[n] = line.usd
    return list(rows.values())


_SECTION = re.compile(re.escape(SECTION_START) + r".*?" + re.escape(SECTION_END), re.S)


def kept_section(path: Path) -> str:
    """This run's section as ``path`` holds it ("" when none): kept by ``make bench``'s rewrite."""
    match = _SECTION.search(path.read_text()) if path.exists() else None
    return match.group(0) if match else ""


def write_section(lines: list[str], path: Path) -> None:
    """Replace this run's section of ``path`` (or append it), leaving the rest as it is."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    block = "\n".join([SECTION_START, *lines, SECTION_END])
    if _SECTION.search(text):
        text = _SECTION.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.write_text(text.rstrip("\n") + "\n")
