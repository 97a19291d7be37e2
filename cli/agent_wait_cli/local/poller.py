"""The local event source mapping: inbox messages to the runner handler, as Lambda hands them.

What Lambda's SQS event source mapping does, and so what this does:

- receives batches of up to 10 messages with the queue's own visibility timeout (none is passed,
  so the queue's ``VisibilityTimeout`` applies, as for Lambda);
- calls the handler with one SQS event per batch;
- deletes the messages that succeeded; a message named in ``batchItemFailures`` stays in the queue
  and comes back when its visibility timeout ends; a handler that raises, or that reports a
  failure without a usable ``itemIdentifier``, fails the whole batch;
- after ``maxReceiveCount`` receives a message goes to the dead-letter queue. The queue does that,
  not the consumer: on AWS and in moto (checked in moto 5.2.5's ``receive_message``) a receive
  moves a message whose receive count has reached ``maxReceiveCount`` to the DLQ instead of
  returning it. The poller therefore never moves messages itself; doing so would double-handle.

The mapping itself is :func:`wait_service.runs.sqs_events.consume_batch`, the one emulation shared with
the tests; this module adds the loop, the watchers that print the stack's event lines, and the
logging.

Receives use short polling (``WaitTimeSeconds=0``): the local moto server serves one request at a
time, so a long poll would hold every other AWS call for its whole wait. Instead the poller waits
between empty polls on a wake-up: :meth:`InboxPoller.wake` (the local stack calls it after each
POST to the api, which may have queued a run or a resume) ends the wait at once, so a reply reaches
the runner without waiting out a fixed sleep; ``idle_sleep`` only bounds the wait, for messages
that come another way or become visible again on their own (a visibility timeout running out).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from wait_service.runs.sqs_events import MAX_BATCH, BatchResult, consume_batch

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

logger = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any], Any], Any]


class InboxPoller:
    """Hand messages from ``queue_url`` to ``handler`` until stopped.

    Parameters
    ----------
    sqs:
        boto3 SQS client.
    queue_url, queue_arn, region:
        The queue, and what the SQS event says about it.
    handler:
        A Lambda handler for SQS events, returning ``{"batchItemFailures": [...]}``.
    context_factory:
        Builds the Lambda context for each invocation.
    batch_size:
        At most 10, like the event source mapping's ``BatchSize`` for SQS.
    idle_sleep:
        Longest wait between empty polls; :meth:`wake` ends a wait early.
    sleep:
        Injected for tests: called with ``idle_sleep`` instead of waiting for a wake-up.
    on_receive:
        Called with each batch before the handler sees it.
    on_batch:
        Called with each :class:`~wait_service.runs.sqs_events.BatchResult` after its deletes.

    Examples
    --------
    >>> poller = InboxPoller(sqs, url, arn, "us-east-1", handler)  # doctest: +SKIP
    >>> poller.poll_once()  # doctest: +SKIP
    >>> poller.start(); poller.stop()  # doctest: +SKIP
    """

    def __init__(
        self,
        sqs: SQSClient,
        queue_url: str,
        queue_arn: str,
        region: str,
        handler: Handler,
        *,
        context_factory: Callable[[], Any] | None = None,
        batch_size: int = MAX_BATCH,
        idle_sleep: float = 0.2,
        sleep: Callable[[float], Any] | None = None,
        on_receive: Callable[[list[MessageTypeDef]], None] | None = None,
        on_batch: Callable[[BatchResult], None] | None = None,
    ) -> None:
        if not 1 <= batch_size <= MAX_BATCH:
            raise ValueError(f"batch_size must be 1..{MAX_BATCH}")
        self._sqs = sqs
        self._queue_url = queue_url
        self._queue_arn = queue_arn
        self._region = region
        self._handler = handler
        self._context_factory = context_factory or (lambda: None)
        self._batch_size = batch_size
        self._idle_sleep = idle_sleep
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._sleep = sleep or self._wake.wait
        self._on_receive = on_receive
        self._on_batch = on_batch
        self._thread: threading.Thread | None = None

    def poll_once(self) -> BatchResult | None:
        """Receive one batch and hand it over; ``None`` when the queue had nothing visible."""
        result = consume_batch(
            self._sqs,
            self._queue_url,
            # A fresh context per invocation, built when the batch is handed over (its deadline
            # starts then, as Lambda's does), not on every empty poll.
            lambda event, _: self._handler(event, self._context_factory()),
            None,
            queue_arn=self._queue_arn,
            region=self._region,
            max_messages=self._batch_size,
            on_receive=lambda messages: self._watch(self._on_receive, messages),
        )
        if not result.received:
            return None
        if result.error is not None:
            logger.error(
                "runner handler raised; the batch returns to the queue",
                exc_info=(type(result.error), result.error, result.error.__traceback__),
            )
        self._watch(self._on_batch, result)
        return result

    @staticmethod
    def _watch(watcher: Callable[[Any], None] | None, value: Any) -> None:
        if watcher is None:
            return
        try:
            watcher(value)
        except Exception:
            # A watcher (the event lines) never stops the poller.
            logger.exception("poller watcher raised")

    def wake(self) -> None:
        """End the current wait between empty polls (a message was probably just sent)."""
        self._wake.set()

    def run(self) -> None:
        """Poll until :meth:`stop`; transient errors are logged and retried after a pause."""
        while not self._stop.is_set():
            # Cleared before the receive: a message sent during it sets the flag again, so the
            # wait below returns at once instead of missing that wake-up.
            self._wake.clear()
            try:
                outcome = self.poll_once()
            except Exception:
                # The mapping keeps polling through AWS errors.
                if self._stop.is_set():
                    break
                logger.exception("polling %s failed", self._queue_url)
                outcome = None
            if outcome is None:
                self._sleep(self._idle_sleep)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name="local-inbox-poller", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop after the batch in hand (a running invocation is never cut short)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
        self._thread = None
