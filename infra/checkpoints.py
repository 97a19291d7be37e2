"""The LangGraph checkpoint store: the table(s) of the selected checkpointer and the optional S3 bucket."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.nag import acknowledge
from infra.specs import table_from_spec
from wait_service.resources import (
    CHECKPOINT_BUCKET,
    CHECKPOINT_WRITES_DYNAMODB,
    CHECKPOINTS,
    CHECKPOINTS_DYNAMODB,
)


class Checkpoints(Construct):
    """Checkpoint tables for ``checkpointer``.

    ``aws``: the single ``PK``/``SK`` table ``DynamoDBSaver`` (langgraph-checkpoint-aws) expects, TTL on
    ``ttl``, and with ``bucket=True`` (the stack's default) an S3 bucket it offloads checkpoints over
    350 KB to, built from ``wait_service.resources.CHECKPOINT_BUCKET`` as the local stack builds it.
    ``dynamodb``: the checkpoints and writes tables of langgraph-checkpoint-dynamodb, keyed as that
    package reads them, TTL on ``ttl`` (the runner's saver stamps it: the package writes none); no
    bucket, since that saver cannot offload.

    Examples
    --------
    >>> Checkpoints(stack, "Checkpoints", checkpointer="aws", bucket=False).table  # doctest: +SKIP
    """

    def __init__(self, scope: Construct, construct_id: str, *, checkpointer: str, bucket: bool) -> None:
        super().__init__(scope, construct_id)
        # A parked thread's checkpoint is what its answer resumes: it is kept on `cdk destroy` like the
        # ledger that points at it, and both expire by TTL after the same number of days.
        removal = cdk.RemovalPolicy.RETAIN
        self.writes_table: dynamodb.Table | None = None
        self.bucket: s3.Bucket | None = None
        if checkpointer == "dynamodb":
            self.table: dynamodb.Table = table_from_spec(self, CHECKPOINTS_DYNAMODB, removal_policy=removal)
            self.writes_table = table_from_spec(self, CHECKPOINT_WRITES_DYNAMODB, removal_policy=removal)
        else:
            self.table = table_from_spec(self, CHECKPOINTS, removal_policy=removal)
            if bucket:
                self.bucket = self._build_bucket()

    @property
    def tables(self) -> list[dynamodb.Table]:
        return [self.table] + ([self.writes_table] if self.writes_table else [])

    def _build_bucket(self) -> s3.Bucket:
        bucket = s3.Bucket(
            self,
            CHECKPOINT_BUCKET.logical_id,
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=False,
            # A bucket that still holds objects cannot be deleted by CloudFormation; keep it on destroy.
            removal_policy=cdk.RemovalPolicy.RETAIN,
            lifecycle_rules=[
                # Offloaded checkpoints are only reached through their table item, which TTL removes;
                # the objects outlive the items (see CHECKPOINT_BUCKET for the margin and the rule id).
                s3.LifecycleRule(
                    id=CHECKPOINT_BUCKET.rule_id,
                    expiration=cdk.Duration.days(CHECKPOINT_BUCKET.expiration_days),
                    abort_incomplete_multipart_upload_after=cdk.Duration.days(1),
                )
            ],
        )
        acknowledge(
            bucket,
            "AwsSolutions-S1",
            "Objects are written and read only by the runner role through its table; CloudTrail data "
            "events are the audit path, a second logs bucket would need its own access logs in turn.",
        )
        return bucket
