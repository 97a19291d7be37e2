"""The local event source mapping for the ledger's DynamoDB stream: records to the dispatcher.

What Lambda's DynamoDB stream event source mapping does, and so what this does:

- reads the stream's shard in order from its start (``TRIM_HORIZON``; the local table is new with
  the stack), at most ``batch_size`` records at a time;
- calls the handler with one Lambda-shaped stream event per batch (``Records``, each with its
  ``eventSourceARN`` and ``ApproximateCreationDateTime`` in epoch seconds);
- moves on past the records that succeeded; with ``batchItemFailures`` the lowest sequence number
  named is where the next read starts (the records before it are done); a handler that raises, or
  a failure without a usable ``itemIdentifier``, fails the whole batch;
- a failed batch is retried split in two (``BisectBatchOnFunctionError``) down to the failing
  record, at most ``max_retry_attempts`` times, then the batch's metadata goes to the on-failure
  destination (the stream's DLQ) and reading goes on after it.

Retries wait between attempts (doubling from ``idle_sleep``, capped at :data:`MAX_BACKOFF_SECONDS`)
so a queue that refuses sends for a while is ridden out, and work reaches the runner within a few
seconds of the queue taking sends again.

moto 5.2.5 keeps one shard per table and reads records by sequence number; a transaction it rolls
back replaces the table object, shard included, so each read asks for a fresh iterator
(``AFTER_SEQUENCE_NUMBER`` the last record done) instead of following ``NextShardIterator``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient
    from mypy_boto3_sqs import SQSClient

logger = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any], Any], Any]
# The longest wait between two attempts of a failing batch.
MAX_BACKOFF_SECONDS = 2.0


def lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A record as ``GetRecords`` returns it, shaped as Lambda hands it to the function.

    Examples
    --------
    >>> shaped = lambda_record(
    ...     {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "1",
    ...      "ApproximateCreationDateTime": datetime(2026, 1, 1, tzinfo=UTC)}}, "arn:stream")
    >>> shaped["eventSourceARN"], shaped["dynamodb"]["ApproximateCreationDateTime"]
    ('arn:stream', 1767225600.0)
    """
    shaped = dict(record)
    stream = dict(shaped.get("dynamodb") or {})
    created = stream.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        stream["ApproximateCreationDateTime"] = created.astimezone(UTC).timestamp()
    shaped["dynamodb"] = stream
    shaped["eventSourceARN"] = stream_arn
    return shaped


class StreamReader:
    """Hand the records of ``stream_arn`` to ``handler`` until stopped.

    Parameters
    ----------
    streams:
        boto3 DynamoDB Streams client.
    stream_arn:
        The table's ``LatestStreamArn``.
    handler:
        A Lambda handler for stream events, returning ``{"batchItemFailures": [...]}``.
    context_factory:
        Builds the Lambda context for each invocation.
    batch_size, max_retry_attempts:
        As the event source mapping's ``BatchSize`` and ``MaximumRetryAttempts``.
    sqs, dlq_url:
        The on-failure destination: the metadata of a batch that failed every attempt.
    idle_sleep:
        Longest wait between empty reads; :meth:`wake` ends a wait early.
    on_batch:
        Called with the records of each batch that was handed over and succeeded.

    Examples
    --------
    >>> reader = StreamReader(streams, arn, handler)  # doctest: +SKIP
    >>> reader.poll_once()  # doctest: +SKIP
    >>> reader.start(); reader.stop()  # doctest: +SKIP
    """

    def __init__(
        self,
        streams: DynamoDBStreamsClient,
        stream_arn: str,
        handler: Handler,
        *,
        context_factory: Callable[[], Any] | None = None,
        batch_size: int = 10,
        max_retry_attempts: int = 5,
        sqs: SQSClient | None = None,
        dlq_url: str | None = None,
        idle_sleep: float = 0.2,
        on_batch: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> None:
        if not 1 <= batch_size <= 10000:
            raise ValueError("batch_size must be 1..10000")
        self._streams = streams
        self._stream_arn = stream_arn
        self._handler = handler
        self._context_factory = context_factory or (lambda: None)
        self._batch_size = batch_size
        self._max_retry_attempts = max_retry_attempts
        self._sqs = sqs
        self._dlq_url = dlq_url
        self._idle_sleep = idle_sleep
        self._on_batch = on_batch
        self._shard_id: str | None = None
        # The sequence number of the last record done (None: none yet, read from the start).
        self._position: str | None = None
        # A failing batch: the size it is retried at, and how many retries it has had.
        self._size = batch_size
        self._attempts = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.failed_batches = 0

    # -- one read ---------------------------------------------------------------------------------

    def poll_once(self) -> int | None:
        """Read one batch and hand it over.

        Returns the number of records done, 0 when the batch failed (it is retried), ``None``
        when the stream had nothing new.
        """
        records = self._read(self._size)
        if not records:
            return None
        event = {"Records": [lambda_record(record, self._stream_arn) for record in records]}
        failed_at = self._invoke(event)
        if failed_at is None:
            self._done(records)
            return len(records)
        done = [r for r in records if int(r["dynamodb"]["SequenceNumber"]) < failed_at]
        if done:
            # The records before the first failure are done; the retry starts at the failure.
            self._done(done)
        failing = [r for r in records if int(r["dynamodb"]["SequenceNumber"]) >= failed_at]
        self._failed(failing)
        return len(done)

    def _read(self, limit: int) -> list[dict[str, Any]]:
        if self._shard_id is None:
            shards = self._streams.describe_stream(StreamArn=self._stream_arn)["StreamDescription"]["Shards"]
            if not shards:
                return []
            self._shard_id = shards[0]["ShardId"]
        if self._position is None:
            iterator = self._streams.get_shard_iterator(
                StreamArn=self._stream_arn, ShardId=self._shard_id, ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
        else:
            iterator = self._streams.get_shard_iterator(
                StreamArn=self._stream_arn,
                ShardId=self._shard_id,
                ShardIteratorType="AFTER_SEQUENCE_NUMBER",
                SequenceNumber=self._position,
            )["ShardIterator"]
        response = self._streams.get_records(ShardIterator=iterator, Limit=limit)
        return [dict(record) for record in response.get("Records", [])]

    def _invoke(self, event: dict[str, Any]) -> int | None:
        """The lowest sequence number that failed (the whole batch's first on an error), or None."""
        first = int(event["Records"][0]["dynamodb"]["SequenceNumber"])
        try:
            response = self._handler(event, self._context_factory())
        except Exception:
            logger.exception("dispatcher handler raised; the batch is retried")
            return first
        failures = (response or {}).get("batchItemFailures") or [] if isinstance(response, dict) else []
        if not failures:
            return None
        numbers: list[int] = []
        for failure in failures:
            try:
                numbers.append(int(failure["itemIdentifier"]))
            except (KeyError, TypeError, ValueError):
                return first  # no usable identifier: the whole batch failed
        return min(numbers)

    def _done(self, records: list[dict[str, Any]]) -> None:
        self._position = str(records[-1]["dynamodb"]["SequenceNumber"])
        self._size = self._batch_size
        self._attempts = 0
        if self._on_batch is not None:
            try:
                self._on_batch(records)
            except Exception:
                logger.exception("stream reader watcher raised")

    def _failed(self, records: list[dict[str, Any]]) -> None:
        self.failed_batches += 1
        if self._attempts < self._max_retry_attempts:
            self._attempts += 1
            # Bisect on error: the retry reads half as many records, down to the failing one.
            self._size = max(1, min(self._size, len(records)) // 2)
            return
        self._send_to_dlq(records)
        self._position = str(records[-1]["dynamodb"]["SequenceNumber"])
        self._size = self._batch_size
        self._attempts = 0

    def _send_to_dlq(self, records: list[dict[str, Any]]) -> None:
        """The on-failure destination's message: where the records are, not the records."""
        first, last = records[0]["dynamodb"]["SequenceNumber"], records[-1]["dynamodb"]["SequenceNumber"]
        logger.error(
            "stream records failed every attempt; their metadata goes to the DLQ",
            extra={"start": first, "end": last},
        )
        if self._sqs is None or self._dlq_url is None:
            return
        body = {
            "requestContext": {"condition": "RetryAttemptsExhausted"},
            "DDBStreamBatchInfo": {
                "shardId": self._shard_id,
                "startSequenceNumber": str(first),
                "endSequenceNumber": str(last),
                "batchSize": len(records),
                "streamArn": self._stream_arn,
            },
        }
        self._sqs.send_message(QueueUrl=self._dlq_url, MessageBody=json.dumps(body))

    def drain(self, max_batches: int = 10_000) -> int:
        """Read until the stream has nothing new (tests, and the stack's shutdown); records done.

        A batch that fails is retried at once (no backoff wait) until it succeeds or goes to the
        DLQ, as :meth:`run` would, only without the waits.
        """
        done = 0
        for _ in range(max_batches):
            count = self.poll_once()
            if count is None:
                return done
            done += count
        raise RuntimeError(f"the stream still had records after {max_batches} batches")

    # -- the loop ---------------------------------------------------------------------------------

    def backoff(self) -> float:
        """The wait before the next read: the idle wait, doubled for each retry of a failing batch."""
        if self._attempts == 0:
            return self._idle_sleep
        return float(min(MAX_BACKOFF_SECONDS, self._idle_sleep * 2 ** (self._attempts - 1)))

    def wake(self) -> None:
        """End the current wait (a ledger write probably just happened)."""
        self._wake.set()

    def run(self) -> None:
        """Read until :meth:`stop`; errors reading the stream are logged and retried after a pause."""
        while not self._stop.is_set():
            self._wake.clear()
            try:
                done = self.poll_once()
            except Exception:
                if self._stop.is_set():
                    break
                logger.exception("reading the ledger stream failed")
                done = None
            if done is None or self._attempts:
                # A retry waits out its backoff; a wake-up does not cut it short.
                if self._attempts:
                    self._stop.wait(self.backoff())
                else:
                    self._wake.wait(self._idle_sleep)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name="local-ledger-stream", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop after the batch in hand."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
        self._thread = None
