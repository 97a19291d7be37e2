"""The audit archive: Amazon Data Firehose into an S3 bucket, and the Glue table Athena reads it with.

The ledger stream's reader puts one record per change of a decided question
(``wait_service.stream.archive``); Firehose buffers them and writes gzipped JSON Lines under
``audit/date=YYYY-MM-DD/``. The Glue table projects the ``date`` partition, so a new day needs no
crawler and no ``MSCK REPAIR``. Objects expire after ``audit_retention_days`` (context; 400 by
default); ``audit_object_lock`` (context ``governance`` or ``compliance``) also locks each object
for that long, so that nobody (``compliance``: not even the root user) can delete it sooner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesisfirehose as firehose
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.nag import acknowledge
from wait_service.stream.archive import ARCHIVE_COLUMNS, ARCHIVE_PREFIX, PARTITION_KEY
from wait_service.stream.archive_reports import TABLE, database_name

if TYPE_CHECKING:
    from infra.functions import ServiceFunction

# Exactly what Firehose's S3 destination calls (the AWS documentation's policy for it).
FIREHOSE_BUCKET_ACTIONS = (
    "s3:AbortMultipartUpload",
    "s3:GetBucketLocation",
    "s3:GetObject",
    "s3:ListBucket",
    "s3:ListBucketMultipartUploads",
    "s3:PutObject",
)
ARCHIVE_PUT_ACTIONS = ("firehose:PutRecordBatch",)
# Firehose writes a file every minute or 5 MiB, whichever comes first.
BUFFER_SECONDS = 60
BUFFER_MIB = 5
# The first day the partition projection lists (older days cannot hold records).
PROJECTION_START = "2026-01-01"


def glue_database_name(stack_name: str) -> str:
    """A Glue database name for the stack (lower case letters, digits and ``_``).

    The CLI's ``audit query`` derives the same name
    (:func:`wait_service.stream.archive_reports.database_name`).

    Examples
    --------
    >>> glue_database_name("agent-wait")
    'agent_wait'
    """
    return database_name(stack_name)


class AuditArchive(Construct):
    """Bucket, delivery stream (and its role and log group), Glue database and table.

    Examples
    --------
    >>> archive = AuditArchive(stack, "Archive", prefix="agent-wait-", retention_days=400)  # doctest: +SKIP
    >>> archive.allow_put(dispatcher)  # doctest: +SKIP
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stack_name: str,
        retention_days: int,
        object_lock: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        lock: s3.ObjectLockRetention | None = None
        if object_lock == "compliance":
            lock = s3.ObjectLockRetention.compliance(cdk.Duration.days(retention_days))
        elif object_lock == "governance":
            lock = s3.ObjectLockRetention.governance(cdk.Duration.days(retention_days))
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            object_lock_enabled=lock is not None or None,
            object_lock_default_retention=lock,
            # The record of who approved what: never deleted with the stack.
            removal_policy=cdk.RemovalPolicy.RETAIN,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="audit-retention",
                    expiration=cdk.Duration.days(retention_days),
                    # An expired (or overwritten) version is gone a day later.
                    noncurrent_version_expiration=cdk.Duration.days(1),
                    abort_incomplete_multipart_upload_after=cdk.Duration.days(1),
                )
            ],
        )
        acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "Only Firehose writes the archive and only Athena users read it; CloudTrail data events are "
            "the access record, a second logs bucket would need its own access logs in turn.",
        )

        self.log_group = logs.LogGroup(
            self,
            "DeliveryLogs",
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        log_stream = logs.LogStream(
            self, "DeliveryLogStream", log_group=self.log_group, log_stream_name="S3Delivery"
        )

        self.role = iam.Role(
            self,
            "DeliveryRole",
            assumed_by=iam.ServicePrincipal(
                "firehose.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            ),
            description="Firehose: writes the agent-wait audit archive to its bucket, nothing else",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=sorted(FIREHOSE_BUCKET_ACTIONS),
                resources=[self.bucket.bucket_arn, self.bucket.arn_for_objects("*")],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:PutLogEvents"],
                resources=[
                    stack.format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name=f"{self.log_group.log_group_name}:log-stream:{log_stream.log_stream_name}",
                        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                    )
                ],
            )
        )
        bucket_id = stack.get_logical_id(self.bucket.node.default_child)  # type: ignore[arg-type]
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/*]",
            "Firehose names each object it writes (date prefix, time and a random suffix): the grant is "
            "the archive bucket's objects, no other bucket's.",
        )

        day = "!{timestamp:yyyy-MM-dd}"
        self.stream = firehose.CfnDeliveryStream(
            self,
            "Stream",
            delivery_stream_type="DirectPut",
            delivery_stream_encryption_configuration_input=firehose.CfnDeliveryStream.DeliveryStreamEncryptionConfigurationInputProperty(
                key_type="AWS_OWNED_CMK"
            ),
            extended_s3_destination_configuration=firehose.CfnDeliveryStream.ExtendedS3DestinationConfigurationProperty(
                bucket_arn=self.bucket.bucket_arn,
                role_arn=self.role.role_arn,
                prefix=f"{ARCHIVE_PREFIX}/{PARTITION_KEY}={day}/",
                error_output_prefix=f"errors/!{{firehose:error-output-type}}/{PARTITION_KEY}={day}/",
                buffering_hints=firehose.CfnDeliveryStream.BufferingHintsProperty(
                    interval_in_seconds=BUFFER_SECONDS, size_in_m_bs=BUFFER_MIB
                ),
                compression_format="GZIP",
                cloud_watch_logging_options=firehose.CfnDeliveryStream.CloudWatchLoggingOptionsProperty(
                    enabled=True,
                    log_group_name=self.log_group.log_group_name,
                    log_stream_name=log_stream.log_stream_name,
                ),
            ),
        )
        # The role's policy must exist before Firehose first tries to write.
        self.stream.node.add_dependency(self.role)

        self.database_name = glue_database_name(stack_name)
        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=stack.account,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=self.database_name, description="agent-wait: the audit archive"
            ),
        )
        location = f"s3://{self.bucket.bucket_name}/{ARCHIVE_PREFIX}/"
        self.table = glue.CfnTable(
            self,
            "Table",
            catalog_id=stack.account,
            database_name=self.database_name,
            table_input=glue.CfnTable.TableInputProperty(
                name=TABLE,
                description="One row per change of a decided question (newest: highest sequence_number)",
                table_type="EXTERNAL_TABLE",
                partition_keys=[glue.CfnTable.ColumnProperty(name=PARTITION_KEY, type="string")],
                parameters={
                    "classification": "json",
                    "compressionType": "gzip",
                    "projection.enabled": "true",
                    f"projection.{PARTITION_KEY}.type": "date",
                    f"projection.{PARTITION_KEY}.format": "yyyy-MM-dd",
                    f"projection.{PARTITION_KEY}.range": f"{PROJECTION_START},NOW",
                    f"projection.{PARTITION_KEY}.interval": "1",
                    f"projection.{PARTITION_KEY}.interval.unit": "DAYS",
                    "storage.location.template": f"{location}{PARTITION_KEY}=${{{PARTITION_KEY}}}/",
                },
                storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                    location=location,
                    input_format="org.apache.hadoop.mapred.TextInputFormat",
                    output_format="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                    serde_info=glue.CfnTable.SerdeInfoProperty(
                        serialization_library="org.openx.data.jsonserde.JsonSerDe"
                    ),
                    columns=[
                        glue.CfnTable.ColumnProperty(name=name, type=kind) for name, kind in ARCHIVE_COLUMNS
                    ],
                ),
            ),
        )
        self.table.node.add_dependency(self.database)

    @property
    def stream_name(self) -> str:
        return self.stream.ref

    @property
    def stream_arn(self) -> str:
        return self.stream.attr_arn

    def allow_put(self, fn: ServiceFunction) -> None:
        """Let ``fn`` put archive records, and tell it the delivery stream's name."""
        fn.allow(ARCHIVE_PUT_ACTIONS, [self.stream_arn])
        fn.function.add_environment("AGENT_WAIT_ARCHIVE_STREAM", self.stream_name)
