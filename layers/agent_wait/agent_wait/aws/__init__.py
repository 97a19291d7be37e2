"""AWS announcers (extra ``aws``): SNS topic, SQS FIFO queue, DynamoDB ledger.

Examples
--------
>>> from agent_wait.aws import SqsAnnounce  # doctest: +SKIP
>>> announce = SqsAnnounce("https://sqs.eu-west-1.amazonaws.com/123/outbox.fifo")  # doctest: +SKIP
"""

from __future__ import annotations

try:
    import boto3  # noqa: F401 - imported to fail early, with the extra's name
except ImportError as exc:
    from agent_wait.errors import MissingExtraError

    raise MissingExtraError("aws", module="agent_wait.aws") from exc

from agent_wait.aws.dynamodb import DynamoDbAnnounce
from agent_wait.aws.sns import SnsAnnounce
from agent_wait.aws.sqs import SqsAnnounce

__all__ = ["DynamoDbAnnounce", "SnsAnnounce", "SqsAnnounce"]
