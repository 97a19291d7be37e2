"""The audit archive: every decided question as it stood, kept after the ledger's TTL deletes it.

The ledger is the record of who approved what, and its TTL removes a question some days after it
ends. The archive keeps it: one consumer of the ledger's stream (the stream's one reader hands it
every change) turns each change of a decided question (answered, expired, revoked, and then
resumed or resume_failed) into one *archive record*, built here once for both sinks:

- deployed, :class:`FirehoseSink` puts it to Amazon Data Firehose, which writes it (gzipped JSON
  Lines) to S3 under ``audit/date=YYYY-MM-DD/``, the archive day; a Glue table (partition
  projection on ``date``) lets Athena query it;
- locally, :class:`JsonLinesSink` appends it to ``<folder>/audit/date=YYYY-MM-DD/audit.jsonl``.

A record is written only when something it holds changed (a dispatcher noting that it enqueued the
resume adds none). The stream delivers at least once, so a record may be written twice: the
newest state of a question is the record with the highest ``sequence_number`` (the query in the
README does that).

The columns are :data:`ARCHIVE_COLUMNS`, every one a string: the values whose shape depends on the
question (``question``, ``policy``, ``answer``, ``lifecycle``, ``audit``) are JSON text, read with
Athena's ``json_extract``, so the table never needs a new column for a new kind of question.

Examples
--------
>>> from wait_service.ledger import QuestionRecord
>>> record = QuestionRecord(question_id="q", thread_id="t", status="expired", digest="d",
...     question="Ship it?", policy={"kind": "approval"}, source=None, created_at=None,
...     expires_at=None, updated_at=None, lifecycle=[], answer={"action": "reject"},
...     answered_by="system:expiry")
>>> row = archive_record(record, sequence_number="7", archived_at="2026-12-01T10:00:00.000Z")
>>> row["status"], row["answer"], row["date"]
('expired', '{"action": "reject"}', '2026-12-01')
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agent_wait import exact_json
from wait_service.answers.audit import audit_of
from wait_service.clients import CLIENT_CONFIG
from wait_service.ledger import QuestionRecord
from wait_service.ledger.statuses import DECIDED

if TYPE_CHECKING:
    from mypy_boto3_firehose import FirehoseClient

QUESTION_PREFIX = "wait.created:"
# Where the records go under the bucket (deployed) or the folder (locally), one folder per day.
ARCHIVE_PREFIX = "audit"
PARTITION_KEY = "date"
LOCAL_FILE = "audit.jsonl"
# Every column of an archive record, in order, and its Glue/Athena type.
ARCHIVE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("question_id", "string"),
    ("thread_id", "string"),
    ("status", "string"),
    ("digest", "string"),
    ("question", "string"),
    ("policy", "string"),
    ("answer", "string"),
    ("answered_by", "string"),
    ("answered_at", "string"),
    ("reason", "string"),
    ("created_at", "string"),
    ("expires_at", "string"),
    ("resumed_at", "string"),
    ("updated_at", "string"),
    ("error", "string"),
    ("lifecycle", "string"),
    ("audit", "string"),
    ("sequence_number", "string"),
    ("archived_at", "string"),
)
# Columns holding JSON text (their value's shape is the question's).
JSON_COLUMNS = frozenset({"question", "policy", "answer", "lifecycle", "audit"})
# Firehose takes at most 500 records and 4 MiB per PutRecordBatch.
FIREHOSE_BATCH = 500
FIREHOSE_BATCH_BYTES = 4 * 1024 * 1024


class Change(Protocol):
    """One change of a ledger item, as the ledger stream's reader parses it."""

    @property
    def key(self) -> str: ...

    @property
    def sequence_number(self) -> str: ...

    @property
    def old(self) -> Mapping[str, Any] | None: ...

    @property
    def new(self) -> Mapping[str, Any] | None: ...


def _json(value: Any) -> str | None:
    return None if value is None else exact_json.dumps(value, sort_keys=True, ensure_ascii=False)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _stamp(moment: datetime) -> str:
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def archive_record(question: QuestionRecord, *, sequence_number: str, archived_at: str) -> dict[str, Any]:
    """The archive record of ``question`` (its :data:`ARCHIVE_COLUMNS`, and its ``date`` partition)."""
    values: dict[str, Any] = {
        "question_id": question.question_id,
        "thread_id": question.thread_id,
        "status": question.status,
        "digest": question.digest,
        "question": _json(question.question),
        "policy": _json(question.policy),
        "answer": _json(question.answer),
        "answered_by": question.answered_by,
        "answered_at": question.answered_at,
        "reason": question.reason,
        "created_at": question.created_at,
        "expires_at": question.expires_at,
        "resumed_at": question.resumed_at,
        "updated_at": question.updated_at,
        "error": question.error,
        "lifecycle": _json(question.lifecycle),
        "audit": _json(audit_of(question)),
        "sequence_number": sequence_number,
        "archived_at": archived_at,
    }
    record = {
        name: _text(values[name]) if name not in JSON_COLUMNS else values[name] for name, _ in ARCHIVE_COLUMNS
    }
    record[PARTITION_KEY] = archived_at[:10]
    return record


def _decided(image: Mapping[str, Any] | None) -> QuestionRecord | None:
    if image is None:
        return None
    status = image.get("status", {}).get("S") if isinstance(image.get("status"), Mapping) else None
    if status not in DECIDED:
        return None
    return QuestionRecord.from_item(image)


_VOLATILE = frozenset({"sequence_number", "archived_at", PARTITION_KEY})


def _content(record: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in record.items() if name not in _VOLATILE}


def archive_records(
    changes: Iterable[Change], *, now: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> list[dict[str, Any]]:
    """The archive records ``changes`` make: one per change that altered what a decided question holds.

    A question's first decided state (the change into answered, expired or revoked) makes one, and
    so does each later change of its status, answer, lifecycle or receipt. Open questions, threads,
    runs and removals (TTL's included: the question was archived when it was decided) make none.
    """
    records: list[dict[str, Any]] = []
    for change in changes:
        if not change.key.startswith(QUESTION_PREFIX):
            continue
        new = _decided(change.new)
        if new is None:
            continue
        stamp = _stamp(now())
        record = archive_record(new, sequence_number=change.sequence_number, archived_at=stamp)
        old = _decided(change.old)
        if old is not None and _content(
            archive_record(old, sequence_number=change.sequence_number, archived_at=stamp)
        ) == _content(record):
            continue
        records.append(record)
    return records


def to_line(record: Mapping[str, Any]) -> str:
    """One JSON line (no partition column: the folder holds it, as Firehose's prefix does)."""
    return json.dumps({k: v for k, v in record.items() if k != PARTITION_KEY}, ensure_ascii=False) + "\n"


def firehose_batches(lines: Sequence[bytes]) -> list[list[bytes]]:
    """``lines`` in the fewest PutRecordBatch calls, in order: at most 500 records and 4 MiB each.

    Examples
    --------
    >>> [len(b) for b in firehose_batches([b"x"] * 1001)]
    [500, 500, 1]
    >>> [len(b) for b in firehose_batches([b"x" * 3_000_000] * 3)]
    [1, 1, 1]
    """
    batches: list[list[bytes]] = []
    size = 0
    for line in lines:
        if not batches or len(batches[-1]) == FIREHOSE_BATCH or size + len(line) > FIREHOSE_BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(line)
        size += len(line)
    return batches


class Sink(Protocol):
    """Where archive records go; ``write`` raises when they were not all taken (the change is retried)."""

    def write(self, records: Sequence[Mapping[str, Any]]) -> None: ...


class JsonLinesSink:
    """The local archive: ``<folder>/audit/date=YYYY-MM-DD/audit.jsonl``, one record per line."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._lock = threading.Lock()

    def path_for(self, day: str) -> Path:
        return self.folder / ARCHIVE_PREFIX / f"{PARTITION_KEY}={day}" / LOCAL_FILE

    def write(self, records: Sequence[Mapping[str, Any]]) -> None:
        by_day: dict[str, list[str]] = defaultdict(list)
        for record in records:
            by_day[str(record[PARTITION_KEY])].append(to_line(record))
        with self._lock:
            for day, lines in by_day.items():
                path = self.path_for(day)
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("a", encoding="utf-8") as handle:
                    handle.write("".join(lines))

    def read(self) -> list[dict[str, Any]]:
        """Every record written so far, oldest day first (tests, and a quick look)."""
        records: list[dict[str, Any]] = []
        for path in sorted(self.folder.glob(f"{ARCHIVE_PREFIX}/{PARTITION_KEY}=*/{LOCAL_FILE}")):
            day = path.parent.name.split("=", 1)[1]
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    records.append(json.loads(line) | {PARTITION_KEY: day})
        return records


class ArchiveError(RuntimeError):
    """Firehose did not take every record; the stream retries the change."""


class FirehoseSink:
    """The deployed archive: ``PutRecordBatch`` to the delivery stream that writes to the S3 bucket."""

    def __init__(self, stream_name: str, client: FirehoseClient | None = None) -> None:
        if client is None:
            import boto3

            client = boto3.client("firehose", config=CLIENT_CONFIG)
        self.stream_name = stream_name
        self.client = client

    def write(self, records: Sequence[Mapping[str, Any]]) -> None:
        for batch in firehose_batches([to_line(record).encode() for record in records]):
            response = self.client.put_record_batch(
                DeliveryStreamName=self.stream_name, Records=[{"Data": data} for data in batch]
            )
            failed = int(response.get("FailedPutCount", 0))
            if failed:
                codes = {
                    r.get("ErrorCode") for r in response.get("RequestResponses", []) if r.get("ErrorCode")
                }
                raise ArchiveError(
                    f"Firehose refused {failed} of {len(batch)} archive records "
                    f"({', '.join(sorted(map(str, codes)))})"
                )


class ArchiveConsumer:
    """The ledger stream's consumer that archives decided questions into ``sink``, once per batch.

    ``handle`` gathers a change's record; ``flush`` (the stream calls it once the batch's records
    are handled) writes them all with one ``write``: deployed, one PutRecordBatch per batch of the
    ledger's stream (per 500 records or 4 MiB), not one per change. A failed write is raised, and
    every record of the batch from the earliest gathered one is handed over again.

    Examples
    --------
    >>> consumer = ArchiveConsumer(JsonLinesSink(Path("/tmp/archive")))  # doctest: +SKIP
    >>> consumer.handle(change)  # doctest: +SKIP
    >>> consumer.flush()  # doctest: +SKIP
    """

    name = "archive"

    def __init__(self, sink: Sink, *, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.sink = sink
        self.now = now
        self._gathered: list[dict[str, Any]] = []

    def handle(self, change: Change) -> None:
        self._gathered += archive_records([change], now=self.now)

    @property
    def pending(self) -> int:
        return len(self._gathered)

    def flush(self) -> None:
        records, self._gathered = self._gathered, []
        if records:
            self.sink.write(records)


def archive_sink(*, stream_name: str | None, folder: str | None, firehose: Any = None) -> Sink | None:
    """The sink the settings name: Firehose deployed, a folder locally, none when neither is set."""
    if stream_name:
        return FirehoseSink(stream_name, firehose)
    if folder:
        return JsonLinesSink(Path(folder))
    return None
