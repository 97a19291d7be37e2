"""The audit archive read from the ledger's real stream (moto): its records equal the ledger's audit.

Fifty questions are raised and decided the ways a question ends (answered with and without edits
and then resumed with a receipt, a resume that failed first, expired with a default, revoked; a few
left open), through the ledger's own writes. The stream's reader (the local stack's, the same
mapping emulation) hands every change to the consumers the dispatcher builds, the archive among
them; the newest archive record of each question must equal the question as the ledger holds it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest
from botocore.config import Config

from agent_wait import Question, approval, build_envelope
from agent_wait.aws import DynamoDbAnnounce
from agent_wait.receipts import Receipt
from agent_wait_cli.local.streams import StreamReader
from wait_service.answers.audit import audit_of
from wait_service.ledger import Ledger
from wait_service.settings import Settings
from wait_service.stream.archive import (
    ARCHIVE_COLUMNS,
    ArchiveConsumer,
    ArchiveError,
    FirehoseSink,
    JsonLinesSink,
    archive_record,
)
from wait_service.stream.dispatcher import build_ledger_stream
from wait_service.stream.ledger_stream import LedgerStream

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from wait_service.resources import LocalResources

pytestmark = pytest.mark.integration

RAISED = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
LATE: dict[str, Any] = {"action": "reject", "reason": "nobody answered in time"}


def read_stream(resources: LocalResources, aws_client: Callable[[str], Any], stream: LedgerStream) -> int:
    """Hand every change so far to ``stream``'s consumers, as the dispatcher's mapping does."""
    import boto3

    streams = boto3.client(
        "dynamodbstreams",
        endpoint_url=aws_client("dynamodb").meta.endpoint_url,
        region_name="us-east-1",
        config=Config(account_id_endpoint_mode="disabled"),
    )

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        for record in event["Records"]:
            stream.process(record)
        return {"batchItemFailures": []}

    assert resources.ledger_stream_arn is not None
    return StreamReader(streams, resources.ledger_stream_arn, handler, batch_size=100).drain()


def newest(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    latest: dict[str, dict[str, Any]] = {}
    for record in records:
        current = latest.get(record["question_id"])
        if current is None or int(record["sequence_number"]) > int(current["sequence_number"]):
            latest[record["question_id"]] = record
    return latest


def stored(receipt: Receipt) -> dict[str, Any]:
    """A receipt as the runner keeps it on its question (the ledger holds only the runner's receipts)."""
    return receipt.model_dump(mode="json", exclude={"question_id"})


def content(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("sequence_number", "archived_at", "date")}


def test_the_archive_holds_every_decided_question_as_the_ledger_does(
    resources: LocalResources, aws_client: Callable[[str], Any], tmp_path: Path
) -> None:
    dynamodb = aws_client("dynamodb")
    ledger = Ledger(resources.ledger_table, dynamodb)
    settings = Settings.from_env({**resources.env(), "AGENT_WAIT_ARCHIVE_DIR": str(tmp_path)})
    # The dispatcher's own consumers, the archive among them (configured by the folder)
    stream = build_ledger_stream(settings, dynamodb=dynamodb, sqs=aws_client("sqs"), sns=aws_client("sns"))
    assert [consumer.name for consumer in stream.consumers] == [
        "outbox",
        "resolution-events",
        "archive",
        "analytics",
    ]

    # Given 50 questions decided every way a question ends
    ends: dict[str, str] = {}
    for n in range(50):
        question_id = f"q-{n:02d}-{resources.ledger_table}"
        envelope = build_envelope(
            f"t-{n}",
            Question(
                question_id=question_id,
                question={"function": "issue_refund", "args": {"customer": f"c-{n}", "amount": 40 + n}},
                policy=approval(ttl=3600),
            ),
            now=RAISED,
        )
        DynamoDbAnnounce(resources.ledger_table, client=dynamodb).deliver(envelope)
        way = ("edited", "rejected", "expired", "revoked", "failed-then-resumed", "open")[n % 6]
        ends[question_id] = way
        if way == "edited":
            ledger.record_answer(
                question_id, {"action": "approve", "args": {"amount": 25}}, answered_by="ann", if_match='"d"'
            )
            ran = Receipt(
                question_id=question_id,
                ran=True,
                args={"customer": f"c-{n}", "amount": 25},
                outcome="returned",
                at=RAISED,
            )
            ledger.mark_resumed(ledger.get_question(question_id), receipt=stored(ran))
        elif way == "rejected":
            ledger.record_answer(
                question_id, {"action": "reject", "reason": "no"}, answered_by="bob", reason="no"
            )
            ledger.mark_resumed(ledger.get_question(question_id))
        elif way == "expired":
            ledger.record_expiry(question_id, LATE, rung=0)
            ledger.mark_resumed(ledger.get_question(question_id))
        elif way == "revoked":
            ledger.record_revocation(question_id, "withdrawn", revoked_by="carol")
        elif way == "failed-then-resumed":
            ledger.record_answer(question_id, {"action": "approve"}, answered_by="dan")
            ledger.mark_resume_failed(ledger.get_question(question_id), "the checkpoint table was down")
            ran = Receipt(
                question_id=question_id,
                ran=True,
                args={"customer": f"c-{n}", "amount": 40 + n},
                outcome="returned",
                at=RAISED,
            )
            ledger.mark_resumed(ledger.get_question(question_id), receipt=stored(ran))

    # When the stream's reader hands every change to the consumers
    assert read_stream(resources, aws_client, stream) > 50

    # Then each decided question's newest record is the question as the ledger holds it
    sink = JsonLinesSink(tmp_path)
    records = sink.read()
    latest = newest(records)
    decided = {q for q, way in ends.items() if way != "open"}
    assert set(latest) == decided
    for question_id in decided:
        question = ledger.get_question(question_id)
        expected = archive_record(question, sequence_number="0", archived_at="2026-12-01T00:00:00.000Z")
        assert content(latest[question_id]) == content(expected), ends[question_id]
        assert json.loads(latest[question_id]["audit"]) == json.loads(json.dumps(audit_of(question)))
        assert json.loads(latest[question_id]["lifecycle"]) == question.lifecycle
    # The columns are the Glue table's, in its order, and every record lies under its day
    assert all(list(record)[: len(ARCHIVE_COLUMNS)] == [c for c, _ in ARCHIVE_COLUMNS] for record in records)
    assert all(record["date"] == record["archived_at"][:10] for record in records)
    # One record per change of what a decided question holds
    by_question: dict[str, int] = {}
    for record in records:
        by_question[record["question_id"]] = by_question.get(record["question_id"], 0) + 1
    counts = {
        way: {by_question[q] for q, w in ends.items() if w == way} for way in set(ends.values()) - {"open"}
    }
    assert counts == {
        "edited": {2},
        "rejected": {2},
        "expired": {2},
        "revoked": {1},
        "failed-then-resumed": {3},
    }

    # And the edited approvals carry their diff and receipt
    edited = json.loads(latest[next(q for q, w in ends.items() if w == "edited")]["audit"])
    assert edited["diff"] == [{"op": "replace", "path": "/amount", "value": 25}]
    assert edited["receipt"]["ran"] is True


def test_a_record_handled_twice_is_written_twice_and_reads_as_one(
    resources: LocalResources, aws_client: Callable[[str], Any], tmp_path: Path
) -> None:
    dynamodb = aws_client("dynamodb")
    question_id = f"q-twice-{resources.ledger_table}"
    DynamoDbAnnounce(resources.ledger_table, client=dynamodb).deliver(
        build_envelope(
            "t", Question(question_id=question_id, question="Ship?", policy=approval()), now=RAISED
        )
    )
    Ledger(resources.ledger_table, dynamodb).record_answer(
        question_id, {"action": "approve"}, answered_by="ann"
    )
    stream = LedgerStream([ArchiveConsumer(JsonLinesSink(tmp_path))])
    read_stream(resources, aws_client, stream)
    read_stream(resources, aws_client, stream)  # the mapping's retry of the same records

    records = JsonLinesSink(tmp_path).read()
    assert len(records) == 2
    assert len(newest(records)) == 1


class RefusingFirehose:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def put_record_batch(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return {
            "FailedPutCount": 1,
            "RequestResponses": [{"RecordId": "r1"}, {"ErrorCode": "ServiceUnavailableException"}],
        }


def test_a_record_firehose_refuses_fails_the_change_so_the_stream_retries_it() -> None:
    firehose = RefusingFirehose()
    record = archive_record(_question(), sequence_number="1", archived_at="2026-12-01T10:00:00.000Z")

    with pytest.raises(ArchiveError, match="Firehose refused 1 of 2 archive records"):
        FirehoseSink("agent-wait-audit", firehose).write([record, record])

    [call] = firehose.calls
    assert call["DeliveryStreamName"] == "agent-wait-audit"
    line = call["Records"][0]["Data"].decode()
    assert line.endswith("\n") and json.loads(line)["question_id"] == "q" and "date" not in json.loads(line)


def _question() -> Any:
    from wait_service.ledger import QuestionRecord

    return QuestionRecord(
        question_id="q",
        thread_id="t",
        status="answered",
        digest="d",
        question="Ship?",
        policy={},
        source=None,
        created_at=None,
        expires_at=None,
        updated_at=None,
        lifecycle=[],
        answer={"action": "approve"},
        answered_by="ann",
    )


def test_an_answer_only_a_decimal_holds_is_archived_with_every_digit() -> None:
    # A number the api read exactly (no float holds it) reaches the archive as the digits sent;
    # a consumer that cannot write it would fail its stream batch on every retry.
    import dataclasses
    from decimal import Decimal

    amount = Decimal("98765432109876543210987.000000000001")
    question = dataclasses.replace(
        _question(),
        question={"function": "issue_refund", "args": {"amount": Decimal("40.5")}},
        answer={"action": "approve", "args": {"amount": amount}},
    )

    record = archive_record(question, sequence_number="1", archived_at="2026-12-01T10:00:00.000Z")

    assert '"amount": 98765432109876543210987.000000000001' in record["answer"]
    assert json.loads(record["answer"], parse_float=Decimal)["args"]["amount"] == amount
    assert json.loads(record["audit"], parse_float=Decimal)["authorized"]["args"]["amount"] == amount
