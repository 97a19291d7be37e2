"""``make bench``: speed and size of the deployment, each figure against a baseline measured in the same run.

1. Assembles each function as Lambda mounts it (function code + merged layers, read-only), once with
   layers built for this interpreter (to import and time here) and once as deployed (for the sizes
   and the bytecode check).
2. Cold start: import + init of each handler in that layout (``-I -S -B``), paired with a bare
   baseline in the same layout; per-pair ratios.
3. AWS calls per start and resume message, counted with a botocore hook, against the sample graph's
   own checkpoint calls.
4. Fan-out latency with 50 ms injected per call, against the slowest single sink.
5. Reply throughput in-process with AWS answered by a stub (at the HTTP layer, boto3 included; and
   with boto3 itself replaced, to show our code's own cost), against a bare resolver making the
   same calls.
6. Reply 202 → thread done on the local stack, 30 threads.

Prints every figure with the min/median/max of its per-pair ratios and writes ``bench/results.md``.
A figure passes on its median ratio (or its count); no absolute time is a gate. The exit status is 0
whatever the figures say: this measures, the tests assert.

    make bench                 # or: python -m bench [--rounds N] [--skip-local]
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
from bench.layout import assemble, function_sources, make_writable
from infra.constants import PYTHON_VERSION, REPO_ROOT

RESULTS = REPO_ROOT / "bench" / "results.md"


def _print(figure: f.Figure) -> None:
    ratio = "" if figure.ratio is None else f"  ratio {figure.ratio:.2f}"
    verdict = "—" if figure.passed is None else ("pass" if figure.passed else "FAIL")
    print(f"{figure.name}")
    print(f"    ours: {figure.ours}")
    if figure.baseline != "—":
        print(f"    baseline: {figure.baseline}")
    print(f"    goal {figure.goal}{ratio}  → {verdict}")
    if figure.spread:
        print(f"    {figure.spread}")
    for note in figure.notes:
        print(f"    note: {note}")
    sys.stdout.flush()


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
    parser.add_argument("--results", type=Path, default=RESULTS, help="where to write the table")
    args = parser.parse_args(argv)
    started = time.perf_counter()
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
        print(f"==> cold starts ({args.rounds} pairs each)")
        add(f.cold_runner(host["runner"], args.rounds), f.cold_api(host["api"], args.rounds))
        add(f.xray_first_call(host["api"], args.rounds))
    finally:
        make_writable(workdir)
        shutil.rmtree(workdir, ignore_errors=True)
    print("==> AWS calls per message")
    add(*f.aws_calls())
    print("==> fan-out and reply throughput")
    add(f.fanout(args.rounds), *f.reply_throughput(args.rounds))
    if not args.skip_local:
        print("==> local stack round trip")
        add(*f.local_round_trip())

    elapsed = time.perf_counter() - started
    header = (
        f"Written by `make bench` ({elapsed:.0f} s; {platform.machine()}, Python "
        f"{platform.python_version()} here, the deployment runs Python {PYTHON_VERSION} on arm64). "
        "Timed figures are paired runs; a ratio is the median of the per-pair ratios."
    )
    f.write_results(results, args.results, header)
    failed = [r.name for r in results if r.passed is False]
    met = len(results) - len(failed)
    print(f"==> {met}/{len(results)} figures meet their goal; {args.results} ({elapsed:.0f} s)")
    for name in failed:
        print(f"    not met: {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
