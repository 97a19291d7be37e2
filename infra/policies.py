"""The policy store: per-function policy overrides, one item per version
(``wait_service.answers.policy_store``).

The runner reads it (``dynamodb:Query``) when it raises a question; operators write it with
``agent-wait policies set`` (the operator policy grants the write). Retained on ``cdk destroy``:
its versions are the record of who changed which policy when.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from constructs import Construct

from infra.specs import table_from_spec
from wait_service.resources import POLICIES

if TYPE_CHECKING:
    from aws_cdk import aws_dynamodb as dynamodb

    from infra.functions import RunnerFunction

# What the runner calls: the latest version of one function's override.
POLICY_READ_ACTIONS = ("dynamodb:Query",)
# `agent-wait policies list | show | diff` read; `set` writes the next version (a conditional put).
POLICY_OPERATOR_ACTIONS = ("dynamodb:PutItem", "dynamodb:Query", "dynamodb:Scan")
# The CLI finds the table from the stack's output.
STACK_READ_ACTIONS = ("cloudformation:DescribeStacks",)


class PolicyStore(Construct):
    """The table built from ``wait_service.resources.POLICIES`` (PITR on, retained).

    Examples
    --------
    >>> store = PolicyStore(stack, "Policies")  # doctest: +SKIP
    >>> store.readable_by(runner)  # doctest: +SKIP
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.table: dynamodb.Table = table_from_spec(self, POLICIES, removal_policy=cdk.RemovalPolicy.RETAIN)

    def readable_by(self, runner: RunnerFunction) -> None:
        """The runner reads the store (and only reads it) when it raises a question."""
        runner.allow(POLICY_READ_ACTIONS, [self.table.table_arn])
        runner.function.add_environment("AGENT_WAIT_POLICY_TABLE", self.table.table_name)
