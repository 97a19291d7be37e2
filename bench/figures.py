"""Each figure of ``make bench``: ours and its baseline, measured side by side in one run.

Timed figures run in pairs (ours and the baseline back to back, the order alternating), and each pair
gives a ratio; a figure reports the min, median and max of those ratios and passes on the median, so
machine noise that hits a pair hits both halves alike. No absolute time is ever a pass/fail gate.
"""

from __future__ import annotations

import ast
import json
import os
import re
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.layout import Layout, environment, python_command
from infra.constants import REPO_ROOT

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

REFUND_INPUT: Any = {"customer": "c-17", "amount": 40}
APPROVE: Any = {"action": "approve"}
# CPU time of the import + init (all threads of the process): unlike wall time it does not count the
# time the scheduler gives to other processes, which on a shared machine swings far more than the
# code under test. The wall time is printed beside it.
TIMER = (
    "import time as _t; _c0 = _t.process_time(); _w0 = _t.perf_counter()\n{statement}\n"
    "sys.stdout.write(repr((_t.process_time() - _c0, _t.perf_counter() - _w0)))\n"
)


@dataclass
class Figure:
    """One row of ``bench/results.md``."""

    name: str
    ours: str
    baseline: str
    ratio: float | None
    goal: str
    passed: bool | None
    spread: str = ""
    notes: list[str] = field(default_factory=list)
    # The ratio of instructions executed (valgrind), for cold starts when valgrind is on PATH.
    instructions: str | None = None
    # The goal's number and its direction, for a ratio judged against it (see ratio_text).
    bound: float | None = None
    higher: bool = False

    def ratio_text(self) -> str:
        """The ratio to two decimals, or as many more (up to four) as it takes for the number shown
        to say what the verdict says: 0.8997 against ``≥ 0.9`` shows as 0.8997, not 0.90.

        Examples
        --------
        >>> Figure("f", "", "", 0.8997, "≥ 0.9", False, bound=0.9, higher=True).ratio_text()
        '0.8997'
        >>> Figure("f", "", "", 0.8912, "≥ 0.9", False, bound=0.9, higher=True).ratio_text()
        '0.89'
        """
        if self.ratio is None:
            return "—"
        for digits in (2, 3, 4):
            text = f"{self.ratio:.{digits}f}"
            if self.bound is None or self.passed is None:
                return text
            shown = float(text)
            if (shown >= self.bound if self.higher else shown <= self.bound) == self.passed:
                return text
        return text


@dataclass
class Pairs:
    """Paired measurements: ``ours[i]`` and ``baseline[i]`` were taken back to back."""

    ours: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)

    def ratios(self, *, inverse: bool = False) -> list[float]:
        if inverse:
            return [b / o for o, b in zip(self.ours, self.baseline, strict=True)]
        return [o / b for o, b in zip(self.ours, self.baseline, strict=True)]

    def spread(self, *, inverse: bool = False) -> str:
        r = self.ratios(inverse=inverse)
        return f"pairs {len(r)}: min {min(r):.2f} · median {statistics.median(r):.2f} · max {max(r):.2f}"


def run_pairs(ours: Callable[[], float], baseline: Callable[[], float], rounds: int) -> Pairs:
    """``rounds`` pairs, alternating which half runs first."""
    pairs = Pairs()
    for i in range(rounds):
        if i % 2 == 0:
            o = ours()
            b = baseline()
        else:
            b = baseline()
            o = ours()
        pairs.ours.append(o)
        pairs.baseline.append(b)
    return pairs


# -- cold start ---------------------------------------------------------------------------------


def timed_import(
    layout: Layout, statement: str, env: dict[str, str], walls: list[float] | None = None, *, setup: str = ""
) -> Callable[[], float]:
    """A fresh ``-I -S -B`` interpreter on ``layout`` timing ``statement`` from inside (start-up excluded).

    ``setup`` runs before the timer starts. Returns the CPU seconds; the wall seconds are appended
    to ``walls``.
    """
    command = python_command(layout, setup + TIMER.format(statement=statement))

    def measure() -> float:
        done = subprocess.run(
            command, env=env, cwd=layout.task, capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{statement!r} failed in the {layout.function} layout:\n{done.stderr[-3000:]}"
            )
        cpu, wall = ast.literal_eval(done.stdout.strip().splitlines()[-1])
        if walls is not None:
            walls.append(wall)
        return float(cpu)

    return measure


RUNNER_ENV = {
    "AGENT_WAIT_LEDGER_TABLE": "bench-ledger",
    "AGENT_WAIT_INBOX_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/bench-inbox.fifo",
    "AGENT_WAIT_OUTBOX_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/bench-outbox.fifo",
    "AGENT_WAIT_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:bench",
    "AGENT_WAIT_CHECKPOINT_TABLE": "bench-checkpoints",
    "AGENT_WAIT_GRAPH": "examples.refund_agent:build_graph",
    "AGENT_WAIT_REPLY_URL": "https://api.example/prod/questions/{question_id}/reply",
}


def fair_runner_floor(ttl_seconds: int) -> str:
    """Plain LangGraph's runner init: the same packages, one boto3 session with the runner's clients
    (the saver's DynamoDB client, SNS, SQS), the saver built and the same sample graph compiled."""
    return (
        "import boto3\nimport langgraph.graph\nimport langgraph.types\n"
        "from langgraph_checkpoint_aws import DynamoDBSaver\n"
        "from examples.refund_agent import build_graph\n"
        "session = boto3.Session()\n"
        f"saver = DynamoDBSaver(table_name={RUNNER_ENV['AGENT_WAIT_CHECKPOINT_TABLE']!r}, session=session, "
        f"ttl_seconds={ttl_seconds})\n"
        "clients = (session.client('sns'), session.client('sqs'))\n"
        "graph = build_graph(saver)\n"
    )


FAIR_FLOOR_NAME = (
    "fair floor: boto3 session + langgraph.graph/types + DynamoDBSaver built + its DynamoDB, SNS, SQS "
    "clients + the sample graph compiled, precompiled"
)


def cold_runner(layout: Layout, rounds: int, *, valgrind: bool = False) -> Figure:
    from wait_service.settings import Settings

    # As in Lambda: LAMBDA_TASK_ROOT set and tracing not disabled (the X-Ray SDK must stay out of init).
    env = environment(RUNNER_ENV | {"LAMBDA_TASK_ROOT": str(layout.task)})
    walls: tuple[list[float], list[float]] = ([], [])
    ours_statement = "import handler\nassert 'aws_xray_sdk' not in sys.modules"
    floor = fair_runner_floor(Settings.from_env(RUNNER_ENV).checkpoint_ttl_seconds)
    ours = timed_import(layout, ours_statement, env, walls[0])
    base = timed_import(layout, floor, env, walls[1])
    figure = _cold_figure(
        "runner cold import + init (shipped layout, -I -S, read-only), CPU time",
        run_pairs(ours, base, rounds),
        walls,
        FAIR_FLOOR_NAME,
        goal=0.8,
    )
    figure.goal = "≤ 0.8 (by not loading what is unused)"
    if valgrind:
        figure.instructions = instruction_ratio(layout, env, ours_statement, floor)
    return figure


def cold_api(layout: Layout, rounds: int, *, valgrind: bool = False) -> Figure:
    env = environment({k: RUNNER_ENV[k] for k in ("AGENT_WAIT_LEDGER_TABLE", "AGENT_WAIT_INBOX_URL")})
    env["LAMBDA_TASK_ROOT"] = str(layout.task)
    walls: tuple[list[float], list[float]] = ([], [])
    ours = timed_import(layout, "import handler\nassert 'aws_xray_sdk' not in sys.modules", env, walls[0])
    bare = (
        "import boto3\nfrom bench_baseline.bare_api import build_app\n"
        "build_app(boto3.client('dynamodb'), boto3.client('sqs'))"
    )
    figure = _cold_figure(
        "api cold import + init (shipped layout), CPU time",
        run_pairs(ours, timed_import(layout, bare, env, walls[1]), rounds),
        walls,
        "bare APIGatewayRestResolver(enable_validation=True), same routes, models, 2 clients",
        goal=1.1,
    )
    if valgrind:
        figure.instructions = instruction_ratio(
            layout, env, "import handler\nassert 'aws_xray_sdk' not in sys.modules", bare
        )
    return figure


def instruction_ratio(layout: Layout, env: dict[str, str], ours: str, baseline: str) -> str:
    """Instructions executed by ``ours`` over ``baseline`` (valgrind's callgrind), start-up taken off.

    Each statement runs once in a fresh ``-I -S -B`` interpreter on the layout, and so does an empty
    one: the interpreter's own start-up is subtracted from both, so the ratio is the import + init's
    alone. Instruction counts barely move with the machine's load, so one run of each is enough.
    """
    commands = {
        name: [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            *python_command(layout, code),
        ]
        for name, code in (("ours", ours), ("baseline", baseline), ("empty", "pass"))
    }
    fixed = env | {"PYTHONHASHSEED": "0"}
    running = {
        name: subprocess.Popen(
            command, env=fixed, cwd=layout.task, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        for name, command in commands.items()
    }
    counts: dict[str, int] = {}
    for name, process in running.items():
        _, err = process.communicate(timeout=3600)
        found = re.search(r"Collected\s*:\s*(\d+)", err)
        if process.returncode != 0 or not found:
            raise RuntimeError(f"valgrind failed on the {name} statement:\n{err[-3000:]}")
        counts[name] = int(found.group(1))
    return instruction_text(counts["ours"], counts["baseline"], counts["empty"])


def instruction_text(ours: int, baseline: int, empty: int) -> str:
    """The instruction ratio with start-up taken off, and the counts it comes from.

    Examples
    --------
    >>> instruction_text(1_062_000_000, 862_000_000, 62_000_000)
    '1.25 (1000 M / 800 M instructions)'
    """
    mine, theirs = ours - empty, baseline - empty
    return f"{mine / theirs:.2f} ({mine / 1e6:.0f} M / {theirs / 1e6:.0f} M instructions)"


def xray_first_call(layout: Layout, rounds: int) -> Figure:
    """What the first traced invocation pays when tracing is on: the lazy tracer building the real one."""
    env = environment({k: RUNNER_ENV[k] for k in ("AGENT_WAIT_LEDGER_TABLE", "AGENT_WAIT_INBOX_URL")})
    env["LAMBDA_TASK_ROOT"] = str(layout.task)
    # The handler is imported before the timer starts: only the real tracer's construction is timed.
    measure = timed_import(layout, "assert handler.tracer.real() is not None", env, setup="import handler\n")
    cost = statistics.median(measure() for _ in range(max(3, rounds // 2)))
    return Figure(
        name="X-Ray SDK loaded at the first traced call (tracing on), api layout, CPU time",
        ours=f"{cost * 1000:.0f} ms, once per execution environment",
        baseline="—",
        ratio=None,
        goal="not in the init phase (asserted above: the handlers' import leaves aws_xray_sdk unloaded)",
        passed=None,
    )


def _cold_figure(
    name: str, pairs: Pairs, walls: tuple[list[float], list[float]], baseline: str, *, goal: float
) -> Figure:
    figure = _ratio_figure(name, pairs, baseline, goal=goal)
    wall_pairs = Pairs(walls[0], walls[1])
    figure.notes.append(
        f"wall time: ours {statistics.median(walls[0]) * 1000:.0f} ms, baseline "
        f"{statistics.median(walls[1]) * 1000:.0f} ms, per-pair ratios {wall_pairs.spread()}"
    )
    return figure


def _ratio_figure(name: str, pairs: Pairs, baseline: str, *, goal: float, higher: bool = False) -> Figure:
    ratios = pairs.ratios(inverse=higher)
    median = statistics.median(ratios)
    unit = statistics.median
    return Figure(
        name=name,
        ours=f"{unit(pairs.ours) * 1000:.0f} ms",
        baseline=f"{baseline}: {unit(pairs.baseline) * 1000:.0f} ms",
        ratio=median,
        goal=f"≥ {goal}" if higher else f"≤ {goal}",
        passed=median >= goal if higher else median <= goal,
        spread=pairs.spread(inverse=higher),
        bound=goal,
        higher=higher,
    )


# -- fan-out ------------------------------------------------------------------------------------


class SlowClient:
    """Answers every AWS call after ``delay`` seconds, as a remote service would."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def __getattr__(self, name: str) -> Callable[..., dict[str, Any]]:
        def call(**_: Any) -> dict[str, Any]:
            time.sleep(self.delay)
            return {"MessageId": "m"}

        return call


def _envelope() -> Any:
    from agent_wait import Policy
    from agent_wait.envelope import Question, build_envelope

    return build_envelope(
        "t-bench",
        Question(
            question_id="q-bench",
            question={"function": "issue_refund", "args": REFUND_INPUT},
            policy=Policy(),
        ),
        reply_url="https://api.example/questions/{question_id}/reply",
    )


def fanout(rounds: int) -> Figure:
    """The composite announcer over sinks of different latencies, against the slowest sink alone."""
    from agent_wait import CompositeAnnounce
    from agent_wait.aws import DynamoDbAnnounce, SnsAnnounce, SqsAnnounce

    delays = (0.01, 0.03, 0.05)
    envelope = _envelope()
    composite = CompositeAnnounce(
        [
            DynamoDbAnnounce("ledger", client=SlowClient(delays[0])),
            SnsAnnounce("arn:aws:sns:us-east-1:1:t", client=SlowClient(delays[1])),
            SqsAnnounce("https://sqs/q.fifo", client=SlowClient(delays[2])),
        ]
    )
    slowest = SqsAnnounce("https://sqs/q.fifo", client=SlowClient(max(delays)))

    def timed(announce: Any) -> Callable[[], float]:
        def measure() -> float:
            started = time.perf_counter()
            announce.announce(envelope)
            return time.perf_counter() - started

        return measure

    pairs = run_pairs(timed(composite), timed(slowest), rounds)
    figure = _ratio_figure(
        "fan-out latency, 3 sinks: ledger 10 ms, topic 30 ms, outbox 50 ms injected per call",
        pairs,
        "the slowest sink alone (outbox, 50 ms)",
        goal=1.25,
    )
    figure.notes.append(
        "the announcer alone; a whole park's calls in a row are the 'round trips in a row' figures "
        f"(1.0 would be every sink at once; {sum(delays) / max(delays):.1f} all in turn)"
    )
    return figure


# -- reply throughput ---------------------------------------------------------------------------


def projected(item: dict[str, Any], request: Mapping[str, Any]) -> dict[str, Any]:
    """``item`` as a ``GetItem`` with ``request``'s ``ProjectionExpression`` returns it (top-level
    names, placeholders resolved), as DynamoDB does.

    Examples
    --------
    >>> item = {"a": {"S": "1"}, "status": {"S": "raised"}, "big": {"L": []}}
    >>> projected(item, {"ProjectionExpression": "a, #s", "ExpressionAttributeNames": {"#s": "status"}})
    {'a': {'S': '1'}, 'status': {'S': 'raised'}}
    """
    expression = request.get("ProjectionExpression")
    if not expression:
        return item
    names = request.get("ExpressionAttributeNames") or {}
    wanted = {names.get(part.strip(), part.strip()) for part in expression.split(",")}
    return {name: value for name, value in item.items() if name in wanted}


class StubAws:
    """DynamoDB and SQS answered from memory: the question item for reads, success for writes."""

    def __init__(self, item: dict[str, Any]) -> None:
        self.item = item

    def get_item(self, **request: Any) -> dict[str, Any]:
        return {"Item": projected(self.item, request)}

    def update_item(self, **_: Any) -> dict[str, Any]:
        return {}

    def send_message(self, **_: Any) -> dict[str, Any]:
        return {"MessageId": "m"}

    def put_item(self, **kwargs: Any) -> dict[str, Any]:
        self.item = kwargs["Item"]
        return {}


class _Body:
    """The raw body of a stubbed HTTP response, as botocore reads it."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Any:
        yield self.data


class StubEndpoint:
    """AWS answered at botocore's ``before-send``: the HTTP request never leaves the process.

    Everything a Lambda's boto3 call does up to the network still runs (parameter validation,
    serialization, endpoint resolution, SigV4 signing) and the canned response is parsed as a real
    one: DynamoDB's ``GetItem`` returns ``item`` (the attributes its projection names, if it has
    one), other writes succeed, SQS returns a message id.
    """

    def __init__(self, item: dict[str, Any]) -> None:
        self.item = item

    def attach(self, *clients: Any) -> None:
        for client in clients:
            client.meta.events.register("before-send", self.answer)

    def answer(self, request: Any, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        target = request.headers.get("X-Amz-Target", b"")
        operation = (target.decode() if isinstance(target, bytes) else str(target)).rpartition(".")[2]
        sent = json.loads(request.body or b"{}") if operation == "GetItem" else {}
        answers: dict[str, dict[str, Any]] = {
            "GetItem": {"Item": projected(self.item, sent)},
            "SendMessage": {"MessageId": "m"},
        }
        body = answers.get(operation, {})
        headers: Any = {"Content-Type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, 200, headers, _Body(json.dumps(body).encode()))


def stubbed_clients(item: dict[str, Any]) -> tuple[Any, Any]:
    """DynamoDB and SQS clients made as the api's handler makes them, answered by :class:`StubEndpoint`."""
    import boto3

    session = boto3.Session(aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1")
    dynamodb, sqs = session.client("dynamodb"), session.client("sqs")
    StubEndpoint(item).attach(dynamodb, sqs)
    return dynamodb, sqs


# Interleaved runs per half of a reply-throughput pair.
CHUNKS = 6


class ReplyWorker:
    """One side of the handler's reply throughput in a process of its own (``bench.reply_worker``)."""

    def __init__(self, side: str, tracing: bool) -> None:
        import sys
        import tempfile

        self.label = f"{side}, tracing {'on' if tracing else 'off'}"
        self._errors = tempfile.TemporaryFile(mode="w+")
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.reply_worker",
                "--side",
                side,
                "--tracing",
                "on" if tracing else "off",
            ],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            text=True,
            # Only what the worker does not set itself: no tracing switch or endpoint leaks in.
            env={k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")},
        )

    def _ask(self, line: str) -> str:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(line + "\n")
        self._process.stdin.flush()
        answer = self._process.stdout.readline()
        if not answer:
            self._process.wait(timeout=60)
            self._errors.seek(0)
            raise RuntimeError(f"the reply worker ({self.label}) stopped:\n{self._errors.read()[-3000:]}")
        return answer.strip()

    def calls(self) -> dict[str, int]:
        """The AWS calls one reply makes."""
        found: dict[str, int] = json.loads(self._ask("calls"))
        return found

    def segments(self) -> int:
        """X-Ray documents sent to the worker's daemon socket since the last ask."""
        return int(self._ask("segments"))

    def __call__(self, replies: int) -> float:
        """CPU seconds ``replies`` replies take."""
        return float(self._ask(str(replies)))

    def close(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=60)
        self._errors.close()


def interleaved(
    ours: Callable[[int], float], baseline: Callable[[int], float], rounds: int, batch: int
) -> Pairs:
    """``rounds`` pairs; each half is CHUNKS runs of ``batch // CHUNKS`` replies interleaved with the
    other half's, so a neighbour that slows the machine for a while slows both halves alike."""
    pairs = Pairs()
    chunk = batch // CHUNKS
    for i in range(rounds):
        halves = [0.0, 0.0]
        for j in range(CHUNKS):
            order = (0, 1) if (i + j) % 2 == 0 else (1, 0)
            for side in order:
                halves[side] += (ours if side == 0 else baseline)(chunk)
        pairs.ours.append(halves[0])
        pairs.baseline.append(halves[1])
    return pairs


def _throughput_figure(name: str, pairs: Pairs, batch: int, baseline: str, goal: float | None) -> Figure:
    figure = _ratio_figure(name, pairs, baseline, goal=goal or 0.0, higher=True)
    if goal is None:
        figure.goal, figure.passed = "—", None
    ours_us = statistics.median(pairs.ours) / batch * 1e6
    base_us = statistics.median(pairs.baseline) / batch * 1e6
    figure.ours = f"{batch / statistics.median(pairs.ours):.0f} replies/s ({ours_us:.0f} µs each)"
    figure.baseline = (
        f"{baseline}: {batch / statistics.median(pairs.baseline):.0f} replies/s ({base_us:.0f} µs each)"
    )
    figure.notes.append(f"{ours_us - base_us:+.0f} µs per reply against the baseline (medians)")
    return figure


def handler_throughput(rounds: int, batch: int = 300) -> list[Figure]:
    """Replies per CPU second through the api Lambda's real ``handler``, and the cost of tracing.

    Three worker processes (``bench.reply_worker``): ours with tracing on, the bare resolver behind
    the same wrappers with tracing on, and ours with tracing off. Tracing is as deployed: on, each
    invocation sampled, segments sent as UDP to a local socket standing in for Lambda's daemon.
    """
    batch = max(1, batch // CHUNKS) * CHUNKS
    workers = {
        "ours": ReplyWorker("ours", tracing=True),
        "bare": ReplyWorker("bare", tracing=True),
        "untraced": ReplyWorker("ours", tracing=False),
    }
    try:
        calls = {name: worker.calls() for name, worker in workers.items()}
        segments = {}
        for name, worker in workers.items():
            worker.segments()
            worker(CHUNKS)
            segments[name] = worker.segments() / CHUNKS
        notes = []
        if calls["ours"] != calls["bare"]:
            notes.append(f"the two sides' AWS calls differ: ours {calls['ours']}, bare {calls['bare']}")
        made = ", ".join(f"{name} {n}" for name, n in sorted(calls["ours"].items()))
        throughput = _throughput_figure(
            "reply throughput through the api Lambda's handler (logger, tracer and metrics wrappers, "
            f"metrics flush, tracing on and sampled; AWS answered at the HTTP layer; {batch} replies "
            "per half, CPU time)",
            interleaved(workers["ours"], workers["bare"], rounds, batch),
            batch,
            f"bare Powertools resolver behind the same wrappers, same calls ({made})",
            0.9,
        )
        throughput.notes += [
            *notes,
            "both run Powertools' metrics flush at the end of each invocation; a reply adds no metric "
            "on either side (ours counts an answer where the ledger's stream is read, once per "
            "decision); logs at the deployed level; both print to /dev/null",
        ]
        tracing = _throughput_figure(
            f"per-call cost of tracing: the api handler with tracing on (sampled) against off ({batch} "
            "replies per half, CPU time)",
            interleaved(workers["ours"], workers["untraced"], rounds, batch),
            batch,
            "the same handler, POWERTOOLS_TRACE_DISABLED",
            None,
        )
        tracing.notes.append(
            "a sampled invocation sends X-Ray documents as UDP to the daemon's address (here a local "
            f"socket): ours {segments['ours']:.1f} per reply, the bare resolver {segments['bare']:.1f}, "
            f"ours untraced {segments['untraced']:.1f}"
        )
    finally:
        for worker in workers.values():
            worker.close()
    return [throughput, tracing]


def framework_throughput(rounds: int, batch: int = 300) -> Figure:
    """Our code's own cost per reply: ``api.resolve`` against the bare resolver, boto3 replaced by a
    Python object and no wrappers, so what is left is the framework and, on our side, our code."""
    from agent_wait.aws import DynamoDbAnnounce
    from bench.baseline.bare_api import build_app, routes
    from wait_service.http.api import build_api
    from wait_service.observability import metrics
    from wait_service.settings import Settings

    envelope = _envelope()
    memory = StubAws({})
    DynamoDbAnnounce("bench-ledger", client=memory).deliver(envelope)
    settings = Settings(ledger_table="bench-ledger", inbox_url=RUNNER_ENV["AGENT_WAIT_INBOX_URL"])
    template = json.loads((REPO_ROOT / "tests" / "events" / "reply.json").read_text())
    event = json.loads(
        json.dumps(template).replace("QUESTION_ID", envelope.question_id).replace("DIGEST", envelope.digest)
    )
    client: Any = memory  # duck-typed: the two methods the reply route calls
    api = build_api(settings, dynamodb=client, sqs=client)
    bare = build_app(memory, memory, table="bench-ledger", queue_url=RUNNER_ENV["AGENT_WAIT_INBOX_URL"])

    def ours(event: dict[str, Any], context: Any) -> Any:
        try:
            return api.resolve(event, context)
        finally:
            metrics.clear_metrics()  # what the handler's flush would send

    def timed(resolve: Callable[[dict[str, Any], Any], Any]) -> Callable[[int], float]:
        def run(replies: int) -> float:
            events = [json.loads(json.dumps(event)) for _ in range(replies)]
            started = time.thread_time()
            for e in events:
                status = resolve(e, None)["statusCode"]
                if status != 202:
                    raise RuntimeError(f"a reply answered {status}, not 202")
            return time.thread_time() - started

        return run

    batch = max(1, batch // CHUNKS) * CHUNKS
    notes = []
    if routes(api.app) != routes(bare):
        notes.append(
            f"the bare baseline's routes differ from the api's: {sorted(routes(api.app) ^ routes(bare))}"
        )
    timed(ours)(1), timed(bare.resolve)(1)
    figure = _throughput_figure(
        "our code over the framework alone: api.resolve, boto3 replaced by a Python object, no wrappers "
        f"({batch} replies per half, CPU time)",
        interleaved(timed(ours), timed(bare.resolve), rounds, batch),
        batch,
        "bare resolver, same calls",
        None,
    )
    figure.notes += notes
    return figure


# -- local round trip ---------------------------------------------------------------------------

_LINE = re.compile(r"\s(question raised|run done)\s+.*?thread=(\S+)")


def quantile_text(values: list[float]) -> str:
    """p50, p95, p99 and the spread (min, max) of seconds, in milliseconds.

    Examples
    --------
    >>> quantile_text([i / 1000 for i in range(1, 201)])
    'p50 100 ms, p95 190 ms, p99 198 ms (min 1 · max 200 ms, 200 samples)'
    """
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    p50, p95, p99 = statistics.median(values), cuts[94], cuts[98]
    return (
        f"p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms "
        f"(min {min(values) * 1000:.0f} · max {max(values) * 1000:.0f} ms, {len(values)} samples)"
    )


def local_round_trip(threads: int = 200) -> list[Figure]:
    """Reply sent → thread done on the local stack (moto, the real handlers), one thread at a time.

    Reported, not gated: it is this machine's time through moto, not Lambda's.
    """
    from agent_wait_cli.client import ApiClient
    from agent_wait_cli.local.stack import LocalStack, StackConfig

    seen: dict[tuple[str, str], threading.Event] = {}
    lock = threading.Lock()

    def flag(what: str, thread_id: str) -> threading.Event:
        with lock:
            return seen.setdefault((what, thread_id), threading.Event())

    def write(line: str) -> None:
        match = _LINE.search(line)
        if match:
            flag(match.group(1), match.group(2)).set()

    after_202: list[float] = []
    from_sending: list[float] = []
    config = StackConfig(project=REPO_ROOT, port=0, moto_port=0, prefix="bench-rt-")
    with LocalStack(config, write=write) as stack:
        api = ApiClient(stack.api_url, principal="bench")
        ids = [f"rt-{i}" for i in range(threads)]
        for thread_id in ids:
            api.request("POST", f"/threads/{thread_id}/runs", body={"input": REFUND_INPUT})
        for thread_id in ids:
            if not flag("question raised", thread_id).wait(600):
                raise RuntimeError(f"{thread_id} never parked")
        for thread_id in ids:
            question_id = api.request("GET", f"/threads/{thread_id}").body["pending"][0]
            etag = api.request("GET", f"/questions/{question_id}").header("ETag") or ""
            done = flag("run done", thread_id)
            started = time.perf_counter()
            reply = api.request(
                "POST",
                f"/questions/{question_id}/reply",
                body={"answer": APPROVE},
                headers={"If-Match": etag},
            )
            accepted = time.perf_counter()
            if reply.status != 202:
                raise RuntimeError(f"reply answered {reply.status}")
            if not done.wait(120):
                raise RuntimeError(f"{thread_id} never finished")
            finished = time.perf_counter()
            after_202.append(finished - accepted)
            from_sending.append(finished - started)

    return [
        Figure(
            name=f"local stack: reply sent → thread done, {threads} threads one at a time",
            ours=quantile_text(from_sending),
            baseline="—",
            ratio=None,
            goal="reported, not gated (this machine through moto, not Lambda)",
            passed=None,
            notes=[
                f"the same replies from their 202: {quantile_text(after_202)}",
                "wall time on a shared machine: compare runs only at the same load",
            ],
        )
    ]


# -- sizes and bytecode -------------------------------------------------------------------------


def sizes(layouts: dict[str, Layout]) -> list[Figure]:
    from infra.report import SIZE_BUDGETS

    figures = []
    for function, name in (("runner", "Runner"), ("api", "ApiFunction")):
        size = layouts[function].size
        budget = SIZE_BUDGETS[name]
        figures.append(
            Figure(
                name=f"{function} function total (code + layers, unzipped, Lambda build)",
                ours=f"{size / 2**20:.1f} MiB",
                baseline="—",
                ratio=None,
                goal=f"≤ {budget / 2**20:.0f} MiB",
                passed=size <= budget,
            )
        )
    return figures


def bytecode(layouts: dict[str, Layout]) -> Figure:
    from infra.constants import PYTHON_VERSION

    missing = {name: layout.uncompiled() for name, layout in layouts.items()}
    count = sum(len(m) for m in missing.values())
    examples = [str(p) for m in missing.values() for p in m[:3]]
    return Figure(
        name=f"cold start pays no compilation (every shipped .py has a Python {PYTHON_VERSION} .pyc)",
        ours=f"{count} modules without bytecode",
        baseline="—",
        ratio=None,
        goal="0 (unchecked-hash .pyc; third-party layers ship bytecode only)",
        passed=count == 0,
        notes=examples,
    )


def write_results(figures: list[Figure], path: Path, header: str, *, preface: str = "") -> None:
    """The table (with an instructions column when any figure has one), spreads and notes.

    ``preface`` goes between the title and the header (how to read the figures).
    """
    counted = any(f.instructions is not None for f in figures)
    lines = ["# Benchmark results", ""]
    if preface:
        lines += [preface, ""]
    lines += [
        header,
        "",
        "| figure | ours | baseline | ratio | "
        + ("instructions (valgrind) | " if counted else "")
        + "goal | pass |",
        "|---|---|---|---|" + ("---|" if counted else "") + "---|---|",
    ]
    for f in figures:
        ratio = f.ratio_text()
        passed = "—" if f.passed is None else ("yes" if f.passed else "**no**")
        instructions = f"{f.instructions or '—'} | " if counted else ""
        lines.append(f"| {f.name} | {f.ours} | {f.baseline} | {ratio} | {instructions}{f.goal} | {passed} |")
    spreads = [f for f in figures if f.spread or f.notes]
    if spreads:
        lines += ["", "Spread of the per-pair ratios, and notes:", ""]
        for f in spreads:
            details = "; ".join(([f.spread] if f.spread else []) + f.notes)
            lines.append(f"- {f.name}: {details}")
    # The capacity section is `make capacity`'s: kept as it is.
    from bench.capacity_report import kept_section

    capacity = kept_section(path)
    if capacity:
        lines += ["", capacity]
    path.write_text("\n".join(lines) + "\n")
