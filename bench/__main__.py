"""Cold-start cost (import and init-phase build) of the api handler against the runner handler.

The design keeps LangGraph out of the api Lambda so that a human's reply is answered by a small
cold start. This measures both handlers' imports in fresh interpreters, interleaved in one run
(so machine noise hits both alike), and prints the ratio: the api should stay several times
cheaper than the runner.

    make bench            # or: python -m bench [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORT = (
    "import importlib.util, sys; sys.path.insert(0, {folder!r});"
    "spec = importlib.util.spec_from_file_location('handler', {path!r});"
    "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)"
)
ENV = {
    "AGENT_WAIT_LEDGER_TABLE": "bench-ledger",
    "AGENT_WAIT_INBOX_URL": "http://127.0.0.1:9/123456789012/bench-inbox.fifo",
    "AGENT_WAIT_OUTBOX_URL": "http://127.0.0.1:9/123456789012/bench-outbox.fifo",
    "AGENT_WAIT_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:bench",
    "AGENT_WAIT_CHECKPOINT_TABLE": "bench-checkpoints",
    "AGENT_WAIT_GRAPH": "examples.refund_agent:build_graph",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "POWERTOOLS_TRACE_DISABLED": "1",
    "POWERTOOLS_METRICS_NAMESPACE": "AgentWaitBench",
}


def time_import(function: str) -> float:
    folder = ROOT / "functions" / function
    code = IMPORT.format(folder=str(folder), path=str(folder / "handler.py"))
    env = os.environ | ENV | {"PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "functions")])}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    baseline, api, runner = [], [], []
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        baseline.append(time.perf_counter() - started)
        api.append(time_import("api"))
        runner.append(time_import("runner"))
    empty = statistics.median(baseline)
    api_cost = max(statistics.median(api) - empty, 1e-6)
    runner_cost = max(statistics.median(runner) - empty, 1e-6)
    print(f"cold start (import + init), median of {rounds} interleaved rounds, interpreter start subtracted:")
    print(f"  runner handler / api handler = {runner_cost / api_cost:.1f}x")
    print(f"  api handler / bare interpreter start = {api_cost / empty:.1f}x")


if __name__ == "__main__":
    main()
