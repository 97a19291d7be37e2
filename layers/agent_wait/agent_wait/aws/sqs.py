"""Send envelopes to an SQS queue (FIFO: deduplicated on the dedupe key)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3

from agent_wait.announce.base import BaseAnnounce
from agent_wait.aws._attributes import message_attributes

if TYPE_CHECKING:
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
        kwargs: dict[str, Any] = {
            "QueueUrl": self.queue_url,
            "MessageBody": envelope.to_json(),
            "MessageAttributes": message_attributes(envelope),
        }
        if self.fifo:
            kwargs["MessageDeduplicationId"] = envelope.dedupe_key
            kwargs["MessageGroupId"] = envelope.thread_id
        self.client.send_message(**kwargs)
