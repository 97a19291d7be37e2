"""Publish envelopes to an SNS topic."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3

from agent_wait.announce.base import BaseAnnounce
from agent_wait.aws._attributes import message_attributes

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_wait.envelope import Envelope
    from agent_wait.events import ResolutionEvent

__all__ = ["SnsAnnounce"]


class SnsAnnounce(BaseAnnounce):
    """Publish the envelope JSON to ``topic_arn`` (or a resolution event's: :mod:`agent_wait.events`).

    Message attributes ``type``, ``dedupe_key``, ``thread_id``, ``function``, ``status`` and
    ``policy_kind`` (and ``route`` on an escalation; String) let subscribers filter. On a FIFO
    topic (ARN ending ``.fifo``) the message also gets ``MessageGroupId = thread_id`` and
    ``MessageDeduplicationId = dedupe_key``.

    Parameters
    ----------
    topic_arn:
        The topic.
    client:
        A boto3 SNS client; ``boto3.client("sns")`` when ``None``.

    Examples
    --------
    >>> announce = SnsAnnounce("arn:aws:sns:eu-west-1:123456789012:wait-created")  # doctest: +SKIP
    """

    def __init__(self, topic_arn: str, client: Any = None, *, name: str = "sns") -> None:
        self.topic_arn = topic_arn
        self.fifo = topic_arn.endswith(".fifo")
        self.client = client if client is not None else boto3.client("sns")
        self.name = name

    def deliver(self, envelope: Envelope | ResolutionEvent) -> None:
        self.client.publish(TopicArn=self.topic_arn, **self._message(envelope))

    def deliver_batch(self, envelopes: Sequence[Envelope | ResolutionEvent]) -> None:
        """Publish ``envelopes`` in order in ``PublishBatch`` calls (:mod:`agent_wait.aws.batches`).

        Raises :class:`agent_wait.aws.batches.PartialDelivery` naming every envelope not known
        to be published; the others were.
        """
        # Imported here: a sender that delivers one envelope at a time never loads it.
        from agent_wait.aws.batches import BatchEntry, send_in_batches

        entries = [BatchEntry.of(self._message(envelope), "Message") for envelope in envelopes]
        topic = self.topic_arn
        send_in_batches(
            entries, lambda batch: self.client.publish_batch(TopicArn=topic, PublishBatchRequestEntries=batch)
        )

    def _message(self, envelope: Envelope | ResolutionEvent) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "Message": envelope.to_json(),
            "MessageAttributes": message_attributes(envelope),
        }
        if self.fifo:
            fields["MessageGroupId"] = envelope.thread_id
            fields["MessageDeduplicationId"] = envelope.dedupe_key
        return fields
