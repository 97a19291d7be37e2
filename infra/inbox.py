"""The inbox: runs and resumes for the runner, one FIFO message group per thread."""

from __future__ import annotations

from typing import TYPE_CHECKING

from constructs import Construct

from infra.specs import fifo_queue_from_spec
from wait_service.resources import INBOX

if TYPE_CHECKING:
    from aws_cdk import aws_sqs as sqs


class Inbox(Construct):
    """``inbox.fifo`` and ``inbox-dlq.fifo`` from ``wait_service.resources.INBOX``.

    Its visibility timeout is six times the runner timeout and a message moves to the DLQ after
    ``maxReceiveCount`` receives (both from the spec).

    Examples
    --------
    >>> Inbox(stack, "Inbox", prefix="agent-wait-").queue.queue_arn  # doctest: +SKIP
    """

    def __init__(self, scope: Construct, construct_id: str, *, prefix: str) -> None:
        super().__init__(scope, construct_id)
        self.queue: sqs.Queue
        self.dlq: sqs.Queue
        self.queue, self.dlq = fifo_queue_from_spec(self, INBOX, prefix=prefix)
