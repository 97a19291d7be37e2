"""The dispatcher's service: the ledger stream's one reader with its consumers, wired from settings.

The composition lives here, apart from :mod:`wait_service.stream.ledger_stream` (the change model, the
consumer protocol and the outbox), so that each consumer module imports the stream's model and
nothing imports back up from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_wait.aws import SnsAnnounce, SqsAnnounce
from wait_service.ledger import Ledger
from wait_service.runs.inbox import Inbox
from wait_service.stream.analytics import AnalyticsConsumer, StatsStore
from wait_service.stream.archive import ArchiveConsumer, archive_sink
from wait_service.stream.ledger_stream import Consumer, LedgerStream, OutboxDispatcher
from wait_service.stream.resolution_events import ResolutionEvents

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient

    from wait_service.settings import Settings


def build_ledger_stream(
    settings: Settings,
    *,
    dynamodb: DynamoDBClient | None = None,
    sqs: SQSClient | None = None,
    firehose: Any = None,
    sns: SNSClient | None = None,
) -> LedgerStream:
    """The dispatcher's service wired to the resources named by ``settings``.

    Examples
    --------
    >>> stream = build_ledger_stream(Settings.from_env(os.environ))  # doctest: +SKIP
    """
    ledger = Ledger.from_settings(settings, dynamodb)
    inbox = Inbox(settings.require("inbox_url"), sqs)
    # The outbox first: a retried record's second send is dropped there by FIFO deduplication.
    events = ResolutionEvents(
        [
            SqsAnnounce(settings.require("outbox_url"), client=inbox._client),
            SnsAnnounce(settings.require("topic_arn"), client=sns),
        ]
    )
    consumers: list[Consumer] = [OutboxDispatcher(ledger, inbox), events]
    # The audit archive: every decided question, before the ledger's TTL can remove it.
    sink = archive_sink(
        stream_name=getattr(settings, "archive_stream", None),
        folder=getattr(settings, "archive_dir", None),
        firehose=firehose,
    )
    if sink is not None:
        consumers.append(ArchiveConsumer(sink))
    # The approval analytics' counters, each fact counted once (wait_service.stream.analytics).
    if settings.stats_table:
        consumers.append(AnalyticsConsumer(StatsStore(settings.stats_table, ledger._client)))
    return LedgerStream(consumers)
