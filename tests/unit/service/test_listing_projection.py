"""A page of questions shows each question as ``GET /questions/{id}`` does, read from the indexes alone.

The listing indexes project only what a page shows (``wait_service.resources.LISTED_ATTRIBUTES``):
an attribute the page shows but the index leaves out would be listed empty, an attribute the page
does not show would only cost write units on every change of it. Checked on a question item that
carries every attribute a question can have (a quorum's votes, a delegation, an extension, the
run's requester, the policy store's version), in moto in process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws

from agent_wait.aws.dynamodb import ledger_put, to_attribute
from agent_wait.envelope import Question, build_envelope
from wait_service.http.api import QuestionView
from wait_service.ledger import Ledger
from wait_service.resources import LEDGER, LISTED_ATTRIBUTES, create_table

if TYPE_CHECKING:
    from collections.abc import Iterator

# Everything a question item can carry besides what the first write puts, as the ledger stores it.
LATER: dict[str, Any] = {
    "status": "delivered",
    "policy_version": 3,
    "requested_by": "arn:aws:iam::123456789012:role/agent",
    "delegated_to": ["bob"],
    "delegations": [{"by": "ann", "to": "bob", "reason": "on leave", "at": "2026-11-30T10:01:00Z"}],
    "extensions": [{"by": "ann", "seconds": 600, "at": "2026-11-30T10:02:00Z"}],
    "extended_seconds": 600,
    "votes": [{"by": "ann", "vote": "approve", "at": "2026-11-30T10:03:00Z"}],
    "voters": ["ann"],
    "approvers": ["ann"],
    "reminders_sent": [1],
    "escalation": 1,
}


@pytest.fixture(scope="module")
def ledger() -> Iterator[Ledger]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, LEDGER, "ledger")
        envelope = build_envelope(
            "t-1",
            Question(question_id="q-1", question={"refund": 40}, policy={"approvals_required": 2}),
        )
        item = ledger_put("ledger", envelope)["Item"]
        item |= {name: to_attribute(value) for name, value in LATER.items()}
        client.put_item(TableName="ledger", Item=item)
        yield Ledger("ledger", client)


@pytest.mark.parametrize("by", ["status", "thread"])
def test_a_listed_question_shows_what_its_own_page_shows(ledger: Ledger, by: str) -> None:
    page = ledger.list_questions(
        status="pending" if by == "status" else None, thread_id="t-1" if by == "thread" else None
    )
    assert [q.question_id for q in page.items] == ["q-1"]
    listed = QuestionView.of(page.items[0]).model_dump()
    shown = QuestionView.of(ledger.get_question("q-1")).model_dump()
    assert listed == shown
    # The page shows the quorum's count, the delegate and the requester (not their defaults)
    assert listed["quorum"]["approvals"] == 1
    assert (listed["delegates"], listed["requested_by"], listed["policy_version"]) == (
        ["bob"],
        LATER["requested_by"],
        3,
    )


def test_the_indexes_leave_out_what_no_page_shows() -> None:
    # Written on every reminder, resume and decision, shown on no page: kept out of the indexes,
    # so a write that changes only these costs the indexes nothing.
    assert not {
        "envelope",
        "kind",
        "reminders_sent",
        "expires_ttl",
        "voters",
        "extended_seconds",
    } & set(LISTED_ATTRIBUTES)
