"""A status listing over the deployment's count of shards (``listing_shards``), and that count raised.

One shard (the default) reads a page with one Query; more spread the listing's writes and read a
page with one Query per shard, sent at once and merged. Either way pages come newest first, whole
and once each while questions are raised and decided at the same moment as a page is read; and
a ledger written under one count and then read and written under a higher one still lists every
question (``wait_service.ledger.shards``). Against the moto server on 127.0.0.1, one ledger table
per test, clients shared by the threads (a boto3 client is thread-safe).
"""

from __future__ import annotations

import random
import threading
import uuid
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
from wait_service.resources import LEDGER, create_table

if TYPE_CHECKING:
    from collections.abc import Callable

pytestmark = pytest.mark.integration

RAISED = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
NOW = RAISED + timedelta(hours=2)
LIMIT = 6


@pytest.fixture
def dynamodb(aws_client: Callable[[str], Any]) -> Any:
    return aws_client("dynamodb")


@pytest.fixture
def table(dynamodb: Any) -> str:
    """A fresh ledger table (only the ledger: the other resources play no part here)."""
    return create_table(dynamodb, LEDGER, f"t{uuid.uuid4().hex[:8]}-ledger")


def ledger(dynamodb: Any, table: str, shards: int) -> Ledger:
    return Ledger(table, dynamodb, clock=lambda: NOW, listing_shards=shards)


def raise_question(dynamodb: Any, table: str, name: str, at: datetime, shards: int) -> None:
    envelope = build_envelope(
        f"t-{name}", Question(question_id=name, question={"name": name}, policy=approval()), now=at
    )
    DynamoDbAnnounce(table, client=dynamodb, listing_shards=shards).deliver(envelope)


def seed(
    dynamodb: Any, table: str, shards: int, count: int, prefix: str = "q", start: datetime = RAISED
) -> list[str]:
    """``count`` open questions from ``start``, two to a second (ties), every third one delivered."""
    names = [f"{prefix}-{i:03d}" for i in range(count)]
    writer = ledger(dynamodb, table, shards)
    for i, name in enumerate(names):
        raise_question(dynamodb, table, name, start + timedelta(seconds=i // 2), shards)
        if i % 3 == 1:
            assert writer.mark_delivered(name, ["dynamodb"])
    return names


def page_all(reader: Ledger, status: str, token: str | None = None) -> list[list[QuestionRecord]]:
    pages = []
    for _ in range(100):
        page = list_page(reader, status=status, thread_id=None, limit=LIMIT, next_token=token)
        pages.append(page.items)
        token = page.next
        if token is None:
            return pages
    raise AssertionError("the listing never ended")


def well_ordered(pages: list[list[QuestionRecord]]) -> list[str]:
    """The ids listed, after checking: once each, newest first across pages, no page too long."""
    listed = [q for page in pages for q in page]
    ids = [q.question_id for q in listed]
    assert [n for n, c in Counter(ids).items() if c > 1] == [], "a question was listed twice"
    stamps = [q.created_at or "" for q in listed]
    assert stamps == sorted(stamps, reverse=True), "not newest first across pages"
    assert all(len(page) <= LIMIT for page in pages)
    return ids


def count_queries(dynamodb: Any) -> list[int]:
    """A counter of the Query calls ``dynamodb`` makes from now on."""
    counted = [0]

    def count(**_: Any) -> None:
        counted[0] += 1

    dynamodb.meta.events.register("before-call.dynamodb.Query", count)
    return counted


def one_round(
    dynamodb: Any,
    table: str,
    shards: int,
    ledgers: tuple[Ledger, Ledger],
    token: str | None,
    round_: int,
    to_answer: list[str],
    inserted: list[str],
) -> Page:
    """Read one page while, at the same moment, two questions are raised and ``to_answer`` answered."""
    reader, writer = ledgers
    barrier = threading.Barrier(3)
    got: dict[str, Page] = {}

    def read() -> None:
        barrier.wait()
        got["page"] = list_page(reader, status="pending", thread_id=None, limit=LIMIT, next_token=token)

    def insert() -> None:
        barrier.wait()
        for k in range(2):
            name = f"new-{round_:02d}-{k}"
            raise_question(dynamodb, table, name, NOW + timedelta(seconds=round_), shards)
            inserted.append(name)

    def answer() -> None:
        barrier.wait()
        for name in to_answer:
            assert writer.record_answer(name, {"action": "approve"}, answered_by="ann") is None

    threads = [threading.Thread(target=act) for act in (read, insert, answer)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert "page" in got, "the page read did not finish"
    return got["page"]


@pytest.mark.parametrize("shards", [1, 4])
def test_pages_stay_whole_while_questions_are_raised_and_answered(
    dynamodb: Any, table: str, shards: int
) -> None:
    # Given open questions (ties included) in `shards` shards
    names = seed(dynamodb, table, shards, 30)
    reader, writer = ledger(dynamodb, table, shards), ledger(dynamodb, table, shards)
    order = random.Random(shards).sample(names, len(names))
    answered: dict[str, int] = {}
    inserted: list[str] = []
    pages: list[list[QuestionRecord]] = []
    token: str | None = None

    # When `pending` is paged while, at the same moment as each page is read, two new questions
    # are raised and two seeded ones answered
    for round_ in range(100):
        to_answer = order[2 * round_ : 2 * round_ + 2]
        page = one_round(dynamodb, table, shards, (reader, writer), token, round_, to_answer, inserted)
        answered |= dict.fromkeys(to_answer, round_)
        pages.append(page.items)
        token = page.next
        if token is None:
            break
    else:
        raise AssertionError("the listing never ended")

    # Then: newest first and once each; no miss (every seeded question nobody answered is listed);
    # nothing answered before its page was read is on it; the new ones (newer than the first
    # page) only on the first page, if at all
    ids = well_ordered(pages)
    assert set(names) - set(answered) <= set(ids)
    assert set(ids) <= set(names) | set(inserted)
    for round_, listed in enumerate(pages):
        assert not [q.question_id for q in listed if answered.get(q.question_id, round_) < round_]
    assert not [q for listed in pages[1:] for q in listed if q.question_id in inserted]


@pytest.mark.parametrize("shards", [1, 4])
def test_a_page_is_one_query_per_shard(dynamodb: Any, table: str, shards: int) -> None:
    seed(dynamodb, table, shards, 12)
    queries = count_queries(dynamodb)
    page = list_page(
        ledger(dynamodb, table, shards), status="pending", thread_id=None, limit=LIMIT, next_token=None
    )
    assert len(page.items) == LIMIT
    assert queries[0] == shards


def test_raising_the_count_keeps_every_question_listed(dynamodb: Any, table: str) -> None:
    # Given a ledger written with one shard: open questions, three of them answered
    old = seed(dynamodb, table, 1, 20, prefix="old")
    one = ledger(dynamodb, table, 1)
    for name in old[:3]:
        assert one.record_answer(name, {"action": "approve"}, answered_by="ann") is None
    # and a first page read with one shard
    first = list_page(one, status="pending", thread_id=None, limit=LIMIT, next_token=None)
    assert first.next is not None

    # When the count is raised to four: new questions are raised, old ones move (delivered,
    # escalated: they take their shard under four) and two more are answered
    four = ledger(dynamodb, table, 4)
    new = seed(dynamodb, table, 4, 8, prefix="new", start=NOW)
    unlisted = old[3 : 20 - LIMIT]
    for name in unlisted[::2]:
        four.mark_delivered(name, ["dynamodb"])
    assert four.record_escalation(unlisted[1], rung=0, route="managers", expires_at=NOW)
    for name in unlisted[-2:]:
        assert four.record_answer(name, {"action": "approve"}, answered_by="bob") is None
    moved = {question_id_of(q["dedupe_key"]["S"]): q["status_shard"]["S"] for q in _index(dynamodb, table)}
    assert {moved[name] for name in old[3:] if name not in unlisted[-2:]} - {"open#0"}, "nothing re-keyed"

    # Then the first page's token reads on under four shards: every old question still open is
    # listed once, newest first, re-keyed or not
    rest = page_all(four, "pending", first.next)
    ids = well_ordered([first.items, *rest])
    still_open = [name for name in old[3:] if name not in unlisted[-2:]]
    assert sorted(ids) == sorted(still_open)
    # and a fresh listing under four lists every open question, old and new, once each
    assert sorted(well_ordered(page_all(four, "pending"))) == sorted(still_open + new)
    # the answered ones under either count
    assert sorted(well_ordered(page_all(four, "answered"))) == sorted(old[:3] + unlisted[-2:])
    # and a token of four shards is not read as one of one: a lower count is refused, not
    # silently read over fewer shards
    token = list_page(four, status="pending", thread_id=None, limit=LIMIT, next_token=None).next
    assert token is not None
    with pytest.raises(InvalidRequestError, match="status=pending"):
        list_page(one, status="pending", thread_id=None, limit=LIMIT, next_token=token)


def _index(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = dynamodb.scan(TableName=table, IndexName="by-status")["Items"]
    return items
