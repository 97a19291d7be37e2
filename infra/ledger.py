"""The question ledger: one table keyed on ``dedupe_key`` (questions and threads), see docs/internals.md."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.specs import table_from_spec
from wait_service.resources import LEDGER, STATS


class Ledger(Construct):
    """The ledger table built from ``wait_service.resources.LEDGER``: GSIs ``by-status`` and ``by-thread``,
    TTL on ``expires_ttl``, point-in-time recovery.

    Examples
    --------
    >>> Ledger(stack, "Ledger").table.table_name  # doctest: +SKIP
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        # The ledger is the record of who approved what: it outlives a `cdk destroy`.
        self.table: dynamodb.Table = table_from_spec(self, LEDGER, removal_policy=cdk.RemovalPolicy.RETAIN)
        # The approval analytics' counters (wait_service.stream.analytics): the dispatcher adds to them from
        # the ledger's stream, the api reads them (GET /stats). Kept like the ledger they count.
        self.stats: dynamodb.Table = table_from_spec(self, STATS, removal_policy=cdk.RemovalPolicy.RETAIN)

    @property
    def index_arns(self) -> list[str]:
        return [f"{self.table.table_arn}/index/{index.name}" for index in LEDGER.indexes]
