"""Athena over the audit archive: a workgroup with its results bucket, and the saved reports.

The Glue table the queries read is the archive's (:mod:`infra.archive`). The workgroup
``<stack>-audit`` enforces its configuration: results go encrypted (the stack's key when
``kms_key_arn`` is set) to a bucket of their own that forgets them after
:data:`RESULTS_EXPIRY_DAYS`, and a query stops after scanning :data:`SCAN_LIMIT_BYTES`. Every
report of :mod:`wait_service.stream.archive_reports` is saved there as a named query, the same SQL
``agent-wait audit query --report NAME`` runs (locally with DuckDB, deployed through Athena).
:meth:`AuditQueries.grant_query` gives the operator policy exactly what a query needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_athena as athena
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.nag import acknowledge
from wait_service.stream.archive import ARCHIVE_PREFIX
from wait_service.stream.archive_reports import REPORTS, TABLE, workgroup_name

if TYPE_CHECKING:
    from infra.archive import AuditArchive

# `agent-wait audit query --api`: start, poll (and stop past --max-wait), read the pages.
QUERY_ACTIONS = (
    "athena:GetQueryExecution",
    "athena:GetQueryResults",
    "athena:StartQueryExecution",
    "athena:StopQueryExecution",
)
# The saved reports, as the Athena console lists and opens them.
SAVED_QUERY_ACTIONS = ("athena:BatchGetNamedQuery", "athena:GetNamedQuery", "athena:ListNamedQueries")
# What Athena reads of the Glue catalog to plan a query on the table (partition projection: no crawler).
CATALOG_ACTIONS = ("glue:GetDatabase", "glue:GetPartition", "glue:GetPartitions", "glue:GetTable")
# Reading the archive, as the caller.
ARCHIVE_READ_ACTIONS = ("s3:GetBucketLocation", "s3:GetObject", "s3:ListBucket")
# Writing and reading the query results, as the caller (multipart for large results).
RESULTS_ACTIONS = (
    "s3:AbortMultipartUpload",
    "s3:GetBucketLocation",
    "s3:GetObject",
    "s3:ListBucket",
    "s3:ListBucketMultipartUploads",
    "s3:ListMultipartUploadParts",
    "s3:PutObject",
)
KEY_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")
# Everything the operator policy gains for the archive's queries.
AUDIT_QUERY_GRANTS = frozenset(
    QUERY_ACTIONS
    + SAVED_QUERY_ACTIONS
    + CATALOG_ACTIONS
    + ARCHIVE_READ_ACTIONS
    + RESULTS_ACTIONS
    + KEY_ACTIONS
)
RESULTS_PREFIX = "results"
RESULTS_EXPIRY_DAYS = 30
# A query that would scan more than this is cancelled (10 GB: years of archive at a few KB a record).
SCAN_LIMIT_BYTES = 10 * 1000**3


class AuditQueries(Construct):
    """The workgroup, its results bucket and one named query per saved report.

    Examples
    --------
    >>> queries = AuditQueries(stack, "Queries", stack_name="agent-wait", archive=archive)  # doctest: +SKIP
    >>> queries.grant_query(operators.policy)  # doctest: +SKIP
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stack_name: str,
        archive: AuditArchive,
        kms_key_arn: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.archive = archive
        self.kms_key_arn = kms_key_arn
        self.workgroup_name = workgroup_name(stack_name)
        self.results = s3.Bucket(
            self,
            "Results",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            # CloudFormation cannot delete a bucket that holds objects: kept on teardown, emptied by
            # the lifecycle rule within RESULTS_EXPIRY_DAYS.
            removal_policy=cdk.RemovalPolicy.RETAIN,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="results-expiry",
                    expiration=cdk.Duration.days(RESULTS_EXPIRY_DAYS),
                    abort_incomplete_multipart_upload_after=cdk.Duration.days(1),
                )
            ],
        )
        acknowledge(
            self.results,
            "AwsSolutions-S1",
            "Athena writes query results here for whoever ran the query; the query itself is recorded by "
            "CloudTrail (StartQueryExecution), and the results expire after 30 days.",
        )
        encryption = athena.CfnWorkGroup.EncryptionConfigurationProperty(
            encryption_option="SSE_KMS" if kms_key_arn else "SSE_S3", kms_key=kms_key_arn
        )
        self.workgroup = athena.CfnWorkGroup(
            self,
            "WorkGroup",
            name=self.workgroup_name,
            description="agent-wait: ad hoc questions and the saved reports over the audit archive",
            # Results outlive nothing: the workgroup goes with the stack even after queries ran.
            recursive_delete_option=True,
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                bytes_scanned_cutoff_per_query=SCAN_LIMIT_BYTES,
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=f"s3://{self.results.bucket_name}/{RESULTS_PREFIX}/",
                    encryption_configuration=encryption,
                ),
            ),
        )
        self.named_queries = {
            report.name: athena.CfnNamedQuery(
                self,
                f"Report{''.join(part.title() for part in report.name.split('-'))}",
                name=report.name,
                description=report.description[:1024],
                database=archive.database_name,
                query_string=report.sql,
                work_group=self.workgroup.ref,
            )
            for report in REPORTS.values()
        }
        for query in self.named_queries.values():
            query.node.add_dependency(archive.table)

    @property
    def workgroup_arn(self) -> str:
        return cdk.Stack.of(self).format_arn(
            service="athena", resource="workgroup", resource_name=self.workgroup_name
        )

    def grant_query(self, policy: iam.ManagedPolicy) -> None:
        """Let ``policy``'s holders query the archive in the workgroup and open the saved reports."""
        stack = cdk.Stack.of(self)
        database = self.archive.database_name
        archive_bucket = self.archive.bucket
        statements = [
            iam.PolicyStatement(
                actions=sorted(QUERY_ACTIONS + SAVED_QUERY_ACTIONS), resources=[self.workgroup_arn]
            ),
            iam.PolicyStatement(
                actions=sorted(CATALOG_ACTIONS),
                resources=[
                    stack.format_arn(service="glue", resource="catalog"),
                    stack.format_arn(service="glue", resource="database", resource_name=database),
                    stack.format_arn(service="glue", resource="table", resource_name=f"{database}/{TABLE}"),
                ],
            ),
            iam.PolicyStatement(
                actions=sorted(ARCHIVE_READ_ACTIONS),
                resources=[archive_bucket.bucket_arn, archive_bucket.arn_for_objects(f"{ARCHIVE_PREFIX}/*")],
            ),
            iam.PolicyStatement(
                actions=sorted(RESULTS_ACTIONS),
                resources=[self.results.bucket_arn, self.results.arn_for_objects(f"{RESULTS_PREFIX}/*")],
            ),
        ]
        if self.kms_key_arn:
            statements.append(iam.PolicyStatement(actions=list(KEY_ACTIONS), resources=[self.kms_key_arn]))
        policy.add_statements(*statements)
        archive_id = stack.get_logical_id(archive_bucket.node.default_child)  # type: ignore[arg-type]
        results_id = stack.get_logical_id(self.results.node.default_child)  # type: ignore[arg-type]
        acknowledge(
            policy,
            f"AwsSolutions-IAM5[Resource::<{archive_id}.Arn>/{ARCHIVE_PREFIX}/*]",
            "Athena reads whichever archive objects Firehose wrote under the archive's prefix (one per "
            "buffer flush, named by time and a random suffix): the grant is that prefix, read only.",
        )
        acknowledge(
            policy,
            f"AwsSolutions-IAM5[Resource::<{results_id}.Arn>/{RESULTS_PREFIX}/*]",
            "Athena names each result object by its query id: the grant is the workgroup's results prefix "
            "of the results bucket, no other bucket's.",
        )
