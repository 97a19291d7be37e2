"""Stack-wide settings applied to every resource of a kind, whichever construct made it.

CDK aspects visit the whole tree before synthesis, so a table or queue added later by any construct
gets the same protection without its construct knowing about these settings:

- :class:`DeletionProtection`: DynamoDB deletion protection on every table (context
  ``deletion_protection``, on by default): a ``cdk destroy`` or a replacement keeps the data even if a
  removal policy were changed by mistake.
- :class:`CustomerManagedKey`: a customer-managed KMS key (context ``kms_key_arn``) for every table,
  queue, bucket, log group and Firehose delivery stream, instead of the AWS-owned or SQS/S3-managed
  keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jsii
from aws_cdk import IAspect
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kinesisfirehose as firehose
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs

if TYPE_CHECKING:
    from constructs import IConstruct

# What a function needs on the key to send to and receive from KMS-encrypted queues, read and write
# KMS-encrypted objects, and decrypt secrets encrypted under the key.
KEY_USE_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")


@jsii.implements(IAspect)
class DeletionProtection:
    """Turn on DynamoDB deletion protection on every table.

    Examples
    --------
    >>> Aspects.of(stack).add(DeletionProtection())  # doctest: +SKIP
    """

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, dynamodb.CfnTable):
            node.deletion_protection_enabled = True


@jsii.implements(IAspect)
class CustomerManagedKey:
    """Encrypt every table, queue, bucket, log group and delivery stream with the key ``key_arn``.

    The key's own policy must let CloudWatch Logs (``logs.<region>.amazonaws.com``) use it; the
    functions' roles (and the roles of Scheduler and Firehose) get :data:`KEY_USE_ACTIONS` on it from
    the stack. Firehose encrypts the records it buffers under a grant it creates on the key with the
    deploying role's rights (``kms:CreateGrant``, ``kms:DescribeKey``).

    Examples
    --------
    >>> key_arn = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    >>> Aspects.of(stack).add(CustomerManagedKey(key_arn))  # doctest: +SKIP
    """

    def __init__(self, key_arn: str) -> None:
        self.key_arn = key_arn

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, dynamodb.CfnTable):
            node.sse_specification = dynamodb.CfnTable.SSESpecificationProperty(
                sse_enabled=True, sse_type="KMS", kms_master_key_id=self.key_arn
            )
        elif isinstance(node, sqs.CfnQueue):
            node.kms_master_key_id = self.key_arn
            node.add_property_deletion_override("SqsManagedSseEnabled")
        elif isinstance(node, s3.CfnBucket):
            node.bucket_encryption = s3.CfnBucket.BucketEncryptionProperty(
                server_side_encryption_configuration=[
                    s3.CfnBucket.ServerSideEncryptionRuleProperty(
                        server_side_encryption_by_default=s3.CfnBucket.ServerSideEncryptionByDefaultProperty(
                            sse_algorithm="aws:kms", kms_master_key_id=self.key_arn
                        ),
                        # One data key per bucket and period instead of one KMS call per object.
                        bucket_key_enabled=True,
                    )
                ]
            )
        elif isinstance(node, logs.CfnLogGroup):
            node.kms_key_id = self.key_arn
        elif isinstance(node, firehose.CfnDeliveryStream):
            node.delivery_stream_encryption_configuration_input = (
                firehose.CfnDeliveryStream.DeliveryStreamEncryptionConfigurationInputProperty(
                    key_type="CUSTOMER_MANAGED_CMK", key_arn=self.key_arn
                )
            )
