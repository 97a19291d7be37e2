"""The inbox: runs and resumes for the runner, one FIFO message group per thread."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.specs import fifo_queue_from_spec
from wait_service.resources import INBOX, INBOX_VISIBILITY_SECONDS, RUNNER_TIMEOUT_SECONDS

# The inbox hides a message this many runner timeouts (AWS recommends at least six for an SQS
# event source), so a slow run is never handed to a second invocation while the first still works.
VISIBILITY_PER_RUNNER_TIMEOUT = INBOX_VISIBILITY_SECONDS // RUNNER_TIMEOUT_SECONDS


def inbox_visibility_seconds(runner_timeout: int) -> int:
    """The inbox's visibility timeout for a runner timeout (context ``runner_timeout``)."""
    return VISIBILITY_PER_RUNNER_TIMEOUT * runner_timeout


if TYPE_CHECKING:
    from collections.abc import Sequence

    from aws_cdk import aws_sqs as sqs


class Inbox(Construct):
    """``inbox.fifo`` and ``inbox-dlq.fifo`` from ``wait_service.resources.INBOX``.

    Its visibility timeout is six times the runner timeout (``runner_timeout``, the spec's by
    default) and a message moves to the DLQ after ``maxReceiveCount`` receives (from the spec).

    Examples
    --------
    >>> Inbox(stack, "Inbox", prefix="agent-wait-").queue.queue_arn  # doctest: +SKIP
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        prefix: str,
        runner_timeout: int = RUNNER_TIMEOUT_SECONDS,
    ) -> None:
        super().__init__(scope, construct_id)
        self.queue: sqs.Queue
        self.dlq: sqs.Queue
        spec = dataclasses.replace(INBOX, visibility_timeout=inbox_visibility_seconds(runner_timeout))
        self.queue, self.dlq = fifo_queue_from_spec(self, spec, prefix=prefix)

    def only_senders(self, roles: Sequence[iam.IRole], operators: Sequence[str] = ()) -> None:
        """Deny ``sqs:SendMessage`` on the inbox to every principal but ``roles`` and ``operators``.

        The runner resumes only with answers the ledger holds, whoever sends the message; this
        keeps anyone else who holds ``sqs:SendMessage`` from putting runs on the queue at all.
        ``operators`` (context ``operator_principals``: IAM role or user ARNs, ``*`` allowed) may
        send too, so that they can redrive the DLQ (``agent-wait dlq redrive``, or the console's
        ``StartMessageMoveTask``, which sends as the principal that started it).
        """
        self.queue.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyTheStackSends",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["sqs:SendMessage"],
                resources=[self.queue.queue_arn],
                # Both conditions must hold for the deny: neither one of the roles nor an operator.
                conditions={"ArnNotEquals": {"aws:PrincipalArn": [role.role_arn for role in roles]}}
                | ({"ArnNotLike": {"aws:PrincipalArn": list(operators)}} if operators else {}),
            )
        )
