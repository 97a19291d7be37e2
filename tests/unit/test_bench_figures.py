"""The bench's arithmetic and its table: quantiles of the round trip, instruction ratios with the
interpreter's start-up taken off, and the valgrind column present only when counted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench import figures
from bench.calls import TimedCall
from bench.park import _sequence, calls_within_goal

if TYPE_CHECKING:
    from pathlib import Path


def test_round_trip_quantiles_report_the_tail_and_the_spread() -> None:
    samples = [i / 1000 for i in range(1, 201)]  # 1 ms .. 200 ms

    text = figures.quantile_text(samples)

    assert text == "p50 100 ms, p95 190 ms, p99 198 ms (min 1 · max 200 ms, 200 samples)"


def test_instruction_ratio_takes_the_interpreter_start_up_off_both_sides() -> None:
    # 62 M of start-up in each: 1062 / 862 would say 1.23; the imports alone are 1000 / 800.
    assert figures.instruction_text(1_062_000_000, 862_000_000, 62_000_000) == (
        "1.25 (1000 M / 800 M instructions)"
    )


def _figure(instructions: str | None) -> figures.Figure:
    return figures.Figure("cold", "2 ms", "floor: 1 ms", 2.0, "≤ 0.8", False, instructions=instructions)


def test_the_instructions_column_appears_only_when_counted(tmp_path: Path) -> None:
    counted, plain = tmp_path / "counted.md", tmp_path / "plain.md"

    figures.write_results([_figure("1.07 (3 M / 2 M instructions)"), _figure(None)], counted, "header")
    figures.write_results([_figure(None)], plain, "header", preface="## How to read")

    rows = [line for line in counted.read_text().splitlines() if line.startswith("| cold")]
    assert rows == [
        "| cold | 2 ms | floor: 1 ms | 2.00 | 1.07 (3 M / 2 M instructions) | ≤ 0.8 | **no** |",
        "| cold | 2 ms | floor: 1 ms | 2.00 | — | ≤ 0.8 | **no** |",
    ]
    text = plain.read_text()
    assert "instructions" not in text
    assert text.index("## How to read") < text.index("header") < text.index("| figure |")


def test_the_park_sequence_brackets_calls_made_at_once() -> None:
    calls = [
        TimedCall("dynamodb.Query", "checkpoint", 0, 1),
        TimedCall("dynamodb.PutItem", "ledger", 1.5, 2),
        TimedCall("sns.Publish", "sink", 2.1, 3),
        TimedCall("sqs.SendMessage", "sink", 2.2, 3.1),
    ]

    assert _sequence(calls) == "checkpoint:Query → ledger:PutItem → [sink:Publish ‖ sink:SendMessage]"


def test_the_cpu_figure_says_how_many_calls_its_goal_leaves_room_for() -> None:
    # 1.3 against plain LangGraph's 11 calls leaves room for 3.3 more at the same CPU per call
    within = calls_within_goal(11.0, 14.0, goal=1.3)
    assert within.endswith("leaves room for 3.3 calls more than plain LangGraph makes; ours makes 3.0 more")
    # Beyond it, the note names where the calls would have to come from
    beyond = calls_within_goal(11.0, 19.1, goal=1.3)
    assert "ours makes 8.1 more" in beyond
    assert beyond.endswith("the goal needs a checkpointer making fewer calls than plain LangGraph's")


def test_a_ratio_is_shown_with_the_decimals_its_verdict_needs() -> None:
    from bench.figures import Figure

    def shown(ratio: float, passed: bool, *, bound: float = 0.9, higher: bool = True) -> str:
        return Figure("f", "", "", ratio, "goal", passed, bound=bound, higher=higher).ratio_text()

    # Just under a "≥ 0.9" goal: two decimals would show 0.90 beside a "no"
    assert shown(0.8997, passed=False) == "0.8997"
    assert shown(0.8994, passed=False) == "0.899"
    # Clear of the line, and on it: two decimals
    assert shown(0.8912, passed=False) == "0.89"
    assert shown(0.9000, passed=True) == "0.90"
    # The same for a "≤" goal, and for a figure with no goal's number
    assert shown(1.3004, passed=False, bound=1.3, higher=False) == "1.3004"
    assert Figure("f", "", "", 0.8997, "goal", None).ratio_text() == "0.90"
