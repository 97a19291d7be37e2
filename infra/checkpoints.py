"""The LangGraph checkpoint store: the table(s) of the selected checkpointer and the optional S3 bucket."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.nag import acknowledge
from infra.specs import table_from_spec
from wait_service.resources import CHECKPOINT_WRITES_DYNAMODB, CHECKPOINTS, CHECKPOINTS_DYNAMODB


class Checkpoints(Construct):
    """Checkpoint tables for ``checkpointer``.

    ``aws``: the single ``PK``/``SK`` table ``DynamoDBSaver`` (langgraph-checkpoint-aws) expects, TTL on
    ``ttl``, and with ``bucket=True`` an S3 bucket it offloads checkpoints over DynamoDB's item size to.
    ``dynamodb``: the checkpoints and writes tables of langgraph-checkpoint-dynamodb.

    Examples
    --------
    >>> Checkpoints(stack, "Checkpoints", checkpointer="aws", bucket=False).table  # doctest: +SKIP
    """

    def __init__(self, scope: Construct, construct_id: str, *, checkpointer: str, bucket: bool) -> None:
        super().__init__(scope, construct_id)
        # Checkpoints are working state of runs, recreated by new runs: removed with the stack.
        removal = cdk.RemovalPolicy.DESTROY
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
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=False,
            # A bucket that still holds objects cannot be deleted by CloudFormation; keep it on destroy.
            removal_policy=cdk.RemovalPolicy.RETAIN,
            lifecycle_rules=[
                # Offloaded checkpoints are only reached through their table item, which TTL removes.
                s3.LifecycleRule(
                    expiration=cdk.Duration.days(90),
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
