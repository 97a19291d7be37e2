"""A park and a resume, ours against plain LangGraph: AWS calls, round trips in a row, client CPU.

Ours is the runner handling a start message (the graph runs up to its interrupt, the question is
recorded and announced) and then a resume message. Plain LangGraph is the same graph over the same
checkpointer (same table, same client settings) at the same durability, driven by hand: ``invoke``
up to the interrupt, then ``invoke(Command(resume=...))``, with no agent-wait at all. What the api
does before each message (queueing the run, recording the answer) is not counted: it is the api's
request, not the park's or the resume's.

- AWS calls: counted and filed under what they are for (:func:`bench.calls.classify`) on moto in
  process.
- Round trips in a row: every call first waits :data:`LATENCY` as a round trip to AWS would, so
  calls made at once overlap and calls made in turn do not; :func:`bench.calls.in_a_row` counts the
  longest chain.
- Client CPU: the process's CPU time (the fan-out's threads included) with AWS played by a moto
  server in another process, so moto's own work is not counted on either side.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bench.calls import KINDS, CallTimeline, Targets, TimedCall, by_kind, by_name, in_a_row

if TYPE_CHECKING:
    from collections.abc import Iterator

    from bench.figures import Figure

# A round trip to DynamoDB, SNS or SQS from a Lambda in the same region is a few milliseconds; 50 ms
# keeps calls made at once overlapping despite a loaded machine's scheduling jitter.
LATENCY = 0.05
REFUND_INPUT: Any = {"customer": "c-17", "amount": 40}
APPROVE: Any = {"action": "approve"}


class Scenario:
    """The runner and a plain LangGraph peer over one boto3 session's clients and the same tables."""

    def __init__(self, session: Any, runner_env: dict[str, str]) -> None:
        from wait_service.resources import create_resources
        from wait_service.runs.checkpointer import make_checkpointer, runner_clients
        from wait_service.runs.graph import load_graph
        from wait_service.runs.runner import build_runner
        from wait_service.settings import Settings

        resources = create_resources(
            session.client("dynamodb"), session.client("sqs"), session.client("sns"), prefix="bench-"
        )
        env = runner_env | resources.env()
        # As deployed: the policy store's overrides are read once per function and cached (the
        # local stack's environment reads them on every question, for its tests).
        env.pop("AGENT_WAIT_POLICY_CACHE_SECONDS", None)
        settings = Settings.from_env(env)
        self.settings = settings
        self.targets = Targets(
            ledger_table=settings.require("ledger_table"),
            checkpoint_tables=tuple(
                t for t in (settings.checkpoint_table, settings.checkpoint_writes_table) if t
            ),
            checkpoint_bucket=settings.checkpoint_bucket,
            inbox_url=settings.inbox_url,
            outbox_url=settings.outbox_url,
            topic_arn=settings.topic_arn,
        )
        self.runner = build_runner(settings, **runner_clients(settings, session=session).as_kwargs())
        self.graph: Any = load_graph(settings.graph, make_checkpointer(settings, session=session))
        self._count = 0

    def new_thread(self) -> str:
        self._count += 1
        return f"t-{self._count}"

    # -- ours ---------------------------------------------------------------------------------

    def before_park(self, thread_id: str) -> None:
        """What the api does before it sends the start message (not the park's calls)."""
        self.runner.ledger.queue_thread(thread_id, f"r-{thread_id}")

    def park(self, thread_id: str) -> str:
        from wait_service.runs.inbox import StartMessage

        outcome = self.runner.run(
            StartMessage(thread_id=thread_id, input=REFUND_INPUT, run_id=f"r-{thread_id}")
        )
        return str(outcome.pending[0])

    def before_resume(self, question_id: str) -> None:
        """What the api does when the reply arrives (not the resume's calls)."""
        self.runner.ledger.record_answer(question_id, APPROVE, answered_by="bench")

    def resume(self, thread_id: str, question_id: str) -> None:
        from wait_service.runs.inbox import ResumeMessage

        self.runner.run(ResumeMessage(thread_id=thread_id, question_id=question_id, answer=APPROVE))

    # -- plain LangGraph ----------------------------------------------------------------------

    def plain_park(self, thread_id: str, durability: str | None = None) -> str:
        config = {"configurable": {"thread_id": f"plain-{thread_id}"}}
        result = self.graph.invoke(REFUND_INPUT, config, durability=durability or self.settings.durability)
        return str(result["__interrupt__"][0].id)

    def plain_resume(self, thread_id: str, interrupt_id: str, durability: str | None = None) -> None:
        from langgraph.types import Command

        config = {"configurable": {"thread_id": f"plain-{thread_id}"}}
        self.graph.invoke(
            Command(resume={interrupt_id: APPROVE}), config, durability=durability or self.settings.durability
        )


@dataclass
class Trace:
    """The calls of one park and one resume."""

    park: list[TimedCall]
    resume: list[TimedCall]


def _moto_session() -> Any:
    import boto3

    return boto3.Session(aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1")


def traces(runner_env: dict[str, str], pairs: int) -> tuple[list[Trace], list[Trace], dict[str, int]]:
    """``pairs`` parks and resumes of ours and of plain LangGraph (alternating), with their calls.

    Also returns plain LangGraph's call count at LangGraph's default durability (``async``), for
    reference.
    """
    from moto import mock_aws

    ours: list[Trace] = []
    plain: list[Trace] = []
    with mock_aws():
        session = _moto_session()
        timeline = CallTimeline(Targets(ledger_table=""))
        timeline.attach(session)
        scenario = Scenario(session, runner_env)
        timeline.targets = scenario.targets
        timeline.latency = LATENCY

        def run_ours() -> Trace:
            thread_id = scenario.new_thread()
            scenario.before_park(thread_id)
            timeline.clear()
            question_id = scenario.park(thread_id)
            park = timeline.clear()
            scenario.before_resume(question_id)
            timeline.clear()
            scenario.resume(thread_id, question_id)
            return Trace(park, timeline.clear())

        def run_plain(durability: str | None = None) -> Trace:
            thread_id = scenario.new_thread()
            timeline.clear()
            interrupt_id = scenario.plain_park(thread_id, durability)
            park = timeline.clear()
            scenario.plain_resume(thread_id, interrupt_id, durability)
            return Trace(park, timeline.clear())

        run_ours(), run_plain()  # warm: the policy cache and first-call work on both sides
        for i in range(pairs):
            if i % 2 == 0:
                ours.append(run_ours())
                plain.append(run_plain())
            else:
                plain.append(run_plain())
                ours.append(run_ours())
        timeline.latency = 0.0
        default = run_plain("async")
    return ours, plain, {"park": len(default.park), "resume": len(default.resume)}


def _kinds(calls: list[TimedCall]) -> str:
    counted = by_kind(calls)
    return " + ".join(f"{kind} {counted[kind]}" for kind in KINDS if counted[kind])


def _names(calls: list[TimedCall]) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(by_name(calls).items()))


# Round trips in a row, from the goals table: park / resume (it counted plain LangGraph at 5 / 6 by
# hand; the baseline column shows what this run measures for it).
ROUND_TRIP_GOALS = {"park": 6, "resume": 7}
# AWS calls against plain LangGraph: the goals table sets no number; this one allows at most one
# call of ours for each of plain LangGraph's (a ledger and its announcements cost calls).
CALLS_GOAL = 2.0
# Client CPU per park + resume against plain LangGraph's, from the goals table.
CPU_GOAL = 1.3


def call_figures(runner_env: dict[str, str], pairs: int) -> list[Figure]:
    from bench.figures import Figure, Pairs

    ours, plain, default = traces(runner_env, pairs)
    durability = runner_env.get("AGENT_WAIT_DURABILITY", "exit")
    figures = []
    for step, message in (("park", "start"), ("resume", "resume")):
        ours_calls = [getattr(t, step) for t in ours]
        plain_calls = [getattr(t, step) for t in plain]
        counts = Pairs([float(len(c)) for c in ours_calls], [float(len(c)) for c in plain_calls])
        ratios = counts.ratios()
        median = sorted(ratios)[len(ratios) // 2]
        figures.append(
            Figure(
                name=(
                    f"AWS calls per {message} message (durability={durability}), "
                    "each filed under what it is for"
                ),
                ours=f"{len(ours_calls[0])}: {_kinds(ours_calls[0])} ({_names(ours_calls[0])})",
                baseline=(
                    "plain LangGraph, same graph and checkpointer, "
                    f"{'interrupt' if step == 'park' else 'Command(resume)'} by hand: "
                    f"{len(plain_calls[0])}: {_kinds(plain_calls[0])}"
                ),
                ratio=median,
                goal=f"≤ {CALLS_GOAL} (set by the bench; the goals table names no number)",
                passed=median <= CALLS_GOAL,
                spread=counts.spread(),
                notes=[f"plain LangGraph at its default durability (async): {default[step]} calls"],
            )
        )
        chain = Pairs([float(in_a_row(c)) for c in ours_calls], [float(in_a_row(c)) for c in plain_calls])
        ours_row = sorted(chain.ours)[len(chain.ours) // 2]
        plain_row = sorted(chain.baseline)[len(chain.baseline) // 2]
        goal = ROUND_TRIP_GOALS[step]
        figures.append(
            Figure(
                name=(
                    f"round trips in a row per {step} (durability={durability}), "
                    f"{LATENCY * 1000:.0f} ms injected per call"
                ),
                ours=f"{ours_row:.0f} of {len(ours_calls[0])} calls",
                baseline=(
                    "plain LangGraph, same graph and checkpointer: "
                    f"{plain_row:.0f} of {len(plain_calls[0])} calls"
                ),
                ratio=sorted(chain.ratios())[len(chain.ours) // 2],
                goal=f"≤ {goal} (the goals table's, which counted plain LangGraph at {goal - 1})",
                passed=ours_row <= goal,
                spread=chain.spread(),
                notes=[
                    "the longest chain of calls each starting after the previous one ended "
                    f"(calls made at once count once); ours in order: {_sequence(ours_calls[0])}"
                ],
            )
        )
    return figures


def _sequence(calls: list[TimedCall]) -> str:
    """The calls in start order, those made at once bracketed together."""
    ordered = sorted(calls, key=lambda c: c.start)
    groups: list[list[TimedCall]] = []
    for call in ordered:
        if groups and any(other.end > call.start for other in groups[-1]):
            groups[-1].append(call)
        else:
            groups.append([call])

    def label(call: TimedCall) -> str:
        return f"{call.kind}:{call.name.split('.', 1)[1]}"

    return " → ".join(
        label(g[0]) if len(g) == 1 else "[" + " ‖ ".join(label(c) for c in g) + "]" for g in groups
    )


# -- client CPU ---------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def moto_process() -> Iterator[str]:
    """A moto server in its own process on 127.0.0.1; yields its endpoint URL."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the moto server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(server)


def stop(process: subprocess.Popen[Any], grace: float = 10.0) -> None:
    """End ``process``: SIGTERM, then SIGKILL if it is still there after ``grace`` seconds.

    Werkzeug's server (moto's) can sit in a request thread past SIGTERM; a bench run must not
    hang on it, nor leave it behind.
    """
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)


def cpu_figure(runner_env: dict[str, str], rounds: int) -> Figure:
    """Client CPU per park + resume, ours against plain LangGraph at the same durability."""
    from bench.figures import Pairs, _ratio_figure, run_pairs

    # The AWS calls each side makes while its clock runs (the api's calls before each message not).
    counting: list[str] = []
    made: Counter[str] = Counter()
    runs: Counter[str] = Counter()

    def count(**_: Any) -> None:
        if counting:
            made[counting[-1]] += 1

    with moto_process() as endpoint:
        previous = os.environ.get("AWS_ENDPOINT_URL")
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        try:
            session = _moto_session()
            session.events.register("before-call", count)
            scenario = Scenario(session, runner_env)

            def ours() -> float:
                thread_id = scenario.new_thread()
                scenario.before_park(thread_id)
                counting.append("ours")
                started = time.process_time()
                question_id = scenario.park(thread_id)
                spent = time.process_time() - started
                counting.pop()
                scenario.before_resume(question_id)
                counting.append("ours")
                started = time.process_time()
                scenario.resume(thread_id, question_id)
                spent += time.process_time() - started
                counting.pop()
                runs["ours"] += 1
                return spent

            def plain() -> float:
                thread_id = scenario.new_thread()
                counting.append("plain")
                started = time.process_time()
                scenario.plain_resume(thread_id, scenario.plain_park(thread_id))
                spent = time.process_time() - started
                counting.pop()
                runs["plain"] += 1
                return spent

            ours(), plain()  # warm: first-call imports and connection pools on both sides
            pairs: Pairs = run_pairs(ours, plain, rounds)
        finally:
            if previous is None:
                os.environ.pop("AWS_ENDPOINT_URL", None)
            else:
                os.environ["AWS_ENDPOINT_URL"] = previous
    durability = runner_env.get("AGENT_WAIT_DURABILITY", "exit")
    figure = _ratio_figure(
        f"client CPU per park + resume (durability={durability}), AWS in another process (moto server)",
        pairs,
        "plain LangGraph, same graph, checkpointer and durability, interrupt + Command(resume) by hand",
        goal=CPU_GOAL,
    )
    figure.notes.append(
        "the process's CPU time, the fan-out's threads included; the api's calls before each message "
        "(queueing the run, recording the answer) are not counted"
    )
    ours_calls, plain_calls = made["ours"] / max(1, runs["ours"]), made["plain"] / max(1, runs["plain"])
    figure.notes.append(
        f"AWS calls per park + resume: ours {ours_calls:.1f}, plain LangGraph {plain_calls:.1f} "
        f"({ours_calls / max(plain_calls, 1e-9):.2f}×); each call costs the client about the same "
        "CPU on both sides (botocore's serialization, signing, HTTP and parsing), so the CPU ratio "
        "follows the ratio of calls: the checkpoint calls are the same library's on both sides; "
        "ours adds the question's record and its two announcements (topic and outbox), the "
        "thread's claim and marks"
    )
    figure.notes.append(calls_within_goal(plain_calls, ours_calls, goal=CPU_GOAL))
    return figure


def calls_within_goal(plain_calls: float, ours_calls: float, *, goal: float) -> str:
    """What the goal leaves room for, at the same CPU per call: the calls ours may add to plain
    LangGraph's, against those it adds.

    Examples
    --------
    >>> calls_within_goal(11.0, 14.0, goal=1.3).split("; ")[1]
    'ours makes 3.0 more'
    """
    room = (goal - 1) * plain_calls
    text = (
        f"at the same CPU per call, a ratio of {goal:g} leaves room for {room:.1f} calls more than plain "
        f"LangGraph makes; ours makes {ours_calls - plain_calls:.1f} more"
    )
    if ours_calls - plain_calls > room:
        text += (
            " (the thread's claims, the question's record, its announcements and the park's and the "
            "resume's ledger writes): with the same checkpointer on both sides the goal needs a "
            "checkpointer making fewer calls than plain LangGraph's"
        )
    return text
