"""``make bench``: speed and size of the deployment, each figure against a baseline measured in the same run.

1. Assembles each function as Lambda mounts it (function code + merged layers, read-only), once with
   layers built for this interpreter (to import and time here) and once as deployed (for the sizes
   and the bytecode check).
2. Cold start: import + init of each handler in that layout (``-I -S -B``), paired with a baseline
   in the same layout: for the runner a fair floor (plain LangGraph's own init: the same packages, a
   boto3 session with the same clients, the saver built, the same graph compiled), for the api a
   bare Powertools resolver. With ``valgrind`` on PATH, instruction ratios beside the CPU-time ones.
3. A park and a resume against plain LangGraph (same graph, checkpointer and durability, interrupt
   and ``Command(resume)`` by hand): AWS calls filed under what they are for, round trips in a row
   (latency injected per call), and client CPU with AWS in another process (``bench.park``).
4. Fan-out latency over sinks of different latencies, against the slowest sink alone.
5. Reply throughput through the api Lambda's real handler (its wrappers, metrics flush and tracing
   as deployed) against a bare resolver behind the same wrappers, and the per-call cost of tracing
   (``bench.reply_worker``); our code's own cost over the framework alone.
6. ``GET /questions?status=pending``'s first page: Queries and read units against the old design
   (one Query per open status in a row, projection ``ALL``) on the same items, and its time with
   100,000 questions in the ledger against 1,000 (``bench.pending_page``: moto's time, beside the
   read units DynamoDB bills).
7. Reply sent → thread done on the local stack, 200 threads, reported (not gated).

Prints every figure with the min/median/max of its per-pair ratios and writes ``bench/results.md``.
A figure passes on its median ratio (or its count); no absolute time is a gate. The exit status is 0
whatever the figures say: this measures, the tests assert.

    make bench                 # or: python -m bench [--rounds N] [--round-trips N] [--skip-local]
"""

from __future__ import annotations

import argparse
import os

# Before anything creates Powertools' Logger and Metrics: quiet logs, and a namespace for the metrics
# the services add (the handler's decorator flushes them in Lambda; the benchmark clears them).
os.environ.setdefault("LOG_LEVEL", "WARNING")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "AgentWaitBench")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "agent-wait-bench")

import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench import figures as f
from bench import park, pending_page
from bench.layout import assemble, function_sources, make_writable
from infra.constants import PYTHON_VERSION, REPO_ROOT

RESULTS = REPO_ROOT / "bench" / "results.md"

HOW_TO_READ = """## How to read these figures

- Every timed figure runs ours and its baseline back to back, in pairs, alternating which goes first;
  the ratio is the median of the per-pair ratios (min · median · max in the notes below the table).
  A figure passes or fails on that ratio (or on a count), never on an absolute time: times depend
  on the machine and its load, ratios much less.
- CPU time, not wall time, for cold starts and throughput: a shared machine's other processes do not
  count. Where valgrind is installed, the instructions column counts the work itself (interpreter
  start-up taken off), which hardly moves with load; trust it where the CPU-time spread is wide.
- Baselines are what a plain deployment would run: plain LangGraph's runner init (the fair floor),
  a bare Powertools resolver behind the same Lambda wrappers, plain LangGraph with the same
  checkpointer and durability driven by hand (interrupt, then `Command(resume)`).
- Round trips in a row count the AWS calls a park or a resume waits for one after another (calls made
  at once count once); in Lambda each is a network round trip, so this count, not the local time,
  is what the latency of a park scales with.
- The local round trip is this machine's time through moto: reported, not gated.
- A goal marked **no** is not met: the figure says so rather than moving the goal."""


def _print(figure: f.Figure) -> None:
    ratio = "" if figure.ratio is None else f"  ratio {figure.ratio_text()}"
    verdict = "—" if figure.passed is None else ("pass" if figure.passed else "FAIL")
    print(f"{figure.name}")
    print(f"    ours: {figure.ours}")
    if figure.baseline != "—":
        print(f"    baseline: {figure.baseline}")
    print(f"    goal {figure.goal}{ratio}  → {verdict}")
    if figure.instructions:
        print(f"    instructions (valgrind): {figure.instructions}")
    if figure.spread:
        print(f"    {figure.spread}")
    for note in figure.notes:
        print(f"    note: {note}")
    sys.stdout.flush()


def _load(load: tuple[float, float, float]) -> str:
    return " / ".join(f"{x:.1f}" for x in load)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of pairs, 1 or more")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=_positive, default=16, help="pairs per timed figure (default 16)")
    parser.add_argument("--skip-local", action="store_true", help="skip the local stack round trip")
    parser.add_argument(
        "--round-trips", type=_positive, default=200, help="local stack round trips (default 200)"
    )
    parser.add_argument(
        "--skip-valgrind", action="store_true", help="no instruction counts even with valgrind"
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="where to write the table")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    load_at_start = os.getloadavg()
    results: list[f.Figure] = []

    def add(*new: f.Figure) -> None:
        for figure in new:
            _print(figure)
            results.append(figure)

    sources = function_sources()
    workdir = Path(tempfile.mkdtemp(prefix="agent-wait-bench-"))
    try:
        print(f"==> assembling the shipped layouts in {workdir}")
        extra = {"bench_baseline": "bench/baseline"}
        host = {
            name: assemble(name, "host", sources[name], workdir, extra=extra) for name in ("api", "runner")
        }
        shipped = {name: assemble(name, "lambda", sources[name], workdir) for name in ("api", "runner")}
        add(f.bytecode(shipped), *f.sizes(shipped))
        valgrind = shutil.which("valgrind") is not None and not args.skip_valgrind
        print(f"==> cold starts ({args.rounds} pairs each{', and valgrind' if valgrind else ''})")
        add(
            f.cold_runner(host["runner"], args.rounds, valgrind=valgrind),
            f.cold_api(host["api"], args.rounds, valgrind=valgrind),
        )
        add(f.xray_first_call(host["api"], args.rounds))
    finally:
        make_writable(workdir)
        shutil.rmtree(workdir, ignore_errors=True)
    print("==> a park and a resume against plain LangGraph")
    add(*park.call_figures(f.RUNNER_ENV, max(3, args.rounds // 4)))
    add(park.cpu_figure(f.RUNNER_ENV, args.rounds))
    print("==> fan-out and reply throughput")
    add(f.fanout(args.rounds))
    add(*f.handler_throughput(args.rounds), f.framework_throughput(args.rounds))
    if not args.skip_local:
        # Before the pending page's 100,000 questions: a wall-time figure must not wait on the
        # collections of what an earlier figure left in this process.
        print(f"==> local stack round trip ({args.round_trips} threads)")
        add(*f.local_round_trip(args.round_trips))
    print("==> pending questions' first page, 100,000 questions against 1,000")
    add(*pending_page.figures(pending_page.measure(rounds=max(3, args.rounds // 2)), shards=1))

    elapsed = time.perf_counter() - started
    load = os.getloadavg()
    header = (
        f"Written by `python -m bench --rounds {args.rounds} --round-trips {args.round_trips}` "
        f"({elapsed:.0f} s; {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average (1 / 5 / 15 min) {_load(load_at_start)} at the start, "
        f"{_load(load)} at the end; Python {platform.python_version()} here, the deployment runs Python "
        f"{PYTHON_VERSION} on arm64). Timed figures are paired runs; a ratio is the median of the "
        "per-pair ratios."
        + (
            ""
            if valgrind
            else " valgrind is not on PATH: no instruction counts (install it for that column)."
        )
    )
    f.write_results(results, args.results, header, preface=HOW_TO_READ)
    failed = [r.name for r in results if r.passed is False]
    met = len(results) - len(failed)
    print(f"==> {met}/{len(results)} figures meet their goal; {args.results} ({elapsed:.0f} s)")
    for name in failed:
        print(f"    not met: {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
