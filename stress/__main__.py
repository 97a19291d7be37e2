"""``python -m stress`` (``make stress``): run every scenario on one local stack and print the table."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from stress import scenarios
from stress.scenarios import ROOT, Api, Outcome

if TYPE_CHECKING:
    from collections.abc import Callable


def say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def table(outcomes: list[Outcome]) -> str:
    """One row per check: scenario, what was tried, the check, held or NOT HELD, seconds."""
    rows = [("scenario", "tried", "check", "result", "s")]
    for outcome in outcomes:
        missed = "NOT HELD" if outcome.gate else "finding"
        checks = [(what, "held") for what in outcome.held] + [(what, missed) for what in outcome.broken]
        for index, (what, result) in enumerate(checks):
            first = index == 0
            rows.append(
                (
                    outcome.scenario if first else "",
                    outcome.tried if first else "",
                    what,
                    result,
                    f"{outcome.seconds:.0f}" if first else "",
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stress", description=__doc__)
    parser.add_argument("--replies", type=int, default=50, help="concurrent replies per round (50)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of concurrent replies (5)")
    parser.add_argument(
        "--threads", type=int, default=200, help="threads started and answered together (200)"
    )
    parser.add_argument("--examples", type=int, default=450, help="schemathesis examples per operation (450)")
    args = parser.parse_args(argv)

    from agent_wait_cli.local.stack import LocalStack, StackConfig

    warnings.filterwarnings("ignore")
    work = Path(tempfile.mkdtemp(prefix="agent-wait-stress-"))
    os.environ["STRESS_EFFECTS"] = str(work)
    # botocore's legacy retries back a DynamoDB throttle off for up to ~25 s per call; the standard
    # mode's 3 attempts keep a run of faulted attempts to seconds (the queue retries the run).
    os.environ["AWS_RETRY_MODE"] = "standard"
    lines: list[str] = []
    config = StackConfig(
        project=ROOT,
        graph="stress.graphs:build_graph",
        port=0,
        inbox_visibility=1,
        log_path=work / "local.log",
    )
    say(f"stress: local stack logs in {config.log_path}")
    outcomes: list[Outcome] = []
    with LocalStack(config, write=lines.append, runner_handler=scenarios.process_runner(ROOT)) as stack:
        api = Api(stack.api_url)
        runs: list[tuple[str, Callable[[], Outcome | list[Outcome]]]] = [  # in this order
            (
                "concurrent replies",
                lambda: scenarios.concurrent_replies(api, lines, replies=args.replies, rounds=args.rounds),
            ),
            ("many threads", lambda: scenarios.many_threads(api, lines, threads=args.threads)),
            ("runner killed", lambda: scenarios.killed_runner(api, lines)),
            ("sink down", lambda: scenarios.sink_down(api, stack)),
            ("enqueue outage", lambda: scenarios.enqueue_outage(api, stack)),
            ("fault until the DLQ", lambda: scenarios.fault_until_dlq(api, stack, lines)),
            (
                "schemathesis",
                lambda: scenarios.schemathesis_run(stack, api, examples_per_operation=args.examples),
            ),
        ]
        for name, run in runs:
            say(f"stress: {name} ...")
            started = time.monotonic()
            try:
                result = run()
            except Exception as exc:
                result = Outcome(name, "(the scenario raised)", broken=[f"{type(exc).__name__}: {exc}"])
            for outcome in result if isinstance(result, list) else [result]:
                outcome.seconds = time.monotonic() - started
                outcomes.append(outcome)
    (work / "events.log").write_text("\n".join(lines) + "\n")
    say()
    say(table(outcomes))
    say(f"\nevent lines: {work / 'events.log'}")
    return 1 if any(o.broken for o in outcomes if o.gate) else 0


if __name__ == "__main__":
    sys.exit(main())
