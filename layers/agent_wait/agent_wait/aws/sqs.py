"""Send envelopes to an SQS queue (FIFO: deduplicated on the dedupe key)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3

from agent_wait.announce.base import BaseAnnounce
from agent_wait.aws._attributes import message_attributes

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_wait.envelope import Envelope
    from agent_wait.events import ResolutionEvent

__all__ = ["SqsAnnounce"]


class SqsAnnounce(BaseAnnounce):
    """Send the envelope JSON to ``queue_url``.

    On a FIFO queue (URL ending ``.fifo``): ``MessageDeduplicationId = dedupe_key`` so a
    republished question is dropped within the deduplication window, and
    ``MessageGroupId = thread_id`` so one thread's questions stay in order.

    Parameters
    ----------
    queue_url:
        The queue.
    client:
        A boto3 SQS client; ``boto3.client("sqs")`` when ``None``.

    Examples
    --------
    >>> announce = SqsAnnounce("https://sqs.eu-west-1.amazonaws.com/123/outbox.fifo")  # doctest: +SKIP
    """

    def __init__(self, queue_url: str, client: Any = None, *, name: str = "sqs") -> None:
        self.queue_url = queue_url
        self.fifo = queue_url.endswith(".fifo")
        self.client = client if client is not None else boto3.client("sqs")
        self.name = name

    def deliver(self, envelope: Envelope | ResolutionEvent) -> None:
        self.client.send_message(QueueUrl=self.queue_url, **self._message(envelope))

    def deliver_batch(self, envelopes: Sequence[Envelope | ResolutionEvent]) -> None:
        """Send ``envelopes`` in order in ``SendMessageBatch`` calls (:mod:`agent_wait.aws.batches`).

        Raises :class:`agent_wait.aws.batches.PartialDelivery` naming every envelope not known
        to be delivered; the others were.
        """
        # Imported here: a sender that delivers one envelope at a time never loads it.
        from agent_wait.aws.batches import BatchEntry, send_in_batches

        entries = [BatchEntry.of(self._message(envelope), "MessageBody") for envelope in envelopes]
        send_in_batches(
            entries, lambda batch: self.client.send_message_batch(QueueUrl=self.queue_url, Entries=batch)
        )

    def _message(self, envelope: Envelope | ResolutionEvent) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "MessageBody": envelope.to_json(),
            "MessageAttributes": message_attributes(envelope),
        }
        if self.fifo:
            fields["MessageDeduplicationId"] = envelope.dedupe_key
            fields["MessageGroupId"] = envelope.thread_id
        return fields
