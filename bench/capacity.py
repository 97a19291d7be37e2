"""``make capacity RATE=1000``: what N questions a second asks of AWS, and what a million questions cost.

1. Starts the local stack (moto on 127.0.0.1, the real api, runner and lifecycle handlers) with
   :class:`~bench.recorder.CallRecorder` installed: every AWS call the handlers make is counted
   through botocore's ``before-call``/``after-call`` events, with DynamoDB's request units per
   partition key (table and index) from the stored item sizes, and every handler invocation is
   timed and its log output counted.
2. Drives a sample of questions through it (``--questions``, default 100), in waves: start a run
   (``POST /threads/{id}/runs``), the run parks on its question, the human reads it
   (``GET /questions/{id}``) and answers (``POST /questions/{id}/reply``), the run resumes and
   ends. Every run asks with a ttl of an hour and two reminders (``--timed-share`` mixes in runs
   without timers).
3. Divides the counts by the sample and multiplies by ``--rate``: the hottest partition's WRU/s and
   RRU/s, calls per second per queue and action, per api route and per AWS action, schedules
   created, deleted and live, Lambda concurrency; each beside its AWS limit or default quota
   (:mod:`bench.prices`), flagged above 50 %.
4. Prices the same counts per million questions (:mod:`bench.costs`), beside the same flow as a
   Step Functions Standard ``.waitForTaskToken`` workflow whose transitions are walked in
   ``bench/stepfunctions_flow.asl.json`` (:mod:`bench.stepfunctions`).

Writes its own section of ``bench/results.md`` (the rest of the file is ``make bench``'s). Counts
are exact for the sample; durations are this machine's, in-process against moto, so the Lambda
GB-s and concurrency are indicative. The exit status is 0 whatever the figures say.

    make capacity RATE=1000        # or: python -m bench.capacity --rate 1000 [--questions 100]
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import math
import os
import re
import sys
import threading
import time
import uuid
import warnings
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import costs, stepfunctions
from bench.prices import PRICES_DATE, QUOTAS, REGION, Quota
from bench.recorder import (
    Call,
    CallRecorder,
    HookTime,
    TableShape,
    current_function,
    current_question,
    hook_seconds,
)
from infra.constants import API_MEMORY_MB, LOG_LEVEL, REPO_ROOT, RUNNER_MEMORY_MB

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from agent_wait_cli.local.stack import LocalStack

RESULTS = REPO_ROOT / "bench" / "results.md"
SECTION_START = "<!-- capacity: written by `make capacity`; `make bench` keeps it -->"
SECTION_END = "<!-- /capacity -->"
GRAPH = "examples.timed_refund_agent:build_graph"
TTL_SECONDS = 3600
REMINDERS = [600, 1800]
APPROVE: Any = {"action": "approve"}
FLAG_SHARE = 0.5
# Memory per function as the stack deploys it (infra/functions.py and infra/timers.py: the lifecycle
# function is sized like the api).
MEMORY_MB = {"api": API_MEMORY_MB, "runner": RUNNER_MEMORY_MB, "lifecycle": API_MEMORY_MB}
# Calls the local stack makes for the services it emulates, which on AWS the service makes itself:
# the event source mapping's receives and deletes are billed SQS requests (counted); the clock's
# schedule reads and deletes and the event lines' ledger reads are not calls AWS would see.
ESM_ACTIONS = frozenset({"ReceiveMessage", "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility"})
_THREAD = re.compile(r"\bcap-\d{5}-[0-9a-f]{6}\b")
_QUESTION = re.compile(r"\b[0-9a-f]{32,64}\b")
_LINE = re.compile(r"\s(question raised|run done|run failed)\s")
_FIELD = re.compile(r"\b(thread|question)=(\S+)")


# -- the sample run -----------------------------------------------------------------------------


@dataclass
class Invocation:
    function: str
    seconds: float
    question: str | None
    route: str | None = None  # api: "METHOD /path/{template}"
    cpu_seconds: float = 0.0  # CPU time of the invoking thread (less the recorder's), beside the wall time
    scheduled: bool = False  # lifecycle: fired by a schedule


class CountingStream(io.TextIOBase):
    """Stands in for stdout: what a handler writes (its log lines) is counted and dropped, the rest passes."""

    def __init__(self, target: Any, copy: Any = None) -> None:
        self._target = target
        self._copy = copy
        self._lock = threading.Lock()
        self.bytes: Counter[str] = Counter()

    def write(self, text: str) -> int:
        function = current_function.get()
        if function is None:
            return int(self._target.write(text))
        with self._lock:
            self.bytes[function] += len(text.encode())
            if self._copy is not None:
                self._copy.write(text)
        return len(text)

    def flush(self) -> None:
        self._target.flush()

    def isatty(self) -> bool:
        return False


def platform_log_bytes(function: str, memory_mb: int) -> int:
    """Bytes of the START, END and REPORT lines Lambda writes for each invocation."""
    request = str(uuid.uuid4())
    lines = (
        f"START RequestId: {request} Version: $LATEST\n",
        f"END RequestId: {request}\n",
        f"REPORT RequestId: {request}\tDuration: 123.45 ms\tBilled Duration: 124 ms\t"
        f"Memory Size: {memory_mb} MB\tMax Memory Used: 150 MB\t\n",
    )
    return sum(len(line.encode()) for line in lines)


def _recording_stack_class() -> type[LocalStack]:
    from agent_wait_cli.local.stack import LocalStack

    class RecordingStack(LocalStack):
        """The local stack with every handler invocation timed and tagged (function, question)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.invocations: list[Invocation] = []
            self.ids: dict[str, str] = {}  # a thread id or question id of the sample → its thread id
            self._invocations_lock = threading.Lock()
            # Every way the stack invokes a handler (api, runner, lifecycle, and any added later).
            for name in dir(type(self)):
                if name.startswith("_invoke_"):
                    setattr(self, name, self._recorded(name.removeprefix("_invoke_"), getattr(self, name)))

        def _load_handlers(self) -> None:
            # Deployed, the handlers flush metrics as EMF lines: log bytes CloudWatch ingests.
            self._set_env({"POWERTOOLS_METRICS_DISABLED": "false"})
            super()._load_handlers()

        def question_of(self, event: Any) -> str | None:
            text = json.dumps(event, default=str)
            found = {self.ids[t] for t in _THREAD.findall(text) + _QUESTION.findall(text) if t in self.ids}
            return found.pop() if len(found) == 1 else None

        def route_of(self, event: Any) -> str | None:
            if not isinstance(event, dict) or "httpMethod" not in event:
                return None
            path = str(event.get("path", ""))
            for token in set(_THREAD.findall(path)):
                path = path.replace(token, "{thread_id}")
            for token in set(_QUESTION.findall(path)):
                path = path.replace(token, "{question_id}")
            return f"{event['httpMethod']} {path}"

        def _recorded(self, function: str, invoke: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
            def run(event: Any, context: Any) -> Any:
                question = self.question_of(event)
                spent = HookTime(threading.get_ident())
                tokens = (
                    current_function.set(function),
                    current_question.set(question),
                    hook_seconds.set(spent),
                )
                started, cpu = time.perf_counter(), time.thread_time()
                try:
                    return invoke(event, context)
                finally:
                    # The recorder's own reads (item images) are not the handler's time.
                    elapsed = max(0.0, time.perf_counter() - started - spent.wall)
                    cpu = max(0.0, time.thread_time() - cpu - spent.cpu)
                    current_function.reset(tokens[0])
                    current_question.reset(tokens[1])
                    hook_seconds.reset(tokens[2])
                    record = Invocation(
                        function,
                        elapsed,
                        question,
                        cpu_seconds=cpu,
                        route=self.route_of(event),
                        scheduled=function == "lifecycle",
                    )
                    with self._invocations_lock:
                        self.invocations.append(record)

            return run

    return RecordingStack


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


@contextmanager
def _stdout_counted(copy: Any = None) -> Iterator[CountingStream]:
    real_out = sys.stdout
    stream = CountingStream(real_out, copy)
    sys.stdout = stream
    try:
        yield stream
    finally:
        sys.stdout = real_out


def _reroute_loggers(stream: CountingStream) -> list[tuple[logging.StreamHandler[Any], Any]]:
    """Every console log handler of the process writes to the counting stream while the sample runs.

    The handlers' Powertools loggers keep the stream they were made with (stdout, or whatever stood
    for it then); a file handler is left alone.
    """
    rerouted = []
    for name in [None, *logging.Logger.manager.loggerDict]:
        logger = logging.getLogger(name)
        for handler in getattr(logger, "handlers", []):
            if type(handler) is logging.StreamHandler and handler.stream is not stream:
                rerouted.append((handler, handler.setStream(stream)))
    return rerouted


def run_sample(
    questions: int,
    *,
    timed_share: float,
    wave: int = 25,
    progress: Callable[[str], None] = print,
    deadline: float = 180.0,
    handler_log: Path | None = None,
) -> Sample:
    """Drive ``questions`` questions through the local stack with every call and invocation recorded."""
    import boto3

    from agent_wait_cli.client import ApiClient
    from agent_wait_cli.local.stack import StackConfig

    flags: dict[tuple[str, str], threading.Event] = {}
    raised: dict[str, str] = {}
    lock = threading.Lock()

    def flag(what: str, thread_id: str) -> threading.Event:
        with lock:
            return flags.setdefault((what, thread_id), threading.Event())

    def write(line: str) -> None:
        match = _LINE.search(line)
        if not match:
            return
        fields = dict(_FIELD.findall(line))
        thread_id = fields.get("thread", "")
        if match.group(1) == "question raised" and "question" in fields:
            with lock:
                raised[thread_id] = fields["question"]
        flag("parked" if match.group(1) == "question raised" else "ended", thread_id).set()

    endpoint: dict[str, str] = {}
    recorder = CallRecorder(
        lambda: boto3.client(
            "dynamodb",
            endpoint_url=endpoint["url"],
            region_name=REGION,
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )
    )
    stack_class = _recording_stack_class()
    config = StackConfig(
        project=REPO_ROOT, graph=GRAPH, port=0, moto_port=0, prefix="capacity-", log_level=LOG_LEVEL
    )
    started = time.perf_counter()
    copy = handler_log.open("w") if handler_log else None
    with recorder.installed(), _stdout_counted(copy) as stream:
        stack: Any = stack_class(config, write=write)
        with stack:
            rerouted = _reroute_loggers(stream)
            try:
                endpoint["url"] = stack.moto.endpoint
                resources = stack.resources
                recorder.clear()
                stack.invocations.clear()
                stream.bytes.clear()
                api = ApiClient(stack.api_url, principal="capacity")
                threads = [f"cap-{i:05d}-{uuid.uuid4().hex[:6]}" for i in range(questions)]
                timed = set(threads[: round(questions * timed_share)])
                for thread_id in threads:
                    stack.ids[thread_id] = thread_id
                for first in range(0, questions, wave):
                    batch = threads[first : first + wave]
                    _drive_wave(api, stack, batch, timed, flag, raised, lock, deadline)
                    progress(f"    {first + len(batch)}/{questions} questions answered and resumed")
                calls = list(recorder.calls)
                queues = {}
                with recorder.suspended():
                    sqs = stack.client("sqs")
                    for url in (resources.inbox_url, getattr(resources, "outbox_url", None)):
                        if url:
                            attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
                            queues[url.rsplit("/", 1)[-1]] = attributes.get("Attributes", {})
                    for name in {c.target for c in calls if c.service == "dynamodb"}:
                        for table in name.split(","):
                            if table:
                                recorder.table(table)
            finally:
                for handler, previous in rerouted:
                    handler.setStream(previous)
            invocations = list(stack.invocations)
            ids = dict(stack.ids)
    if copy is not None:
        copy.close()
    return Sample(
        questions=questions,
        timed=len(timed),
        calls=calls,
        invocations=invocations,
        log_bytes=Counter(stream.bytes),
        tables=recorder.tables(),
        queues=queues,
        ledger_table=resources.ledger_table,
        inbox=resources.inbox_url.rsplit("/", 1)[-1],
        per_thread_ids=ids,
        questions_raised=len(raised),
        seconds=time.perf_counter() - started,
        load=os.getloadavg()[0],
    )


def _drive_wave(
    api: Any,
    stack: Any,
    batch: list[str],
    timed: set[str],
    flag: Callable[[str, str], threading.Event],
    raised: dict[str, str],
    lock: threading.Lock,
    deadline: float,
) -> None:
    for thread_id in batch:
        policy: dict[str, Any] = {"ttl": TTL_SECONDS, "reminders": REMINDERS} if thread_id in timed else {}
        body = {"input": {"customer": f"c-{thread_id[4:9]}", "amount": 40, "policy": policy}}
        api.request("POST", f"/threads/{thread_id}/runs", body=body)
    for thread_id in batch:
        if not flag("parked", thread_id).wait(deadline):
            raise RuntimeError(f"{thread_id} never parked on its question")
    for thread_id in batch:
        with lock:
            question_id = raised[thread_id]
        stack.ids[question_id] = thread_id
        etag = api.request("GET", f"/questions/{question_id}").header("ETag") or ""
        reply = api.request(
            "POST", f"/questions/{question_id}/reply", body={"answer": APPROVE}, headers={"If-Match": etag}
        )
        if reply.status != 202:
            raise RuntimeError(f"the reply to {question_id} answered {reply.status}")
    for thread_id in batch:
        if not flag("ended", thread_id).wait(deadline):
            raise RuntimeError(f"{thread_id} never finished after its answer")


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
    """A key of one question (its id in the key, or touched by one question only): no hotter at any rate."""
    if any(token in part.partition for token in ids):
        return True
    return len(part.questions) == 1


def _row(figure: str, value: float, unit: str, quota: str) -> Row:
    limit, name = _quota(quota)
    return Row(figure, value, unit, limit, name)


def _dynamodb_rows(parts: list[Partition], ids: dict[str, str], per_second: float) -> list[Row]:
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


def _messaging_rows(calls: list[Call], queues: dict[str, dict[str, str]], per_second: float) -> list[Row]:
    """Each queue's actions (against the FIFO mode's limit) and SNS Publish."""
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
    publishes = sum(1 for c in calls if c.service == "sns" and c.action == "Publish")
    if publishes:
        rows.append(_row("SNS Publish", publishes * per_second, "calls/s", "sns_publish_tps"))
    return rows


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
    return [
        _row("Scheduler CreateSchedule", len(creates) * per_second, "calls/s", "scheduler_create_tps"),
        _row("Scheduler DeleteSchedule", deletes * per_second, "calls/s", "scheduler_delete_tps"),
        _row("Scheduler schedules live", sum(lifetimes) * per_second, "schedules", "scheduler_live"),
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


def analyse(sample: Sample, rate: float, *, answer_after: float | None) -> Report:
    """Every figure at ``rate`` questions a second, and the costs, from one sample's counts."""
    n = sample.questions
    calls, left = counted(sample)
    per_second = rate / n
    parts = list(partitions(calls).values())
    busy: dict[str, float] = defaultdict(float)
    for invocation in sample.invocations:
        busy[invocation.function] += invocation.seconds
    rows = [
        *_dynamodb_rows(parts, sample.per_thread_ids, per_second),
        *_messaging_rows(calls, sample.queues, per_second),
        *_api_rows(sample.invocations, per_second),
        *_scheduler_rows(calls, sample.invocations, per_second, answer_after),
        *_lambda_rows(busy, per_second),
    ]

    per_q = _per_question(sample, calls)
    questions_per_thread = max(1, round(sample.questions_raised / n))
    fired = sum(1 for i in sample.invocations if i.scheduled)
    transitions = stepfunctions.transitions(questions_per_thread, timers_fired=round(fired / n))
    sfn = costs.step_functions(
        per_q, transitions, questions_per_thread, _token_task(sample, calls), inbox=sample.inbox
    )

    notes = []
    if left:
        notes.append(
            "not counted (the local stack's emulation: the clock's schedule reads, the event lines' "
            "ledger reads, empty polls): " + ", ".join(f"{k} {v}" for k, v in sorted(left.items()))
        )
    streams = [t.name for t in sample.tables.values() if t.stream]
    notes.append(f"streams: {', '.join(streams) if streams else 'none on the tables touched'}")
    counts = Counter(i.function for i in sample.invocations)
    cpu: dict[str, float] = defaultdict(float)
    for invocation in sample.invocations:
        cpu[invocation.function] += invocation.cpu_seconds
    notes.append(
        "mean invocation, this machine (wall time less the recorder's own reads; the invoking "
        f"thread's CPU time beside it; load average {sample.load:.1f} on {os.cpu_count()} CPUs): "
        + ", ".join(
            f"{f} {busy[f] / n_calls * 1000:.0f} ms (CPU {cpu[f] / n_calls * 1000:.0f} ms)"
            for f, n_calls in sorted(counts.items())
        )
    )
    notes.append(
        "the event source mapping's receives and deletes are counted one batch per message as the "
        "local poller made them; Lambda's pollers batch up to 10 messages under load, so fewer"
    )
    notes.append(
        "not priced: API Gateway access logs, X-Ray traces (sampled), data transfer, the outbox's "
        "and the topic's subscribers"
    )
    return Report(
        rate=rate,
        sample=sample,
        rows=rows,
        partitions=sorted(parts, key=lambda p: (-p.wru, -p.rru)),
        per_question=per_q,
        ours=costs.itemised(per_q),
        sfn=sfn,
        transitions=transitions,
        calls_per_question=Counter(c.name for c in calls),
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


def _billed_gb_seconds(invocation: Invocation) -> float:
    memory = MEMORY_MB.get(invocation.function, API_MEMORY_MB)
    return math.ceil(invocation.seconds * 1000) / 1000 * memory / 1024


def _per_question(sample: Sample, calls: list[Call]) -> costs.PerQuestion:
    n = sample.questions
    requests: Counter[str] = Counter(i.function for i in sample.invocations)
    gb: dict[str, float] = defaultdict(float)
    for invocation in sample.invocations:
        gb[invocation.function] += _billed_gb_seconds(invocation)
    wru_tables = sum(u.wru for c in calls for u in c.usage if "/" not in u.where)
    wru_indexes = sum(u.wru for c in calls for u in c.usage if "/" in u.where)
    rru = sum(u.rru for c in calls for u in c.usage)
    sqs: dict[str, float] = defaultdict(float)
    for call in calls:
        if call.service == "sqs":
            sqs[call.target] += call.billable / n
    logs = sum(sample.log_bytes.values()) + sum(
        platform_log_bytes(i.function, MEMORY_MB.get(i.function, API_MEMORY_MB)) for i in sample.invocations
    )
    return costs.PerQuestion(
        lambda_requests={f: c / n for f, c in requests.items()},
        lambda_gb_seconds={f: s / n for f, s in gb.items()},
        dynamodb_wru_tables=wru_tables / n,
        dynamodb_wru_indexes=wru_indexes / n,
        dynamodb_rru=rru / n,
        stream_tables=tuple(sorted(t.name for t in sample.tables.values() if t.stream)),
        sqs_requests=dict(sqs),
        sns_publishes=sum(c.billable for c in calls if c.service == "sns" and c.action == "Publish") / n,
        api_requests=sum(1 for i in sample.invocations if i.function == "api") / n,
        scheduler_invocations=sum(1 for i in sample.invocations if i.scheduled) / n,
        log_bytes=logs / n,
    )


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
        f"({s.timed} of them with a ttl of {TTL_SECONDS} s and two reminders) went through the local stack "
        "(start, park, the human reads and answers, resume); every AWS call the handlers and the inbox's "
        f"event source mapping made was counted, then divided by the sample and multiplied by {rate:g} "
        "questions a second. Request units are computed from the stored item sizes by DynamoDB's rules; "
        "Lambda durations are this machine's (in-process, against moto), so GB-s and concurrency are "
        f"indicative. Quotas are the default ones; prices are {REGION} list prices read {PRICES_DATE} "
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
    ours_total = costs.total(report.ours)
    sfn_total = costs.total(report.sfn)
    lines += [
        "",
        f"### Cost per million questions ({REGION} list prices)",
        "",
        f"Step Functions: the same flow as a Standard `.waitForTaskToken` workflow "
        f"(`bench/stepfunctions_flow.asl.json`), {report.transitions} transitions per question, "
        "walked in the ASL "
        "for the sample's path; same Lambda work, tables, api requests, announcements and logs, "
        "no inbox queue and no Scheduler, plus a WaitForAnswer task per question storing its token.",
        "",
        "| item | ours | Step Functions |",
        "|---|---|---|",
    ]
    sfn_by_item = {line.item: line for line in report.sfn}
    for line in report.ours:
        other = sfn_by_item.pop(line.item, None)
        lines.append(f"| {line.item} | ${line.usd:,.2f} | {'—' if other is None else f'${other.usd:,.2f}'} |")
    for line in sfn_by_item.values():
        lines.append(f"| {line.item} | — | ${line.usd:,.2f} |")
    ratio = ours_total / sfn_total if sfn_total else float("nan")
    lines += [
        f"| **total** | **${ours_total:,.2f}** | **${sfn_total:,.2f}** |",
        "",
        f"Ours against the Step Functions design: {ratio:.2f}. Per question: "
        f"{q.dynamodb_wru_tables:.1f} WRU on tables, {q.dynamodb_wru_indexes:.1f} WRU of index replication, "
        f"{q.dynamodb_rru:.1f} RRU, {q.log_bytes / 1024:.1f} KiB of logs.",
    ]
    lines += [f"- {note}" for note in report.notes]
    return lines


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


def _positive(kind: type[int] | type[float]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number above 0")
        return value

    return parse


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share from 0 to 1")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.capacity", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument(
        "--rate", type=_positive(float), default=1000.0, help="questions a second (default 1000)"
    )
    parser.add_argument("--questions", type=_positive(int), default=100, help="sample size (default 100)")
    parser.add_argument(
        "--timed-share",
        type=_share,
        default=1.0,
        help="share of the runs asking with a ttl and two reminders (default 1: every run)",
    )
    parser.add_argument(
        "--answer-after",
        type=_positive(float),
        default=None,
        help="seconds a human takes to answer, for the live schedules (default: timers live until due)",
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="where to write the section")
    parser.add_argument(
        "--handler-log", type=Path, default=None, help="also write the handlers' log lines here"
    )
    args = parser.parse_args(argv)
    # The GET routes publish no metric of their own: Powertools says so once per invocation.
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    print(
        f"==> driving {args.questions} questions through the local stack "
        f"(a sample, extrapolated to {args.rate:g}/s)"
    )
    sample = run_sample(args.questions, timed_share=args.timed_share, handler_log=args.handler_log)
    print(
        f"==> counted {len(sample.calls)} AWS calls and {len(sample.invocations)} invocations "
        f"in {sample.seconds:.0f} s"
    )
    report = analyse(sample, args.rate, answer_after=args.answer_after)
    lines = render(report)
    print("\n".join(lines))
    write_section(lines, args.results)
    print(f"==> {args.results} (section 'Capacity and cost')")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
