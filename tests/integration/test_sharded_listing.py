"""The status listing is write-sharded, and its pages still come newest first, whole and once each.

The ``by-status`` index is keyed on ``status_shard`` (``<listing>#<n>``, ``listing_shards`` shards
per listing, see ``wait_service.ledger.shards``), so a page is a merge of one Query per shard. These
run at the default count (``test_listing_shards`` runs the same promises at one and at four
shards). Paged here through ``page_tokens.list_page`` (as the api pages) against the moto server
on 127.0.0.1 while other clients insert questions and decide them at the same moment as each page
is read.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from agent_wait import Question, approval, build_envelope
from agent_wait.aws import DynamoDbAnnounce
from agent_wait.aws.dynamodb import question_id_of
from agent_wait.errors import InvalidRequestError
from wait_service.http.page_tokens import list_page
from wait_service.ledger import Ledger, Page, QuestionRecord
from wait_service.ledger.shards import STATUS_SHARDS

if TYPE_CHECKING:
    from collections.abc import Callable

    from wait_service.resources import LocalResources

pytestmark = pytest.mark.integration

RAISED = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
NOW = RAISED + timedelta(hours=2)
SEEDED = 60
LIMIT = 7


def raise_question(dynamodb: Any, table: str, name: str, at: datetime) -> None:
    envelope = build_envelope(
        f"t-{name}", Question(question_id=name, question={"name": name}, policy=approval()), now=at
    )
    DynamoDbAnnounce(table, client=dynamodb).deliver(envelope)


def seed(resources: LocalResources, aws_client: Callable[[str], Any]) -> list[str]:
    """SEEDED open questions, three to a second (ties), a third delivered and a sixth escalated."""
    dynamodb = aws_client("dynamodb")
    ledger = Ledger(resources.ledger_table, dynamodb, clock=lambda: NOW)
    names = [f"q-{i:03d}" for i in range(SEEDED)]
    for i, name in enumerate(names):
        raise_question(dynamodb, resources.ledger_table, name, RAISED + timedelta(seconds=i // 3))
        if i % 3 == 1:
            assert ledger.mark_delivered(name, ["dynamodb"])
        if i % 6 == 2:
            assert ledger.record_escalation(name, rung=0, route="managers", expires_at=NOW)
    return names


def one_round(
    resources: LocalResources,
    aws_client: Callable[[str], Any],
    status: str,
    token: str | None,
    round_: int,
    to_answer: list[str],
) -> tuple[Page, list[str]]:
    """Read one page while, at the same moment, two questions are inserted and ``to_answer`` answered."""
    barrier = threading.Barrier(3)
    got: dict[str, Any] = {}
    inserted: list[str] = []

    def read() -> None:
        ledger = Ledger(resources.ledger_table, aws_client("dynamodb"), clock=lambda: NOW)
        barrier.wait()
        got["page"] = list_page(ledger, status=status, thread_id=None, limit=LIMIT, next_token=token)

    def insert() -> None:
        dynamodb = aws_client("dynamodb")
        barrier.wait()
        for k in range(2):
            name = f"new-{round_:02d}-{k}"
            raise_question(dynamodb, resources.ledger_table, name, NOW + timedelta(seconds=round_))
            inserted.append(name)

    def answer() -> None:
        ledger = Ledger(resources.ledger_table, aws_client("dynamodb"), clock=lambda: NOW)
        barrier.wait()
        for name in to_answer:
            assert ledger.record_answer(name, {"action": "approve"}, answered_by="ann") is None

    threads = [threading.Thread(target=act) for act in (read, insert, answer)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert "page" in got, "the page read did not finish"
    return got["page"], inserted


def page_through_while_writing(
    resources: LocalResources, aws_client: Callable[[str], Any], status: str, names: list[str]
) -> tuple[list[list[QuestionRecord]], dict[str, int], list[str]]:
    """Page ``status``; with each page, at the same moment, insert two questions and answer two.

    Returns the pages, the round each question was answered in, and the questions inserted.
    """
    order = random.Random(7).sample(names, len(names))
    answered: dict[str, int] = {}
    inserted: list[str] = []
    pages: list[list[QuestionRecord]] = []
    token: str | None = None
    for round_ in range(100):
        to_answer = order[2 * round_ : 2 * round_ + 2]
        page, new = one_round(resources, aws_client, status, token, round_, to_answer)
        answered |= dict.fromkeys(to_answer, round_)
        inserted += new
        pages.append(page.items)
        token = page.next
        if token is None:
            return pages, answered, inserted
    raise AssertionError("the listing never ended")


def assert_well_ordered(pages: list[list[QuestionRecord]]) -> list[str]:
    listed = [q for page in pages for q in page]
    ids = [q.question_id for q in listed]
    assert [n for n, c in Counter(ids).items() if c > 1] == [], "a question was listed twice"
    stamps = [q.created_at or "" for q in listed]
    assert stamps == sorted(stamps, reverse=True), "not newest first across pages"
    assert all(len(page) <= LIMIT for page in pages)
    return ids


def test_questions_land_in_every_shard_of_their_listing(
    resources: LocalResources, aws_client: Callable[[str], Any]
) -> None:
    # Given the seeded questions, and one answered
    names = seed(resources, aws_client)
    dynamodb = aws_client("dynamodb")
    Ledger(resources.ledger_table, dynamodb, clock=lambda: NOW).record_answer(
        names[0], {"action": "approve"}, answered_by="ann"
    )

    # Then every open one is in an `open#<n>` shard whatever its open status, the answered one in
    # `answered#<n>`, and the open ones spread over the shards
    items = dynamodb.scan(TableName=resources.ledger_table, IndexName="by-status")["Items"]
    shards = {question_id_of(item["dedupe_key"]["S"]): item["status_shard"]["S"] for item in items}
    assert len(shards) == SEEDED
    assert shards[names[0]].startswith("answered#")
    open_shards = Counter(shard for name, shard in shards.items() if name != names[0])
    assert all(shard.startswith("open#") for shard in open_shards)
    assert len(open_shards) == STATUS_SHARDS
    # Only what a page shows is in the index: no envelope
    assert all("envelope" not in item and "kind" not in item for item in items)


@pytest.mark.parametrize("status", ["pending", "delivered", "raised"])
def test_open_listings_page_newest_first_while_questions_come_and_go(
    resources: LocalResources, aws_client: Callable[[str], Any], status: str
) -> None:
    # Given open questions spread over the shards (ties included)
    names = seed(resources, aws_client)
    statuses = {q.question_id: q.status for q in (_get(resources, aws_client, n) for n in names)}

    # When the listing is paged while others insert new questions and answer seeded ones
    pages, answered, inserted = page_through_while_writing(resources, aws_client, status, names)

    # Then: newest first, no question twice
    ids = assert_well_ordered(pages)
    # no miss: every seeded question of the status that nobody answered is listed
    wanted = {n for n in names if status == "pending" or statuses[n] == status}
    assert wanted - set(answered) <= set(ids)
    assert set(ids) <= wanted | set(inserted)
    # and nothing already answered when a page was read is on it
    for round_, page in enumerate(pages):
        assert not [q.question_id for q in page if answered.get(q.question_id, round_) < round_]
    # (the inserted ones are newer than the first page: listed only on it, if at all)
    assert not [q for page in pages[1:] for q in page if q.question_id in inserted]


def test_a_closed_listing_pages_while_questions_move_into_it(
    resources: LocalResources, aws_client: Callable[[str], Any]
) -> None:
    # Given open questions, half of them answered already
    names = seed(resources, aws_client)
    ledger = Ledger(resources.ledger_table, aws_client("dynamodb"), clock=lambda: NOW)
    first = names[::2]
    for name in first:
        assert ledger.record_answer(name, {"action": "approve"}, answered_by="bob") is None

    # When `answered` is paged while more are answered
    rest = names[1::2]
    pages, answered, _ = page_through_while_writing(resources, aws_client, "answered", rest)

    # Then newest first, once each, and every question answered before the paging is listed
    ids = assert_well_ordered(pages)
    assert set(first) <= set(ids)
    assert set(ids) <= set(first) | set(answered)


def test_a_page_token_continues_only_its_own_status(
    resources: LocalResources, aws_client: Callable[[str], Any]
) -> None:
    seed(resources, aws_client)
    ledger = Ledger(resources.ledger_table, aws_client("dynamodb"), clock=lambda: NOW)
    page = list_page(ledger, status="pending", thread_id=None, limit=LIMIT, next_token=None)
    assert page.next is not None
    with pytest.raises(InvalidRequestError, match="status=raised"):
        list_page(ledger, status="raised", thread_id=None, limit=LIMIT, next_token=page.next)
    with pytest.raises(InvalidRequestError):
        list_page(ledger, status=None, thread_id=None, limit=LIMIT, next_token=page.next)


def _get(resources: LocalResources, aws_client: Callable[[str], Any], name: str) -> QuestionRecord:
    return Ledger(resources.ledger_table, aws_client("dynamodb")).get_question(name)
