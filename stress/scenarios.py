"""The stress scenarios: each drives the local stack over HTTP and says what it tried and what held."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_wait_cli.local.moto_server import Fault
from agent_wait_cli.local.runtime import load_handler

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_wait_cli.local.stack import LocalStack

ROOT = Path(__file__).resolve().parent.parent
# Every wait ends within this many seconds or the scenario reports what it saw instead.
STEP_TIMEOUT = 120.0
POOL = 25


@dataclass
class Outcome:
    """One row of the table: what was tried, the checks that held and those that did not."""

    scenario: str
    tried: str
    held: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    seconds: float = 0.0
    # Whether a broken check fails the run (exit 1); conformance findings are reported only.
    gate: bool = True

    def check(self, ok: bool, what: str) -> bool:
        (self.held if ok else self.broken).append(what)
        return ok


# -- HTTP ----------------------------------------------------------------------------------------


def http(method: str, url: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        raw = error.read()
        try:
            return error.code, json.loads(raw or b"null")
        except ValueError:
            return error.code, raw.decode(errors="replace")


def wait_for(check: Callable[[], Any], timeout: float = STEP_TIMEOUT) -> Any:
    """Poll ``check`` until it returns something truthy; ``None`` when ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    return None


class Api:
    def __init__(self, url: str) -> None:
        self.url = url

    def start(self, thread_id: str, item: str = "book") -> int:
        return http("POST", f"{self.url}/threads/{thread_id}/runs", {"input": {"item": item}})[0]

    def thread(self, thread_id: str) -> dict[str, Any]:
        status, body = http("GET", f"{self.url}/threads/{thread_id}")
        return body if status == 200 else {}

    def question(self, question_id: str) -> tuple[int, dict[str, Any]]:
        return http("GET", f"{self.url}/questions/{question_id}")

    def reply(self, question_id: str, answer: Any) -> int:
        return http("POST", f"{self.url}/questions/{question_id}/reply", {"answer": answer})[0]

    def status_in(self, thread_id: str, *statuses: str) -> dict[str, Any] | None:
        thread = self.thread(thread_id)
        return thread if thread.get("status") in statuses else None

    def parked(self, thread_id: str) -> str | None:
        """The one question ``thread_id`` is parked on, once it is."""
        thread = self.status_in(thread_id, "interrupted")
        return str(thread["pending"][0]) if thread and thread.get("pending") else None


def effects(thread_id: str) -> list[str]:
    path = Path(os.environ["STRESS_EFFECTS"]) / thread_id
    return path.read_text().splitlines() if path.exists() else []


def event_names(lines: list[str], thread_id: str) -> list[str]:
    return [line[10:25].strip() for line in list(lines) if f" thread={thread_id} " in line + " "]


def resumes(lines: list[str], thread_id: str) -> int:
    """How many times ``thread_id`` was resumed, once the poller printed the first (after the ledger)."""
    wait_for(lambda: "resumed" in event_names(lines, thread_id), timeout=10)
    return event_names(lines, thread_id).count("resumed")


# -- scenarios -------------------------------------------------------------------------------------


def concurrent_replies(api: Api, lines: list[str], *, replies: int = 50, rounds: int = 5) -> Outcome:
    """``replies`` replies race on one question, ``rounds`` times: one answer, one resume, one effect."""
    outcome = Outcome("concurrent replies", f"{replies} concurrent replies x {rounds} rounds")
    results = []
    for round_ in range(rounds):
        thread_id = f"race-{round_}-{time.time_ns()}"
        api.start(thread_id)
        question_id = wait_for(partial(api.parked, thread_id))
        if question_id is None:
            outcome.check(False, f"round {round_}: the thread never parked")
            continue
        # Half say yes, half say no: the first answer stands, the same answer again is 200, the other 409.
        answers = ["yes" if i % 2 else "no" for i in range(replies)]
        with ThreadPoolExecutor(max_workers=replies) as pool:
            codes = list(pool.map(partial(api.reply, question_id), answers))
        done = wait_for(partial(api.status_in, thread_id, "done", "failed"))
        _, question = api.question(question_id)
        winner = str(question.get("answer"))
        same = answers.count(winner)
        expected = [202] + [200] * (same - 1) + [409] * (replies - same)
        results.append(
            (
                codes.count(202) == 1,
                sorted(codes) == sorted(expected),
                bool(done) and done["status"] == "done" and question.get("status") == "resumed",
                effects(thread_id) == [winner],
                resumes(lines, thread_id) == 1,
            )
        )
    for index, what in enumerate(
        (
            "exactly one 202 per question",
            "every other reply 200 (same answer) or 409 (another)",
            "thread done, question resumed",
            "the effect ran once, with the standing answer",
            "one resume per question",
        )
    ):
        ok = sum(1 for r in results if r[index])
        outcome.check(ok == rounds, f"{what} ({ok}/{rounds})")
    return outcome


def many_threads(api: Api, lines: list[str], *, threads: int = 200) -> Outcome:
    """``threads`` threads started together, then all answered together: every one ends done, once."""
    outcome = Outcome("many threads", f"{threads} threads started, then answered, together")
    stamp = time.time_ns()
    ids = [f"many-{stamp}-{i}" for i in range(threads)]
    with ThreadPoolExecutor(max_workers=POOL) as pool:
        started = list(pool.map(api.start, ids))
    outcome.check(started.count(202) == threads, f"{started.count(202)}/{threads} starts accepted (202)")
    parked: dict[str, str] = {}

    def all_parked() -> bool:
        for thread_id in ids:
            if thread_id not in parked and (question_id := api.parked(thread_id)):
                parked[thread_id] = question_id
        return len(parked) == threads

    wait_for(all_parked, timeout=600)
    outcome.check(len(parked) == threads, f"{len(parked)}/{threads} threads parked on their question")
    with ThreadPoolExecutor(max_workers=POOL) as pool:
        replied = list(pool.map(lambda tid: api.reply(parked[tid], "yes"), list(parked)))
    outcome.check(
        replied.count(202) == len(parked), f"{replied.count(202)}/{len(parked)} answers recorded (202)"
    )
    done: set[str] = set()

    def all_done() -> bool:
        for thread_id in parked:
            if thread_id not in done and api.status_in(thread_id, "done"):
                done.add(thread_id)
        return len(done) == len(parked)

    wait_for(all_done, timeout=600)
    outcome.check(len(done) == threads, f"{len(done)}/{threads} threads done")
    once = sum(1 for thread_id in ids if effects(thread_id) == ["yes"])
    outcome.check(once == threads, f"{once}/{threads} effects ran exactly once")
    resumed = sum(1 for thread_id in ids if resumes(lines, thread_id) == 1)
    outcome.check(resumed == threads, f"{resumed}/{threads} threads resumed exactly once")
    return outcome


def killed_runner(api: Api, lines: list[str]) -> Outcome:
    """The runner process dies between the answer and the end of the resume; the retry resumes once."""
    outcome = Outcome("runner killed mid-resume", "SIGKILL of the runner process while it resumes")
    thread_id = f"kill-{time.time_ns()}"
    api.start(thread_id)
    question_id = wait_for(lambda: api.parked(thread_id))
    if not outcome.check(question_id is not None, "the thread parked"):
        return outcome
    outcome.check(api.reply(question_id, "yes") == 202, "the answer was recorded (202)")
    done = wait_for(lambda: api.status_in(thread_id, "done", "failed"))
    killed = (Path(os.environ["STRESS_EFFECTS"]) / f"{thread_id}.killed").exists()
    outcome.check(killed, "the runner process was killed during the resume")
    outcome.check(
        bool(done) and done["status"] == "done", f"the thread ended done ({(done or {}).get('status')})"
    )
    outcome.check(effects(thread_id) == ["yes"], f"the effect ran exactly once ({len(effects(thread_id))})")
    _, question = api.question(question_id)
    outcome.check(question.get("status") == "resumed", f"the question is resumed ({question.get('status')})")
    outcome.check(resumes(lines, thread_id) == 1, "one resume recorded")
    return outcome


def sink_down(api: Api, stack: LocalStack) -> Outcome:
    """The topic fails while a run parks: the thread stays answerable and the question is delivered later."""
    outcome = Outcome("sink down while parking", "SNS Publish fails while a run parks, then recovers")
    thread_id = f"sink-{time.time_ns()}"

    def publish(environ: dict[str, Any], body: bytes) -> Fault | None:
        if b"Action=Publish" in body or environ.get("HTTP_X_AMZ_TARGET", "").endswith(".Publish"):
            return Fault(500, b"<Error><Code>InternalFailure</Code></Error>", "text/xml")
        return None

    stack.moto.inject(publish)
    try:
        api.start(thread_id)
        question_id = wait_for(lambda: api.parked(thread_id), timeout=60)
        outcome.check(
            question_id is not None, "the thread is interrupted on its question while the sink is down"
        )
        if question_id is None:
            return outcome
        status, question = api.question(question_id)
        outcome.check(status == 200, f"its question resolves (GET {status}, {question.get('status')})")
    finally:
        stack.moto.inject(None)
    delivered = wait_for(lambda: api.question(question_id)[1].get("status") == "delivered")
    outcome.check(bool(delivered), "the question is delivered once the sink is back")
    outcome.check(api.reply(question_id, "yes") == 202, "the answer was recorded (202)")
    done = wait_for(lambda: api.status_in(thread_id, "done", "failed"))
    outcome.check(bool(done) and done["status"] == "done", "the thread ended done")
    outcome.check(effects(thread_id) == ["yes"], "the effect ran exactly once")
    return outcome


def enqueue_outage(api: Api, stack: LocalStack, *, threads: int = 10, outage: float = 30.0) -> Outcome:
    """Every send to the inbox fails for ``outage`` seconds, then none; nobody retries a request."""
    outcome = Outcome(
        "enqueue outage",
        f"every inbox SendMessage fails for {outage:.0f} s, then none; {threads} replies and {threads} "
        "starts accepted meanwhile, none retried",
    )
    stamp = time.time_ns()
    answered = [f"outage-reply-{stamp}-{n}" for n in range(threads)]
    started = [f"outage-start-{stamp}-{n}" for n in range(threads)]
    for thread_id in answered:
        api.start(thread_id)
    parked = {thread_id: wait_for(partial(api.parked, thread_id)) for thread_id in answered}
    if not outcome.check(all(parked.values()), "the threads to answer parked first"):
        return outcome
    inbox = stack.resources.inbox_url.rsplit("/", 1)[-1].encode()
    refused = [0]

    def send(environ: dict[str, Any], body: bytes) -> Fault | None:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        sends = target.endswith(".SendMessage") or b"Action=SendMessage" in body
        if sends and inbox in body + environ.get("PATH_INFO", "").encode():
            refused[0] += 1
            return Fault(500, b'{"__type": "com.amazonaws.sqs#InternalError", "message": "injected"}')
        return None

    stack.moto.inject(send)
    began = time.monotonic()
    try:
        with ThreadPoolExecutor(POOL) as pool:
            replies = list(pool.map(lambda t: api.reply(str(parked[t]), "yes"), answered))
            starts = list(pool.map(api.start, started))
        outcome.check(
            replies == [202] * threads,
            f"every reply was accepted (202) during the outage ({replies.count(202)})",
        )
        outcome.check(
            starts == [202] * threads,
            f"every start was accepted (202) during the outage ({starts.count(202)})",
        )
        time.sleep(max(0.0, outage - (time.monotonic() - began)))
    finally:
        stack.moto.inject(None)
    ended = time.monotonic()
    outcome.check(refused[0] > 0, f"the inbox refused sends meanwhile ({refused[0]})")
    done = wait_for(lambda: all(api.status_in(t, "done", "failed") for t in answered))
    last_reply = time.monotonic() - ended
    outcome.check(
        bool(done) and all(api.thread(t).get("status") == "done" for t in answered),
        f"every accepted reply's thread ended done, the last {last_reply:.1f} s after the outage",
    )
    resumed = wait_for(lambda: all(api.parked(t) for t in started))
    last_start = time.monotonic() - ended
    outcome.check(
        bool(resumed), f"every accepted start ran (parked), the last {last_start:.1f} s after the outage"
    )
    if resumed:
        for thread_id in started:
            api.reply(str(api.parked(thread_id)), "yes")
        finished = wait_for(lambda: all(api.status_in(t, "done", "failed") for t in started))
        outcome.check(
            bool(finished) and all(api.thread(t).get("status") == "done" for t in started),
            "every started thread then ended done",
        )
    ran = [effects(t) for t in answered + started]
    outcome.check(all(r == ["yes"] for r in ran), "each effect ran exactly once")
    dlq = stack.client("sqs").get_queue_attributes(
        QueueUrl=stack.resources.stream_dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]["ApproximateNumberOfMessages"]
    outcome.check(dlq == "0", f"no stream record went to the DLQ ({dlq})")
    return outcome


def fault_until_dlq(api: Api, stack: LocalStack, lines: list[str]) -> Outcome:
    """Every attempt of a resume meets a DynamoDB 500 on the checkpoint table, until the DLQ."""
    outcome = Outcome(
        "infrastructure fault until the DLQ", "DynamoDB fails (500) every checkpoint write of a resume"
    )
    thread_id = f"fault-{time.time_ns()}"
    api.start(thread_id)
    question_id = wait_for(lambda: api.parked(thread_id))
    if not outcome.check(question_id is not None, "the thread parked"):
        return outcome
    table = stack.resources.checkpoint_table.encode()
    # A 5xx from DynamoDB: botocore retries it a few times, then the run fails as infrastructure.
    # (A throttle would do the same, but the saver's adaptive retry mode slows it to a minute a run.)
    throttle = Fault(
        500, b'{"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": "injected"}'
    )

    def checkpoint_write(environ: dict[str, Any], body: bytes) -> Fault | None:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        writes = target.endswith(("PutItem", "BatchWriteItem"))
        return throttle if writes and table in body and thread_id.encode() in body else None

    stack.moto.inject(checkpoint_write)
    try:
        outcome.check(api.reply(question_id, "yes") == 202, "the answer was recorded (202)")
        dead = wait_for(lambda: "dead-lettered" in event_names(lines, thread_id), timeout=300)
        outcome.check(bool(dead), "the resume was retried, then dead-lettered")
        retries = event_names(lines, thread_id).count("retrying")
        outcome.check(retries == 4, f"4 retries before the DLQ ({retries})")
        dlq = wait_for(
            lambda: (
                stack.client("sqs").get_queue_attributes(
                    QueueUrl=stack.resources.inbox_dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
                )["Attributes"]["ApproximateNumberOfMessages"]
                != "0"
            ),
            timeout=30,
        )
        outcome.check(bool(dlq), "the message is in the inbox DLQ")
    finally:
        stack.moto.inject(None)
    thread = api.thread(thread_id)
    outcome.check(
        thread.get("status") == "failed" and bool(thread.get("error")),
        f"the thread is failed with its error ({thread.get('status')})",
    )
    _, question = api.question(question_id)
    outcome.check(
        question.get("status") == "resume_failed", f"the question is resume_failed ({question.get('status')})"
    )
    again = f"{thread_id}-again"
    outcome.check(api.start(again) == 202, "a new run is accepted at once")
    return outcome


def schemathesis_run(stack: LocalStack, api: Api, *, examples_per_operation: int = 450) -> list[Outcome]:
    """Property-based requests generated from ``GET /openapi.json``: no 5xx, and what conforms.

    The runner is paused meanwhile: this checks the api, and the runs it starts with generated
    input would only compete for the two cores.
    """
    if stack.poller is not None:
        stack.poller.stop()
    try:
        return _schemathesis_run(api, examples_per_operation)
    finally:
        if stack.poller is not None:
            stack.poller.start()


def _schemathesis_run(api: Api, examples_per_operation: int) -> list[Outcome]:
    import hypothesis
    import schemathesis
    from hypothesis import HealthCheck, Phase
    from schemathesis.checks import not_a_server_error

    schema = schemathesis.openapi.from_url(f"{api.url}/openapi.json")
    counts: Counter[str] = Counter()
    server_errors: list[str] = []
    nonconforming: Counter[str] = Counter()

    def runner_for(operation: Any) -> Callable[[], None]:
        label = str(operation.label)

        @hypothesis.settings(
            max_examples=examples_per_operation,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @hypothesis.given(case=operation.as_strategy())
        def call(case: Any) -> None:
            response = case.call(base_url=api.url, timeout=30)
            counts[label] += 1
            # Failures come as exception groups: catch them to count them, and go on generating.
            try:
                case.validate_response(response, checks=[not_a_server_error])
            except (Exception, BaseExceptionGroup) as exc:
                server_errors.append(f"{label} -> {response.status_code}: {str(exc).splitlines()[0][:120]}")
            try:
                case.validate_response(response)
            except (Exception, BaseExceptionGroup) as exc:
                for failure in getattr(exc, "exceptions", None) or [exc]:
                    title = getattr(failure, "title", None) or type(failure).__name__
                    nonconforming[f"{title} ({label} -> {response.status_code})"] += 1

        return call

    for result in schema.get_all_operations():
        runner_for(result.ok())()  # type: ignore[union-attr]

    total = sum(counts.values())
    crash = Outcome("schemathesis", f"{total} generated requests over {len(counts)} operations")
    crash.check(total >= 2000, f"at least 2,000 requests ({total})")
    crash.check(
        not server_errors,
        f"no 5xx ({len(server_errors)})" + (f": {server_errors[0]}" if server_errors else ""),
    )
    conformance = Outcome("schemathesis conformance", "responses against the OpenAPI document", gate=False)
    conformance.check(not nonconforming, f"every response as documented ({sum(nonconforming.values())} not)")
    for what, count in nonconforming.most_common(6):
        conformance.broken.append(f"{count} x {what}")
    return [crash, conformance]


# -- the runner in a process of its own ------------------------------------------------------------

_CHILD = """
import json, sys
from agent_wait_cli.local.runtime import LambdaContext, load_handler
handler = load_handler(__import__('pathlib').Path(sys.argv[1]), 'stress_runner_child')
event = json.load(sys.stdin)
print('RESULT=' + json.dumps(handler(event, LambdaContext('agent-wait-runner', timeout_seconds=120))))
"""


def process_runner(project: Path) -> Callable[[dict[str, Any], Any], Any]:
    """A runner handler that runs threads named ``kill-*`` in a fresh process, others in this one.

    A killed process fails its invocation, as a crashed Lambda does: the message stays in the
    inbox and comes back after the visibility timeout.
    """
    loaded: list[Callable[[dict[str, Any], Any], Any]] = []

    def handle(event: dict[str, Any], context: Any) -> Any:
        if not any(json.loads(r["body"]).get("thread_id", "").startswith("kill-") for r in event["Records"]):
            if not loaded:  # loaded once the stack has set the Lambda environment
                loaded.append(
                    load_handler(project / "functions" / "runner" / "handler.py", "stress_runner_local")
                )
            return loaded[0](event, context)
        env = os.environ | {"PYTHONPATH": os.pathsep.join([str(project / "functions"), str(project)])}
        child = subprocess.run(
            [sys.executable, "-c", _CHILD, str(project / "functions" / "runner" / "handler.py")],
            input=json.dumps(event),
            env=env,
            cwd=project,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if child.returncode != 0:
            raise RuntimeError(f"the runner process ended with {child.returncode}")
        [line] = [ln for ln in child.stdout.splitlines() if ln.startswith("RESULT=")]
        return json.loads(line.removeprefix("RESULT="))

    return handle
