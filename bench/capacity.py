"""``make capacity RATE=1000``: what N questions a second asks of AWS, and what a million questions cost.

1. Starts the local stack (moto on 127.0.0.1, the real api, runner, dispatcher and lifecycle handlers) with
   :class:`~bench.recorder.CallRecorder` installed: every AWS call the handlers make is counted
   through botocore's ``before-call``/``after-call`` events, with DynamoDB's request units per
   partition key (table and index) from the stored item sizes, and every handler invocation is
   timed (wall time and CPU time, with the AWS calls it made) and its log output counted.
2. Drives a sample of questions through it (``--questions``, default 100), in waves: start a run
   (``POST /threads/{id}/runs``), the run parks on its question, the human reads it
   (``GET /questions/{id}``) and answers (``POST /questions/{id}/reply``), the run resumes and
   ends; the sample is counted once the dispatcher has handled the run's last changes on the
   ledger's stream (its ``wait.resumed`` and ``thread.done`` events). Every run asks with a ttl of
   an hour and two reminders (``--timed-share`` mixes in runs without timers). The audit archive's
   records (a file locally, Firehose deployed) are sized from the file, and each write of it is
   counted as the PutRecordBatch calls Firehose would take.
3. Divides the counts by the sample and multiplies by ``--rate`` (:mod:`bench.capacity_report`):
   the hottest partition's WRU/s and RRU/s, calls per second per queue and action, per api route
   and per AWS action, schedules created, deleted and live, Lambda concurrency; each beside its AWS
   limit or default quota (:mod:`bench.prices`), flagged above 50 %.
4. Prices the same counts per million questions (:mod:`bench.costs`), beside the same flow as a
   Step Functions Standard ``.waitForTaskToken`` workflow whose transitions are walked in
   ``bench/stepfunctions_flow.asl.json`` (:mod:`bench.stepfunctions`).

Writes its own section of ``bench/results.md`` (the rest of the file is ``make bench``'s). Counts
are exact for the sample; Lambda durations are modelled from each invocation's CPU time and its
calls at stated in-region latencies (:func:`bench.prices.latency_ms`), not this machine's wall
time against moto, which the notes show beside them. The exit status is 0 whatever the figures say.

    make capacity RATE=1000        # or: python -m bench.capacity --rate 1000 [--questions 100]
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import logging
import os
import re
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.capacity_report import (
    AT_RATE_BATCH,
    FULL_BATCH,
    Invocation,
    Replay,
    Sample,
    analyse,
    batch_at_rate,
    ledger_wru_per_question,
    render,
    write_section,
)
from bench.prices import REGION
from bench.recorder import (
    Call,
    CallRecorder,
    HookTime,
    current_function,
    current_question,
    hook_seconds,
    round_trips,
)
from infra.constants import LOG_LEVEL, REPO_ROOT
from wait_service.ledger.shards import shards_for_rate
from wait_service.resources import DISPATCHER

# The sample's resource names begin with this; a replay's with this and its function name.
PREFIX = "capacity-"

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from agent_wait_cli.local.stack import LocalStack

RESULTS = REPO_ROOT / "bench" / "results.md"
GRAPH = "examples.timed_refund_agent:build_graph"
TTL_SECONDS = 3600
REMINDERS = [600, 1800]
APPROVE: Any = {"action": "approve"}
# Who starts and answers, as a deployed stack's default auth (IAM) records a caller: a role
# session's ARN. The question item holds it (requester, responder, the answer's stage): its size
# decides the item's write units, as does the reply URL's.
DEPLOYED_PRINCIPAL = "arn:aws:sts::123456789012:assumed-role/agent-wait-responder/ann"
# A reply URL as long as a deployed stack's (its REST API's stage URL; infra.functions sets it).
DEPLOYED_REPLY_URL = (
    "https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/prod/questions/{question_id}/reply"
)
_THREAD = re.compile(r"\bcap-\d{5}-[0-9a-f]{6}\b")
_QUESTION = re.compile(r"\b[0-9a-f]{32,64}\b")
_LINE = re.compile(r"\s(question raised|run done|run failed)\s")
_FIELD = re.compile(r"\b(thread|question)=(\S+)")
# The dispatcher's resolution events (the local stack prints one line per event it published).
_EVENT = re.compile(r"\sevent\s+type=(\S+)")
# A run's last stream records: the sample is counted once the dispatcher has handled them.
_LAST_EVENTS = ("wait.resumed", "thread.done")


# -- the sample run -----------------------------------------------------------------------------


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


def _recording_stack_class() -> type[LocalStack]:
    from agent_wait_cli.local.stack import LocalStack

    class RecordingStack(LocalStack):
        """The local stack with every handler invocation timed and tagged (function, question)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.invocations: list[Invocation] = []
            self.ids: dict[str, str] = {}  # a thread, question or run id of the sample → its thread id
            self._invocations_lock = threading.Lock()
            # Ids in the new items the dispatcher has handled (a question's raise among them).
            self._inserted: set[str] = set()
            self._inserted_changed = threading.Condition()
            # Every way the stack invokes a handler (api, runner, lifecycle, and any added later).
            for name in dir(type(self)):
                if name.startswith("_invoke_"):
                    setattr(self, name, self._recorded(name.removeprefix("_invoke_"), getattr(self, name)))

        def _load_handlers(self) -> None:
            # Deployed, the handlers flush metrics as EMF lines: log bytes CloudWatch ingests; and
            # the runner reads the policy store's overrides once per function and caches them (the
            # local stack reads them on every question, so that a set is seen by the next one).
            # The reply URL is the stage's, as long as a deployed one: each question item and
            # envelope holds it, and an item's size decides its write units. Nothing here follows
            # it (the sample answers by question id through the local api).
            self._set_env(
                {
                    "POWERTOOLS_METRICS_DISABLED": "false",
                    "AGENT_WAIT_POLICY_CACHE_SECONDS": None,
                    "AGENT_WAIT_REPLY_URL": DEPLOYED_REPLY_URL,
                }
            )
            super()._load_handlers()

        def question_of(self, event: Any) -> str | None:
            text = json.dumps(event, default=str)
            found = {self.ids[t] for t in _THREAD.findall(text) + _QUESTION.findall(text) if t in self.ids}
            return found.pop() if len(found) == 1 else None

        def wait_dispatched(self, question_id: str, timeout: float) -> bool:
            """Wait until the dispatcher has handled the new item of ``question_id``."""
            with self._inserted_changed:
                return self._inserted_changed.wait_for(lambda: question_id in self._inserted, timeout)

        def _note_inserted(self, records: list[Any]) -> None:
            found = {
                token
                for record in records
                if isinstance(record, dict) and record.get("eventName") == "INSERT"
                for token in _QUESTION.findall(json.dumps(record.get("dynamodb", {}).get("Keys", {})))
            }
            if found:
                with self._inserted_changed:
                    self._inserted |= found
                    self._inserted_changed.notify_all()

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
                spent = HookTime()
                tokens = (
                    current_function.set(function),
                    current_question.set(question),
                    hook_seconds.set(spent),
                )
                started = time.perf_counter()
                started_cpu = time.thread_time()
                try:
                    result = invoke(event, context)
                    if function == "dispatcher" and isinstance(event, dict):
                        self._note_inserted(event.get("Records") or [])
                    return result
                finally:
                    # The recorder's own reads (item images) are not the handler's time.
                    elapsed = max(0.0, time.perf_counter() - started - spent.wall)
                    # CPU time of this thread and of the pool threads working for it (the
                    # announcer's fan-out): what the handler computed, whatever the machine's load.
                    cpu = max(0.0, time.thread_time() - started_cpu + spent.worker_cpu - spent.cpu)
                    current_function.reset(tokens[0])
                    current_question.reset(tokens[1])
                    hook_seconds.reset(tokens[2])
                    records = event.get("Records") if isinstance(event, dict) else None
                    record = Invocation(
                        function,
                        elapsed,
                        question,
                        route=self.route_of(event),
                        scheduled=function == "lifecycle",
                        records=len(records) if isinstance(records, list) else 0,
                        cpu_seconds=cpu,
                        calls=tuple(spent.calls),
                        rounds=round_trips(spent.timed),
                    )
                    with self._invocations_lock:
                        self.invocations.append(record)

            return run

    return RecordingStack


@contextmanager
def _archive_writes_counted() -> Iterator[list[int]]:
    """The local archive's writes, as deployed: one PutRecordBatch per 500 records or 4 MiB of a write.

    Yields the list of records per PutRecordBatch the archive would have made; each call also goes
    into the invoking function's calls (the duration model waits on it).
    """
    from wait_service.stream import archive

    original = archive.JsonLinesSink.write
    batches: list[int] = []

    def write(sink: Any, records: Any) -> None:
        calls = archive.firehose_batches([archive.to_line(record).encode() for record in records])
        spent = hook_seconds.get()
        for batch in calls:
            batches.append(len(batch))
            if spent is not None:
                spent.calls.append("firehose.PutRecordBatch")
                now = time.perf_counter()
                spent.timed.append(("firehose.PutRecordBatch", now, now))
        original(sink, records)

    archive.JsonLinesSink.write = write  # type: ignore[method-assign,assignment]
    try:
        yield batches
    finally:
        archive.JsonLinesSink.write = original  # type: ignore[method-assign]


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
    listing_shards: int = 1,
    rate: float | None = None,
) -> Sample:
    """Drive ``questions`` questions through the local stack with every call and invocation recorded.

    ``listing_shards``: the stack's status listing shards (the count a deployment sets for the rate).
    ``rate``: questions a second the sample stands for; given, the sample's stream is also handed to
    the dispatcher in the batches that rate fills (:attr:`Sample.at_rate`, what its work costs there).
    """
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
        fields = dict(_FIELD.findall(line))
        event = _EVENT.search(line)
        if event:
            flag(event.group(1), fields.get("thread", "")).set()
            return
        match = _LINE.search(line)
        if not match:
            return
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
    # The sample's audit archive is read inside, then removed with the folder, even on an error.
    with tempfile.TemporaryDirectory(prefix="agent-wait-capacity-") as archive_folder:
        config = StackConfig(
            project=REPO_ROOT,
            graph=GRAPH,
            port=0,
            moto_port=0,
            prefix=PREFIX,
            log_level=LOG_LEVEL,
            listing_shards=listing_shards,
            archive_dir=Path(archive_folder),
        )
        started = time.perf_counter()
        copy = handler_log.open("w") if handler_log else None
        with recorder.installed(), _stdout_counted(copy) as stream, _archive_writes_counted() as puts:
            stack: Any = stack_class(config, write=write)
            with stack:
                rerouted = _reroute_loggers(stream)
                try:
                    endpoint["url"] = stack.moto.endpoint
                    resources = stack.resources
                    recorder.clear()
                    stack.invocations.clear()
                    stream.bytes.clear()
                    puts.clear()
                    api = ApiClient(stack.api_url, principal=DEPLOYED_PRINCIPAL)
                    threads = [f"cap-{i:05d}-{uuid.uuid4().hex[:6]}" for i in range(questions)]
                    timed = set(threads[: round(questions * timed_share)])
                    for thread_id in threads:
                        stack.ids[thread_id] = thread_id
                    for first in range(0, questions, wave):
                        batch = threads[first : first + wave]
                        _drive_wave(api, stack, batch, timed, flag, raised, lock, deadline)
                        progress(f"    {first + len(batch)}/{questions} questions answered and resumed")
                    calls = list(recorder.calls)
                    archive = _archive_record_sizes(stack.archive_dir)
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
                        stack.ids.update(_run_ids(stack.client("dynamodb"), resources.ledger_table))
                    # The sample's own, before the stream is handed over again below.
                    invocations = list(stack.invocations)
                    archive_puts = list(puts)
                    log_bytes = Counter(stream.bytes)
                    records = _stream_records(stack, recorder)
                    replay = partial(_replayed, stack, recorder, records, listing_shards=listing_shards)
                    progress(f"==> the sample's ledger stream again, in batches of {DISPATCHER.batch_size}")
                    full_batches, _ = replay(
                        function=FULL_BATCH,
                        size=DISPATCHER.batch_size,
                        whole=False,
                        archive=Path(archive_folder) / FULL_BATCH,
                    )
                    at_rate = None
                    if rate is not None:
                        ledger_wru = ledger_wru_per_question(calls, resources.ledger_table, questions)
                        size = batch_at_rate(len(records) / questions, ledger_wru, rate)
                        progress(f"==> and in the batches {rate:g} questions a second fill: {size} records")
                        put_before = len(puts)
                        done, made = replay(
                            function=AT_RATE_BATCH,
                            size=size,
                            whole=True,
                            archive=Path(archive_folder) / AT_RATE_BATCH,
                        )
                        at_rate = Replay(size, done, made, stream.bytes[AT_RATE_BATCH], puts[put_before:])
                finally:
                    for handler, previous in rerouted:
                        handler.setStream(previous)
                ids = dict(stack.ids)
        if copy is not None:
            copy.close()
    return Sample(
        questions=questions,
        timed=len(timed),
        calls=calls,
        invocations=invocations,
        log_bytes=log_bytes,
        tables=recorder.tables(),
        queues=queues,
        ledger_table=resources.ledger_table,
        inbox=resources.inbox_url.rsplit("/", 1)[-1],
        per_thread_ids=ids,
        questions_raised=len(raised),
        seconds=time.perf_counter() - started,
        load=os.getloadavg()[0],
        ttl_seconds=TTL_SECONDS,
        reminders=len(REMINDERS),
        archive_records=archive,
        archive_puts=archive_puts,
        full_batches=full_batches,
        at_rate=at_rate,
    )


def _stream_records(stack: Any, recorder: CallRecorder) -> list[dict[str, Any]]:
    """Every record of the sample's ledger stream, in order, as Lambda hands them to the dispatcher."""
    from agent_wait_cli.local.streams import lambda_record

    with recorder.suspended():
        streams = stack.client("dynamodbstreams")
        arn = stack.resources.ledger_stream_arn
        records: list[dict[str, Any]] = []
        for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            iterator = streams.get_shard_iterator(
                StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            ).get("ShardIterator")
            while iterator:
                page = streams.get_records(ShardIterator=iterator, Limit=1000)
                records += [lambda_record(r, arn) for r in page["Records"]]
                iterator = page.get("NextShardIterator") if page["Records"] else None
    return records


def _replayed(
    stack: Any,
    recorder: CallRecorder,
    records: list[dict[str, Any]],
    *,
    function: str,
    size: int,
    whole: bool,
    archive: Path,
    listing_shards: int,
) -> tuple[list[Invocation], list[Call]]:
    """The sample's ledger stream handed again to a dispatcher, in batches of ``size`` records.

    At the sample's pace the local reader hands the dispatcher a few records at a time; under load
    Lambda's mapping hands it fuller batches. The records, in order, go in batches of ``size`` to the
    real dispatcher handler wired to fresh resources (inbox, outbox, topic, counters, archive folder:
    nothing it writes has been written before, so each batch costs what its first handling would),
    each invocation timed and its calls recorded as the sample's are, under the name ``function``
    (counted apart from the sample). ``whole``: the last batch holds what is left (the cost of the
    whole stream); otherwise only full batches (what one batch at a time takes).
    """
    from agent_wait_cli.local.runtime import context_factory
    from wait_service.resources import create_resources
    from wait_service.settings import Settings
    from wait_service.stream.dispatcher import build_ledger_stream

    prefix = f"{PREFIX}{function}-"
    with recorder.suspended():
        fresh = create_resources(
            stack.client("dynamodb"), stack.client("sqs"), stack.client("sns"), prefix=prefix
        )
    archive.mkdir(parents=True, exist_ok=True)
    # The dispatcher's environment as the stack gives it, on the fresh resources.
    settings = Settings.from_env(
        {
            **fresh.env(),
            "AGENT_WAIT_ARCHIVE_DIR": str(archive),
            "AGENT_WAIT_LISTING_SHARDS": str(listing_shards),
        }
    )
    service = build_ledger_stream(
        settings, dynamodb=stack.client("dynamodb"), sqs=stack.client("sqs"), sns=stack.client("sns")
    )
    # The handler module the stack loaded: its `handle` takes the service to run with.
    module = sys.modules[stack._dispatcher_handler.__module__]
    invoke = stack._recorded(function, lambda event, context: module.handle(event, context, service))
    context = context_factory("agent-wait-dispatcher", 60, REGION)
    before, made = len(stack.invocations), len(recorder.calls)
    last = len(records) if whole else len(records) - size + 1
    for first in range(0, max(0, last), size):
        invoke({"Records": records[first : first + size]}, context())
    replayed = stack.invocations[before:]
    del stack.invocations[before:]
    # Each call, and the request units it charged, named for the sample's resource it stands for
    # (the replay's queue is the inbox, its counters table the stats table).
    calls = [
        replace(
            c,
            target=c.target.replace(prefix, PREFIX),
            usage=[replace(u, where=u.where.replace(prefix, PREFIX)) for u in c.usage],
        )
        for c in recorder.calls[made:]
        if c.function == function
    ]
    return list(replayed), calls


def _archive_record_sizes(folder: Path | None) -> list[int]:
    """Bytes of each audit archive record the dispatcher wrote (locally a JSON line; deployed the
    ``Data`` of one Firehose record: the same line, ``wait_service.stream.archive.to_line``)."""
    from wait_service.stream.archive import ARCHIVE_PREFIX, LOCAL_FILE

    if folder is None:
        return []
    sizes = []
    for path in sorted(folder.glob(f"{ARCHIVE_PREFIX}/*/{LOCAL_FILE}")):
        sizes += [len(line) for line in path.read_bytes().splitlines(keepends=True) if line.strip()]
    return sizes


def _run_ids(dynamodb: Any, ledger_table: str) -> dict[str, str]:
    """Each run's id → its thread's id, from the ledger's run items (the api names a run's id to
    nobody): a run's item is one question's key, like its thread's."""
    found: dict[str, str] = {}
    request: dict[str, Any] = {
        "TableName": ledger_table,
        "FilterExpression": "#kind = :run",
        "ExpressionAttributeNames": {"#kind": "kind", "#run": "run_id", "#thread": "thread_id"},
        "ExpressionAttributeValues": {":run": {"S": "run"}},
        "ProjectionExpression": "#run, #thread",
    }
    while True:
        page = dynamodb.scan(**request)
        for item in page.get("Items", []):
            if "run_id" in item and "thread_id" in item:
                found[item["run_id"]["S"]] = item["thread_id"]["S"]
        if "LastEvaluatedKey" not in page:
            return found
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


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
        # A person answers seconds after the question is raised, long after the dispatcher has
        # handled its raise: the raise and the answer never share a stream batch, here neither.
        if not stack.wait_dispatched(question_id, deadline):
            raise RuntimeError(f"the dispatcher never handled the raise of {question_id}")
        etag = api.request("GET", f"/questions/{question_id}").header("ETag") or ""
        reply = api.request(
            "POST", f"/questions/{question_id}/reply", body={"answer": APPROVE}, headers={"If-Match": etag}
        )
        if reply.status != 202:
            raise RuntimeError(f"the reply to {question_id} answered {reply.status}")
    for thread_id in batch:
        if not flag("ended", thread_id).wait(deadline):
            raise RuntimeError(f"{thread_id} never finished after its answer")
    # The run's end is recorded; what follows it (its resolution events, its archive record) is
    # the dispatcher's, from the ledger's stream: counted once the dispatcher has handled it.
    for thread_id in batch:
        for event in _LAST_EVENTS:
            if not flag(event, thread_id).wait(deadline):
                raise RuntimeError(f"the dispatcher never published {event} of {thread_id}")


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
    # The stack runs with the listing shards a deployment sets for this rate (docs/performance.md).
    sample = run_sample(
        args.questions,
        timed_share=args.timed_share,
        handler_log=args.handler_log,
        listing_shards=shards_for_rate(args.rate),
        rate=args.rate,
    )
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
    status = main()
    # The sample leaves millions of objects (moto's state, the recorded calls); without this the
    # interpreter's last collections walk them again and again for minutes after the results.
    gc.freeze()
    raise SystemExit(status)
