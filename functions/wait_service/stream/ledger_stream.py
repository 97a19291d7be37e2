"""The ledger's stream: what follows a recorded change happens from here, with no client.

The api (and the lifecycle function, and the runner) commit a request with one ledger write and
answer; everything that must follow it is read back from the ledger table's DynamoDB stream (both
images of every change) by one function, the dispatcher. It hands each change to a short list of
:class:`Consumer` objects, in order; a consumer that raises fails the record, and Lambda's event
source mapping retries it (splitting the batch, a bounded number of times) before the record's
metadata goes to the stream's DLQ. Every consumer therefore runs at least once per change and must
be idempotent: each sends under a deduplication id named by the change (a question or run id).

The consumers today:

- :class:`OutboxDispatcher`: a question moving into a status that resumes its thread (answered,
  expired, revoked: :data:`wait_service.ledger.statuses.RESUMING`) -> the resume message on the inbox;
  a new run record (``run:<run_id>``, written with the thread item by
  :meth:`~wait_service.ledger.ThreadStore.queue_run`) -> the start message.
- :class:`~wait_service.stream.resolution_events.ResolutionEvents`: a question answered, expired,
  revoked, resumed or failing to resume, a run ending -> its event on the topic and the outbox.
- :class:`wait_service.stream.archive.ArchiveConsumer`: each change of a decided question -> one record
  of the audit archive (Firehose deployed, JSON Lines locally), when an archive is configured.
- :class:`wait_service.stream.analytics.AnalyticsConsumer`: a decision -> the approval counters.

Each is a :class:`BatchConsumer`: it gathers a batch's work and writes it once the batch is
handled, all four at once. The messages and events go in batch calls of up to 10
(:mod:`agent_wait.aws.batches`), each thread's in order; a consumer that wrote part of its work
names the record to retry from (:class:`BatchNotWritten`).

More work that follows a change is one more consumer in the list given to :class:`LedgerStream`,
never a second reader of the stream.

Examples
--------
>>> change = LedgerChange.from_record({
...     "eventName": "MODIFY",
...     "dynamodb": {
...         "SequenceNumber": "1",
...         "Keys": {"dedupe_key": {"S": "wait.created:q-1"}},
...         "OldImage": {"dedupe_key": {"S": "wait.created:q-1"}, "status": {"S": "raised"}},
...         "NewImage": {"dedupe_key": {"S": "wait.created:q-1"}, "status": {"S": "answered"}},
...     },
... })
>>> change.kind, change.old_value("status"), change.new_value("status"), change.decided
('question', 'raised', 'answered', True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from aws_lambda_powertools.metrics import MetricUnit

from agent_wait.aws.batches import PartialDelivery
from wait_service.ledger import QuestionRecord, from_attribute
from wait_service.ledger.statuses import RESUMING
from wait_service.metric_names import RESUMES_DISPATCHED, STARTS_DISPATCHED
from wait_service.observability import logger, metrics
from wait_service.runs.async_answers import answer_run_id, is_async_question
from wait_service.workers import shared_pool

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

    from wait_service.ledger import Ledger
    from wait_service.runs.inbox import Inbox, OutgoingMessage

EventName = Literal["INSERT", "MODIFY", "REMOVE"]
ItemKind = Literal["question", "thread", "run", "other"]
_PREFIXES: tuple[tuple[str, ItemKind], ...] = (
    ("wait.created:", "question"),
    ("thread:", "thread"),
    ("run:", "run"),
)


@dataclass(frozen=True)
class LedgerChange:
    """One change of one ledger item, as its stream record tells it.

    ``old`` and ``new`` are the item's images in DynamoDB's attribute form (``{"S": ...}``), as
    the ledger's own readers (:meth:`QuestionRecord.from_item`) take them; ``None`` when the item
    did not exist before (an insert) or no longer exists (a removal, TTL's included).
    """

    event_name: EventName
    key: str
    sequence_number: str
    old: Mapping[str, Any] | None = None
    new: Mapping[str, Any] | None = field(default=None)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> LedgerChange:
        """Parse a stream record as Lambda hands it over (``Records[i]`` of the event).

        Raises
        ------
        ValueError
            The record is not a ledger change (no ``dedupe_key``, an unknown event name).
        """
        event_name = record.get("eventName")
        if event_name not in ("INSERT", "MODIFY", "REMOVE"):
            raise ValueError(f"not a stream record: eventName {event_name!r}")
        stream = record.get("dynamodb") or {}
        keys = stream.get("Keys") or {}
        key = (keys.get("dedupe_key") or {}).get("S")
        if not isinstance(key, str):
            raise ValueError("a ledger stream record names its item by dedupe_key")
        return cls(
            event_name=event_name,
            key=key,
            sequence_number=str(stream.get("SequenceNumber", "")),
            old=stream.get("OldImage"),
            new=stream.get("NewImage"),
        )

    @property
    def kind(self) -> ItemKind:
        """What the item is, from its key: a question, a thread, a run's start record."""
        for prefix, kind in _PREFIXES:
            if self.key.startswith(prefix):
                return kind
        return "other"

    def old_value(self, name: str) -> Any:
        return _value(self.old, name)

    def new_value(self, name: str) -> Any:
        return _value(self.new, name)

    @property
    def decided(self) -> bool:
        """A question moved into a status that resumes its thread (the change that decided it)."""
        if self.kind != "question" or self.new is None:
            return False
        status = self.new_value("status")
        return status in RESUMING and self.old_value("status") != status

    @property
    def new_run(self) -> bool:
        """A run's start record was written: the run waits for its start message."""
        return (
            self.kind == "run"
            and self.event_name == "INSERT"
            and self.new_value("kind") == "run"
            and isinstance(self.new_value("input"), str)
        )

    def question(self) -> QuestionRecord:
        """The question as the change left it."""
        if self.kind != "question" or self.new is None:
            raise ValueError(f"{self.key} is not a question as it stands")
        return QuestionRecord.from_item(self.new)


def _value(image: Mapping[str, Any] | None, name: str) -> Any:
    if image is None or name not in image:
        return None
    return from_attribute(image[name])


class Consumer(Protocol):
    """Work that follows ledger changes; ``handle`` runs at least once per change, so is idempotent.

    It ignores the changes it has no business with, and raises to have the record retried.
    """

    name: str

    def handle(self, change: LedgerChange) -> None: ...


class BatchConsumer(Consumer, Protocol):
    """A consumer whose work is written once per batch: ``handle`` gathers it, ``flush`` writes it.

    ``flush`` raises when the batch's work was not all written; every record the consumer gathered
    from is then retried (``handle`` and ``flush`` are idempotent like any consumer's), and the work
    gathered is dropped either way, so a batch never leaks into the next.
    """

    @property
    def pending(self) -> int:
        """How much work is gathered and not yet written (grows when ``handle`` gathers some)."""
        ...

    def flush(self) -> None: ...


class BatchNotWritten(Exception):
    """A batch consumer's ``flush`` that wrote the work of the records before ``retry_from`` only.

    The stream retries from ``retry_from`` (a record's sequence number) instead of from the
    first record the consumer gathered work from.
    """

    def __init__(self, retry_from: str, reason: str) -> None:
        self.retry_from = retry_from
        super().__init__(f"not written from record {retry_from} on: {reason}")


def _sequence_key(sequence_number: str) -> tuple[int, str]:
    """Orders a shard's sequence numbers (decimal strings of varying length) as numbers."""
    return len(sequence_number), sequence_number


def earliest(sequence_numbers: Iterable[str]) -> str:
    """The first of a shard's ``sequence_numbers``."""
    return min(sequence_numbers, key=_sequence_key)


def first_undelivered(sequence_numbers: Sequence[str], failure: PartialDelivery) -> str:
    """The first record whose item a batch call left undelivered: ``sequence_numbers`` are the
    records of the batch's items, in the batch's order.

    Examples
    --------
    >>> first_undelivered(["120", "99", "1000"], PartialDelivery([0, 2], ["Throttled: slow down"]))
    '120'
    """
    return earliest(sequence_numbers[i] for i in failure.undelivered)


def comes_before(sequence_number: str, other: str) -> bool:
    """Whether the record ``sequence_number`` comes before ``other`` in their shard."""
    return _sequence_key(sequence_number) < _sequence_key(other)


class LedgerStream:
    """Hands each record of the ledger's stream to every consumer, in order.

    A :class:`BatchConsumer`'s work is written once per batch (:meth:`finish_batch`), not once
    per record: the audit archive puts a batch's records with one call, the relay sends its
    messages in batch calls.

    Parameters
    ----------
    consumers:
        The work that follows a change; the first to raise fails the record (those after it run
        on the retry, those before it run again: both are idempotent).

    Examples
    --------
    >>> stream = LedgerStream([OutboxDispatcher(ledger, inbox)])  # doctest: +SKIP
    >>> stream.process_record(record)  # doctest: +SKIP
    >>> failed = stream.finish_batch()  # doctest: +SKIP
    """

    def __init__(self, consumers: Sequence[Consumer]) -> None:
        self.consumers = list(consumers)
        # Per batch consumer: the sequence numbers of the records it gathered work from.
        self._gathered: dict[int, list[str]] = {}

    def process_record(self, record: DynamoDBRecord) -> None:
        """The batch processor's record handler: a batch consumer's work waits for :meth:`finish_batch`."""
        self._handle(record.raw_event)

    def process(self, record: Mapping[str, Any]) -> None:
        """One record as a batch of its own: every consumer's work is written before this returns.

        Raises what a consumer or a batch consumer's ``flush`` raised.
        """
        try:
            self._handle(record)
        finally:
            errors = self._flush()
        if errors:
            raise errors[0][1]

    def finish_batch(self) -> list[str]:
        """Write every batch consumer's gathered work; the sequence numbers to retry from, if any failed.

        For each batch consumer whose ``flush`` raised, the record it names (:class:`BatchNotWritten`)
        or else the earliest record it gathered work from is returned: the mapping retries the
        batch from there (its later records with it).
        """
        return [sequence for sequence, _ in self._flush()]

    def _handle(self, record: Mapping[str, Any]) -> None:
        try:
            change = LedgerChange.from_record(record)
        except ValueError as exc:
            # Not ours to understand, and retrying would never change that: logged, not retried,
            # so the shard does not stall behind it.
            logger.warning("ledger stream record skipped", extra={"error": str(exc)})
            return
        for consumer in self.consumers:
            before = getattr(consumer, "pending", 0)
            consumer.handle(change)
            if getattr(consumer, "pending", 0) > before:
                self._gathered.setdefault(id(consumer), []).append(change.sequence_number)

    def _flush(self) -> list[tuple[str, Exception]]:
        gathered, self._gathered = self._gathered, {}
        flushing = [c for c in self.consumers if getattr(c, "flush", None) is not None]
        errors: list[tuple[str, Exception]] = []
        for consumer, exc in zip(flushing, _flush_at_once(flushing), strict=True):
            if exc is None:
                continue
            sequences = gathered.get(id(consumer))
            if not sequences:
                raise exc
            # A consumer that wrote part of its work names the record to retry from.
            first = getattr(exc, "retry_from", None) or earliest(sequences)
            logger.error(
                "ledger stream batch not written",
                exc_info=exc,
                extra={"consumer": consumer.name, "records": len(sequences), "retry_from": first},
            )
            errors.append((first, exc))
        return errors


# Threads writing the consumers' work of a batch at once: one for each consumer there is.
_FLUSH_WORKERS = 4


def _flush_at_once(consumers: Sequence[Any]) -> list[Exception | None]:
    """Each consumer's ``flush``, at once when more than one has work (the inbox's sends, the
    events, the archive's put and the counters' transaction do not wait on each other); what each
    raised, in order (``None``: it wrote everything)."""

    def flush(consumer: Any) -> Exception | None:
        try:
            consumer.flush()
        except Exception as exc:
            return exc
        return None

    busy = [c for c in consumers if getattr(c, "pending", 0)]
    if len(busy) < 2:
        return [flush(c) for c in consumers]
    pool = shared_pool("stream-flush", _FLUSH_WORKERS)
    futures = {id(c): pool.submit(flush, c) for c in busy}
    return [futures[id(c)].result() if id(c) in futures else flush(c) for c in consumers]


class OutboxDispatcher:
    """Enqueues what a recorded decision or start needs: the transactional outbox's relay.

    A batch consumer: each change's message is gathered, and a batch's messages go to the inbox
    in ``SendMessageBatch`` calls that keep each thread's order (one call for up to 10 threads'
    messages instead of one call a message). The FIFO deduplication id is the change's own id
    (``resume:<question_id>``, ``run:<thread_id>:<run_id>``), so a record handled twice within
    SQS's five-minute window sends one message; past it, the runner's ledger checks refuse a
    second resume of a question and a second run of a run id.

    Parameters
    ----------
    ledger:
        Where an async question's answer run is queued. Nothing is written on the question: the
        decision already guarantees its resume, and a write there would contend with the
        runner's transaction that records the resume.
    inbox:
        Where starts and resumes go.
    """

    name = "outbox"

    def __init__(self, ledger: Ledger, inbox: Inbox) -> None:
        self.ledger = ledger
        self.inbox = inbox
        self._messages: list[_Outgoing] = []

    @property
    def pending(self) -> int:
        return len(self._messages)

    def handle(self, change: LedgerChange) -> None:
        if change.decided:
            self.enqueue_resume(change.question(), change.sequence_number)
        elif change.new_run:
            self.enqueue_start(change)

    def enqueue_resume(self, question: QuestionRecord, sequence_number: str) -> None:
        """Gather the resume of a decided question; the runner reads the answer from the ledger.

        The send is the relay's last step: the dispatcher notes nothing on the question (its
        metric and log line say the resume went).

        An async question's thread is not parked on it: the runner starts a new run with the
        answer as input, so the thread is marked queued for that run now, before its message is
        sent (when it is parked on other questions, the runner keeps the run for after them).
        """
        if is_async_question(question):
            self.ledger.queue_answer_run(question.thread_id, answer_run_id(question.question_id))
        self._messages.append(
            _Outgoing(
                sequence_number,
                self.inbox.resume_message(question.thread_id, question.question_id),
                RESUMES_DISPATCHED,
                "resumes enqueued",
                {"question_ids": question.question_id, "thread_ids": question.thread_id},
            )
        )

    def enqueue_start(self, change: LedgerChange) -> None:
        """Gather the start message of a run the ledger recorded queued."""
        thread_id = str(change.new_value("thread_id"))
        run_id = str(change.new_value("run_id"))
        self._messages.append(
            _Outgoing(
                change.sequence_number,
                self.inbox.start_json_message(thread_id, str(change.new_value("input")), run_id=run_id),
                STARTS_DISPATCHED,
                "starts enqueued",
                {"run_ids": run_id, "thread_ids": thread_id},
            )
        )

    def flush(self) -> None:
        """Send the gathered messages; raises :class:`BatchNotWritten` from the first record whose
        message did not go (the messages of later records are sent again on the retry)."""
        messages, self._messages = self._messages, []
        if not messages:
            return
        try:
            self.inbox.send_batch([m.fields for m in messages])
        except PartialDelivery as exc:
            # Retried from the first record whose message may not have gone: those before it went.
            cut = first_undelivered([m.sequence_number for m in messages], exc)
            _sent([m for m in messages if comes_before(m.sequence_number, cut)])
            raise BatchNotWritten(cut, str(exc)) from exc
        _sent(messages)


@dataclass(frozen=True)
class _Outgoing:
    """A message the relay gathered: its record, request fields, metric, and the log line of its
    kind with the ids it adds to each of the line's lists."""

    sequence_number: str
    fields: OutgoingMessage
    metric: str
    log: str
    ids: dict[str, str]


def _sent(messages: Sequence[_Outgoing]) -> None:
    """Count and log the messages that went: one metric value and one log line per kind (starts,
    resumes) for the whole batch, listing each message's ids in order, not a line per message."""
    kinds: dict[str, list[_Outgoing]] = {}
    for message in messages:
        kinds.setdefault(message.log, []).append(message)
    for log, sent in kinds.items():
        metrics.add_metric(name=sent[0].metric, unit=MetricUnit.Count, value=len(sent))
        lists = {key: [m.ids[key] for m in sent] for key in sent[0].ids}
        logger.info(log, extra={"count": len(sent), **lists})
