"""The status machine is one table: the ledger, the api and the docs are derived from it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, get_args

import pytest

from wait_service.http.api import QuestionStatus
from wait_service.ledger import PENDING, Ledger
from wait_service.ledger.statuses import ANSWERED, CLOSED, OPEN, RESUMING, STATUSES, allowed_from, mermaid

if TYPE_CHECKING:
    from service_events import Aws

DOCS = Path(__file__).resolve().parents[3] / "docs" / "internals.md"


def test_the_docs_diagram_is_the_table() -> None:
    assert f"```mermaid\n{mermaid()}\n```" in DOCS.read_text()


def test_the_api_status_filter_lists_every_status_and_pending() -> None:
    assert set(get_args(QuestionStatus)) == {PENDING, *STATUSES}


def test_every_status_is_reachable_from_raised_and_every_target_is_a_status() -> None:
    reached, frontier = {"raised"}, ["raised"]
    while frontier:
        for target in STATUSES[frontier.pop()].next:
            assert target in STATUSES
            if target not in reached:
                reached.add(target)
                frontier.append(target)
    assert reached == set(STATUSES)


def test_exactly_the_three_deciding_moves_come_from_the_open_statuses() -> None:
    """Seed 002: a wait is resolved by a response, a default on expiry, or not at all (revoked)."""
    assert RESUMING == {"answered", "expired", "revoked"}
    for status in RESUMING:
        assert set(allowed_from(status)) <= set(OPEN)
    assert set(OPEN) | set(ANSWERED) | set(CLOSED) == set(STATUSES)


def test_an_unknown_status_is_refused() -> None:
    with pytest.raises(KeyError):
        allowed_from("paused")


def test_a_move_the_table_does_not_allow_changes_nothing_in_the_ledger(aws: Aws) -> None:
    aws.raise_question()
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb)
    assert ledger.record_answer("q-1", {"action": "approve"}, answered_by="ann") is None

    # `answered` may not move to `delivered`, nor be answered or expired again
    assert ledger.mark_delivered("q-1", ["sns"]) is False
    assert ledger.record_expiry("q-1", {"action": "reject"}, rung=0) is not None
    assert ledger.get_question("q-1").status == "answered"
