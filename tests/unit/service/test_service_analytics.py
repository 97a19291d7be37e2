"""Approval analytics: counters kept from the ledger's stream, each fact counted once.

DESIGN.md ("Decisions for production"): "Whatever must follow an accepted reply or start (the
resume or start message, the resolution events, the audit archive, the analytics counters) follows
from the ledger's DynamoDB stream, at least once, deduplicated downstream".
"""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import date, timedelta
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError
from service_events import LambdaContext, load_handler

from agent_wait import OnExpiry, Policy
from agent_wait.aws import SqsAnnounce
from agent_wait.errors import AgentWaitError
from agent_wait_cli.local.streams import StreamReader, lambda_record
from wait_service.ledger import QuestionRecord, parse_time
from wait_service.ledger.questions import EXPIRED_ANSWER
from wait_service.lifecycle.timers import TimerEvent
from wait_service.lifecycle.unanswered import LifecycleService
from wait_service.stream.analytics import (
    BUCKET_BOUNDS_MS,
    AnalyticsConsumer,
    StatsService,
    StatsStore,
    Tally,
    answer_kind,
    bucket_of,
    edited_fields,
    function_of,
    summarize,
)
from wait_service.stream.ledger_stream import LedgerStream

if TYPE_CHECKING:
    from service_events import Aws, FakeClock

    from wait_service.http.api import WaitApi

DAY = date(2026, 11, 30)
FUNCTIONS = ("issue_refund", "delete_user", "send_email")
RESPONDERS = ("ann", "bob", "cy")
QUESTIONS = 200


def stats(
    aws: Aws, since: date = DAY, until: date = DAY + timedelta(days=30), **filters: Any
) -> dict[str, Any]:
    store = StatsStore(aws.settings.require("stats_table"), aws.dynamodb)
    return StatsService(store).stats(since=since, until=until, **filters)


def redeliver(aws: Aws, keep: Any = lambda record: True) -> int:
    """Hand the stream's records again, from its start, to a fresh analytics consumer (a retried batch)."""
    consumer = LedgerStream(
        [AnalyticsConsumer(StatsStore(aws.settings.require("stats_table"), aws.dynamodb))]
    )
    handed = 0

    def handle(event: dict[str, Any], _: Any) -> None:
        nonlocal handed
        for record in event["Records"]:
            if keep(record):
                consumer.process(record)
                handed += 1

    StreamReader(aws.streams, aws.resources.ledger_stream_arn, handle).drain()
    return handed


def test_a_record_handed_over_twice_counts_once(aws: Aws, api: WaitApi, clock: FakeClock) -> None:
    # Given a question answered with an edit 90 s after it was raised
    envelope = aws.raise_question("t-1", "q-1")
    clock.advance(90)
    api.replies.reply(
        "q-1", {"action": "approve", "args": {"amount": 25}}, principal="ann", if_match=f'"{envelope.digest}"'
    )

    # When the dispatcher reads the stream, and every record is handed over again
    aws.dispatch()
    assert redeliver(aws) >= 2

    # Then each fact counted once
    totals = stats(aws)["totals"]
    assert (totals["raised"], totals["answered"], totals["edit"], totals["approve"]) == (1, 1, 1, 0)
    assert totals["edited_fields"] == [{"field": "amount", "count": 1}]
    assert totals["edit_rate"] == 1.0
    assert totals["time_to_answer"] | {"mean_ms": None} == {
        "count": 1,
        "p50_ms": 90_000,
        "p90_ms": 90_000,
        "max_ms": 90_000,
        "mean_ms": None,
    }
    [ann] = stats(aws)["by_responder"]
    assert (ann["responder"], ann["edit"]) == ("ann", 1)


def test_the_max_is_kept_when_the_record_is_retried_after_the_counters_were_written(
    aws: Aws, api: WaitApi, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the write of the max failing once, after the transaction that counted the answer
    envelope = aws.raise_question("t-1", "q-1")
    clock.advance(3600)
    api.replies.reply("q-1", {"action": "approve"}, principal="ann", if_match=f'"{envelope.digest}"')
    store = StatsStore(aws.settings.require("stats_table"), aws.dynamodb)
    real = store.client.update_item
    failures = iter(
        [ClientError({"Error": {"Code": "ProvisionedThroughputExceededException"}}, "UpdateItem")]
    )

    def flaky(**request: Any) -> Any:
        if request.get("UpdateExpression") == "SET tta_max_ms = :v" and (error := next(failures, None)):
            raise error
        return real(**request)

    monkeypatch.setattr(store.client, "update_item", flaky)
    consumer = LedgerStream([AnalyticsConsumer(store)])
    records: list[dict[str, Any]] = []
    StreamReader(
        aws.streams, aws.resources.ledger_stream_arn, lambda event, _: records.extend(event["Records"])
    ).drain()

    # When the stream hands the answer over, fails, and hands it over again (as the mapping retries)
    consumer.process(records[0])
    with pytest.raises(ClientError):
        consumer.process(records[1])
    consumer.process(records[1])

    # Then the answer counted once, and its max is there
    totals = stats(aws)["totals"]
    assert totals["answered"] == 1
    assert totals["time_to_answer"]["max_ms"] == 3_600_000


def test_a_failed_count_adds_nothing_and_the_retry_counts_it(
    aws: Aws, api: WaitApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    envelope = aws.raise_question("t-1", "q-1")
    api.replies.reply("q-1", {"action": "reject"}, principal="bob", if_match=f'"{envelope.digest}"')
    store = StatsStore(aws.settings.require("stats_table"), aws.dynamodb)
    real = store.client.transact_write_items
    calls = {"n": 0}

    def throttled(**request: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise ClientError({"Error": {"Code": "ThrottlingException"}}, "TransactWriteItems")
        return real(**request)

    monkeypatch.setattr(store.client, "transact_write_items", throttled)
    consumer = LedgerStream([AnalyticsConsumer(store)])
    records: list[dict[str, Any]] = []
    StreamReader(
        aws.streams, aws.resources.ledger_stream_arn, lambda event, _: records.extend(event["Records"])
    ).drain()
    consumer.process(records[0])
    with pytest.raises(ClientError):
        consumer.process(records[1])
    assert stats(aws)["totals"]["reject"] == 0
    consumer.process(records[1])
    consumer.process(records[1])
    assert stats(aws)["totals"]["reject"] == 1


def _rejected(aws: Aws, api: WaitApi) -> tuple[StatsStore, list[dict[str, Any]]]:
    """A question rejected by bob; a store on the stats table, and the ledger stream's records."""
    envelope = aws.raise_question("t-1", "q-1")
    api.replies.reply("q-1", {"action": "reject"}, principal="bob", if_match=f'"{envelope.digest}"')
    records: list[dict[str, Any]] = []
    StreamReader(
        aws.streams, aws.resources.ledger_stream_arn, lambda event, _: records.extend(event["Records"])
    ).drain()
    return StatsStore(aws.settings.require("stats_table"), aws.dynamodb), records


def _conflicting(store: StatsStore, times: int) -> list[float]:
    """Make the store's next ``times`` transactions cancelled as DynamoDB cancels one that met another
    writing the same counter: nothing written, a reason per item, ``TransactionConflict`` among them.
    Returns the waits between tries."""
    real = store.client.transact_write_items
    left = [times]

    def conflicting(**request: Any) -> Any:
        if left[0] > 0:
            left[0] -= 1
            reasons: Any = [{"Code": "None"}] * (len(request["TransactItems"]) - 1)
            reasons.append({"Code": "TransactionConflict"})
            raise ClientError(
                {"Error": {"Code": "TransactionCanceledException"}, "CancellationReasons": reasons},
                "TransactWriteItems",
            )
        return real(**request)

    store.client = SimpleNamespace(transact_write_items=conflicting, update_item=store.client.update_item)  # type: ignore[assignment]
    waits: list[float] = []
    store._sleep = waits.append
    return waits


def test_a_count_that_met_another_transaction_on_its_counter_is_tried_again_and_counted_once(
    aws: Aws, api: WaitApi
) -> None:
    # Given a decision, and its counters' transaction cancelled three times by others writing them
    store, records = _rejected(aws, api)
    waits = _conflicting(store, times=3)
    consumer = LedgerStream([AnalyticsConsumer(store)])

    # When the dispatcher counts it: no batch fails
    for record in records:
        consumer.process(record)

    # Then it was tried again after 25, 50 and 100 ms and counted once
    assert waits == [0.025, 0.05, 0.1]
    assert stats(aws)["totals"]["reject"] == 1


def test_a_count_that_keeps_meeting_other_transactions_fails_its_batch_and_the_retry_counts_it(
    aws: Aws, api: WaitApi
) -> None:
    store, records = _rejected(aws, api)
    consumer = LedgerStream([AnalyticsConsumer(store)])
    consumer.process(records[0])
    # Four cancellations: three tries again, then the record fails (the mapping retries it)
    waits = _conflicting(store, times=4)

    with pytest.raises(ClientError):
        consumer.process(records[1])

    assert waits == [0.025, 0.05, 0.1]
    assert stats(aws)["totals"]["reject"] == 0
    consumer.process(records[1])
    assert stats(aws)["totals"]["reject"] == 1


def test_escalations_and_resume_failures_are_counted_on_their_rung(
    aws: Aws, api: WaitApi, clock: FakeClock
) -> None:
    policy = Policy(kind="approval", ttl=60, on_expiry=OnExpiry(action="escalate", to=["lead"]))
    envelope = aws.raise_question("t-1", "q-1", policy=policy)
    clock.advance(61)
    lifecycle = LifecycleService(
        api.ledger, SqsAnnounce(aws.resources.outbox_url, client=aws.sqs), clock=clock
    )
    assert lifecycle.handle(TimerEvent(question_id="q-1", timer="expire", n=0)) == "escalated"
    api.replies.reply("q-1", {"action": "approve"}, principal="lead", if_match=f'"{envelope.digest}"')
    assert api.ledger.mark_resume_failed(api.ledger.get_question("q-1"), "ValueError: boom", attempts=5)
    aws.dispatch()
    redeliver(aws)

    result = stats(aws)
    assert (result["totals"]["escalated"], result["totals"]["resume_failed"]) == (1, 1)
    by_rung = {row["rung"]: row for row in result["by_rung"]}
    assert (by_rung[0]["raised"], by_rung[1]["escalated"], by_rung[1]["approve"]) == (1, 1, 1)
    assert by_rung[1]["resume_failed"] == 1


def test_answers_are_classified_by_what_the_person_did() -> None:
    proposal = {"function": "issue_refund", "args": {"customer": "c-17", "amount": 40}}
    assert answer_kind({"action": "approve"}, proposal) == "approve"
    # A form that sends back exactly what it showed changed nothing.
    assert answer_kind({"action": "approve", "args": {"amount": 40}}, proposal) == "approve"
    assert answer_kind({"action": "approve", "args": {"amount": 40.0}}, proposal) == "approve"
    assert answer_kind({"action": "approve", "args": {"amount": 25}}, proposal) == "edit"
    assert answer_kind({"action": "edit", "value": "v2"}, None) == "edit"
    assert answer_kind({"action": "reject", "reason": "no"}, proposal) == "reject"
    assert answer_kind({"action": "respond", "message": "ask c-17"}, proposal) == "respond"
    assert answer_kind({"choice": "b"}) == answer_kind("free text") == "respond"
    assert edited_fields({"action": "approve", "args": {"amount": 25, "customer": "c-17"}}, proposal) == [
        "amount"
    ]


def test_percentiles_come_from_buckets_that_add_up_across_days() -> None:
    # Given two days' cells, each with its own histogram
    def cell(day: str, values: list[int]) -> dict[str, Any]:
        counts: dict[str, Any] = defaultdict(int)
        for value in values:
            counts[f"tta_b{bucket_of(value):02d}"] += 1
        return {
            "day": day,
            "function": "f",
            "responder": "ann",
            "rung": 0,
            "answered": len(values),
            "answered_approve": len(values),
            "tta_count": len(values),
            "tta_sum_ms": sum(values),
            "tta_max_ms": max(values),
        } | counts

    first, second = [500] * 30 + [5_000] * 10, [60_000] * 40 + [7_200_000] * 20
    summary = summarize(
        [cell("2026-11-30", first), cell("2026-12-01", second)], since=DAY, until=DAY + timedelta(days=1)
    )
    both = summary["totals"]["time_to_answer"]
    # Then the window's histogram is the union's: p50 falls in the 60 s bucket, p90 in the 2 h one
    union = Tally(max_ms=7_200_000)
    for value in first + second:
        union.counts[f"tta_b{bucket_of(value):02d}"] += 1
    assert sum(b["count"] for b in summary["totals"]["buckets"]) == 100
    assert both["p50_ms"] == BUCKET_BOUNDS_MS[bucket_of(60_000)] >= 60_000
    assert both["p50_ms"] < 60_000 * 2**0.5
    assert both["p90_ms"] == union.percentile(0.9) and 7_200_000 <= both["p90_ms"] < 7_200_000 * 2**0.5
    assert both["max_ms"] == 7_200_000
    assert [d["answered"] for d in summary["by_day"]] == [40, 60]


# -- the randomised run ---------------------------------------------------------------------------


def recount(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cells the counters must hold, recounted from the ledger's question items as they stand."""
    cells: dict[tuple[str, str, str, int], dict[str, int]] = defaultdict(lambda: defaultdict(int))

    def add(day: str, function: str, responder: str, rung: int, **counts: int) -> None:
        cell = cells[(day, function, responder, rung)]
        for name, n in counts.items():
            cell[name] += n

    for item in items:
        q = QuestionRecord.from_item(item)
        function = function_of(q.question)
        add(q.created_at[:10], function, "", 0, raised=1)  # type: ignore[index]
        for entry in q.lifecycle:
            if entry["stage"] == "escalated":
                rung = 1 + sum(
                    1 for e in q.lifecycle[: q.lifecycle.index(entry)] if e["stage"] == "escalated"
                )
                add(entry["at"][:10], function, "", rung, escalated=1)
        if q.status in ("expired", "revoked", "answered", "resumed", "resume_failed"):
            day, who = q.answered_at[:10], q.answered_by or ""  # type: ignore[index]
            if q.status == "expired":
                kind = "expired_no_default" if q.answer == EXPIRED_ANSWER else "expired_default"
                add(day, function, who, q.escalation, expired=1, **{kind: 1})
            elif q.status == "revoked":
                add(day, function, who, q.escalation, revoked=1)
            else:
                kind = answer_kind(q.answer, q.question)
                waited = round((parse_time(q.answered_at) - parse_time(q.created_at)).total_seconds() * 1000)  # type: ignore[arg-type]
                edits = (
                    {f"edited:{name}": 1 for name in edited_fields(q.answer, q.question)}
                    if kind == "edit"
                    else {}
                )
                add(
                    day,
                    function,
                    who,
                    q.escalation,
                    answered=1,
                    tta_count=1,
                    tta_sum_ms=waited,
                    **{f"answered_{kind}": 1, f"tta_b{bucket_of(waited):02d}": 1},
                    **edits,
                )
                cell = cells[(day, function, who, q.escalation)]
                cell["tta_max_ms"] = max(cell.get("tta_max_ms", 0), waited)
        failed = [e for e in q.lifecycle if e["stage"] == "resume_failed"]
        if failed:
            add(failed[0]["at"][:10], function, q.answered_by or "", q.escalation, resume_failed=1)
    return [
        {"day": day, "function": function, "responder": responder, "rung": rung} | dict(counts)
        for (day, function, responder, rung), counts in cells.items()
    ]


@pytest.fixture
def item_rollback(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto backs up every table a transaction names, a deep copy of the whole table on each call, to
    roll a cancelled one back: with the thousands of counters and markers of a long run that makes
    each transaction slower than the last. Here the items the transaction touches are backed up
    instead, and put back when it is cancelled: the same rollback, for the Put and Update items the
    analytics send. (The first tests above run on moto's own.)"""
    import copy
    from types import SimpleNamespace

    import moto.dynamodb.models as models
    from moto.dynamodb.exceptions import TransactionCanceledException
    from moto.dynamodb.models.table import Table

    deepcopy = copy.deepcopy
    monkeypatch.setattr(
        models,
        "copy",
        SimpleNamespace(
            deepcopy=lambda value, memo=None: value if isinstance(value, Table) else deepcopy(value, memo)
        ),
    )
    transact = models.DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved = []
        for item in transact_items:
            op = next(iter(item.values()))
            table = self.get_table(op["TableName"])
            names = [n for n in (table.hash_key_attr, table.range_key_attr) if n]
            key = op.get("Key") or {name: op["Item"][name] for name in names}
            saved.append((op["TableName"], key, deepcopy(self.get_item(op["TableName"], key))))
        try:
            transact(self, transact_items)
        except TransactionCanceledException:
            for table_name, key, before in reversed(saved):
                if before is None:
                    self.delete_item(table_name, key)
                else:
                    self.put_item(table_name, before.to_json()["Attributes"])
            raise

    monkeypatch.setattr(models.DynamoDBBackend, "transact_write_items", transact_write_items)


@pytest.mark.usefixtures("item_rollback")
def test_after_200_racing_questions_every_aggregate_equals_a_recount_from_the_ledger(
    aws: Aws, api: WaitApi, clock: FakeClock
) -> None:
    """Replies, expiries and revocations race for 200 questions; the stream is read at random moments
    and parts of it are handed over again (retried batches). Then every figure, of the whole window
    and of each function and responder, equals the one recounted from the ledger's items.

    The stream goes to the dispatcher's handler with the analytics consumer alone, in large batches:
    the outbox and the events (tested with it above) would triple the moto calls of this run.
    """
    rng = random.Random(20261201)
    retried: list[dict[str, Any]] = []
    store = StatsStore(aws.settings.require("stats_table"), aws.dynamodb)
    stream = LedgerStream([AnalyticsConsumer(store)])
    handler = load_handler("dispatcher")
    reader = StreamReader(
        aws.streams,
        aws.resources.ledger_stream_arn,
        lambda event, context: handler.handle(event, context, stream),
        context_factory=LambdaContext,
        batch_size=1000,
        max_retry_attempts=0,
        on_batch=lambda records: retried.extend(records),
    )
    lifecycle = LifecycleService(
        api.ledger, SqsAnnounce(aws.resources.outbox_url, client=aws.sqs), clock=clock
    )
    policies = [
        Policy(kind="approval", ttl=1800),
        Policy(kind="approval", ttl=1800, on_expiry=OnExpiry(action="default", answer={"action": "approve"})),
        Policy(kind="approval", ttl=900, on_expiry=OnExpiry(action="escalate", to=["lead"])),
    ]
    answers = [
        {"action": "approve"},
        {"action": "approve", "args": {"amount": 25}},
        {"action": "approve", "args": {"customer": "c-18"}},
        {"action": "approve", "args": {"amount": 40}},
        {"action": "reject", "reason": "no"},
    ]
    questions: list[tuple[str, str]] = []

    def act(question_id: str, digest: str) -> None:
        """One of the racing writers: a reply, the expiry timer, a revocation."""
        roll = rng.random()
        try:
            if roll < 0.6:
                api.replies.reply(
                    question_id, rng.choice(answers), principal=rng.choice(RESPONDERS), if_match=f'"{digest}"'
                )
            elif roll < 0.85:
                rung = int(rng.random() < 0.2)
                clock.advance(rng.choice([60, 950, 1900]))
                lifecycle.handle(TimerEvent(question_id=question_id, timer="expire", n=rung))
            else:
                api.replies.revoke(question_id, "changed plans", principal=rng.choice(RESPONDERS))
        except AgentWaitError:
            pass  # lost the race: the loser is told the standing decision

    def read_stream() -> None:
        before = len(retried)
        reader.drain()
        # A retried batch: some of the records just handled are handed over a second time.
        for record in retried[before:]:
            if rng.random() < 0.1:
                stream.process(lambda_record(record, aws.resources.ledger_stream_arn))

    for number in range(QUESTIONS):
        clock.advance(rng.choice([1, 30, 400, 5000, 40_000]))
        envelope = aws.raise_question(
            f"t-{number}",
            f"q-{number}",
            policy=rng.choice(policies),
            question={"function": rng.choice(FUNCTIONS), "args": {"customer": "c-17", "amount": 40}},
            now=clock(),
        )
        questions.append((f"q-{number}", envelope.digest))
        # Writers race for the open questions of the last few minutes.
        for _ in range(rng.choice([0, 1, 1, 2])):
            act(*rng.choice(questions[-12:]))
        if rng.random() < 0.1:
            read_stream()
    for question_id, digest in questions:
        if rng.random() < 0.2:
            act(question_id, digest)
    for question_id, _ in rng.sample(questions, 40):
        question = api.ledger.get_question(question_id)
        if question.status == "answered":
            api.ledger.mark_resume_failed(question, "ValueError: boom", attempts=5)
    read_stream()

    items = [
        item
        for page in aws.dynamodb.get_paginator("scan").paginate(TableName=aws.resources.ledger_table)
        for item in page["Items"]
        if item["dedupe_key"]["S"].startswith("wait.created:")
    ]
    assert len(items) == QUESTIONS
    until = clock().date()
    recounted = recount(items)
    got = StatsService(store).stats(since=DAY, until=until)
    assert got == summarize(recounted, since=DAY, until=until)
    totals = got["totals"]
    assert totals["raised"] == len(items)
    # Every kind of outcome took part, several times over.
    kinds = ("approve", "edit", "reject", "expired_default", "expired_no_default", "revoked", "escalated")
    assert min(totals[kind] for kind in (*kinds, "resume_failed")) > 3
    # The same figures for each function, each responder, and both at once.
    cells = list(store.cells(DAY, until))
    for function in (*FUNCTIONS, None):
        for responder in (*RESPONDERS, None):
            window = {"since": DAY, "until": until, "function": function, "responder": responder}
            assert summarize(cells, **window) == summarize(recounted, **window)
