"""What the people on call need to look into and redrive the DLQs: one managed policy, exact actions.

Attach it to the roles named in ``operator_principals`` (the inbox's queue policy admits them as
senders; this policy is what lets them call SQS, Lambda and the ledger's stream at all).
``agent-wait dlq`` and ``agent-wait policies`` call exactly these actions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.policies import POLICY_OPERATOR_ACTIONS, STACK_READ_ACTIONS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from aws_cdk import aws_sqs as sqs

# `agent-wait dlq list | show | redrive` on a DLQ: look (receive, then make visible again), delete.
DLQ_ACTIONS = (
    "sqs:ChangeMessageVisibility",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
    "sqs:GetQueueUrl",
    "sqs:ReceiveMessage",
)
# Sending a message back to the queue it came from.
SOURCE_ACTIONS = ("sqs:GetQueueUrl", "sqs:SendMessage")
# `redrive` of the ledger stream's DLQ: read the failed batch back from the stream.
STREAM_ACTIONS = ("dynamodb:GetRecords", "dynamodb:GetShardIterator")


class OperatorPolicy(Construct):
    """The managed policy ``<stack>-operator`` (stack output ``OperatorPolicyArn``).

    Examples
    --------
    >>> OperatorPolicy(stack, "Operators", dlqs=[dlq], sources=[inbox], functions=[arn],
    ...                streams=[stream_arn])  # doctest: +SKIP
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        dlqs: Sequence[sqs.IQueue],
        sources: Sequence[sqs.IQueue],
        functions: Sequence[str],
        streams: Sequence[str] = (),
        policy_tables: Sequence[str] = (),
        stacks: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self.policy = iam.ManagedPolicy(
            self,
            "Policy",
            managed_policy_name=name,
            description="agent-wait: redrive the dead-letter queues (agent-wait dlq), set policies "
            "(agent-wait policies)",
            statements=[
                iam.PolicyStatement(actions=sorted(DLQ_ACTIONS), resources=[q.queue_arn for q in dlqs]),
                iam.PolicyStatement(actions=sorted(SOURCE_ACTIONS), resources=[q.queue_arn for q in sources]),
                iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=list(functions)),
                *(
                    [iam.PolicyStatement(actions=sorted(STREAM_ACTIONS), resources=list(streams))]
                    if streams
                    else []
                ),
                # `agent-wait policies`: read the store, write its next versions, find it by stack output.
                *(
                    [
                        iam.PolicyStatement(
                            actions=sorted(POLICY_OPERATOR_ACTIONS), resources=list(policy_tables)
                        ),
                        iam.PolicyStatement(actions=sorted(STACK_READ_ACTIONS), resources=list(stacks)),
                    ]
                    if policy_tables
                    else []
                ),
            ],
        )
