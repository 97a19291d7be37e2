"""Work written once per batch of the ledger's stream: the audit archive's records, the analytics' counts.

DESIGN.md ("Decisions for production"): "Whatever must follow an accepted reply or start (the
resume or start message, the resolution events, the audit archive, the analytics counters) follows
from the ledger's DynamoDB stream, at least once, deduplicated downstream". A batch's archive
records go to Firehose in one PutRecordBatch (Firehose takes up to 500 records, 4 MiB, a call);
when that call fails, the batch is retried from the first record it held, and nothing is lost.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError
from service_events import START, LambdaContext, load_handler

from agent_wait_cli.local.streams import lambda_record
from wait_service.ledger import Ledger
from wait_service.stream.archive import ArchiveConsumer, FirehoseSink
from wait_service.stream.ledger_stream import LedgerStream

if TYPE_CHECKING:
    from service_events import Aws

STREAM = "u-audit"


def stream_records(aws: Aws) -> list[dict[str, Any]]:
    """Every record of the ledger's stream so far, shaped as Lambda hands them over."""
    arn = aws.resources.ledger_stream_arn
    shard = aws.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = aws.streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")[
        "ShardIterator"
    ]
    return [lambda_record(r, arn) for r in aws.streams.get_records(ShardIterator=iterator)["Records"]]


@pytest.fixture
def firehose(aws: Aws) -> Any:
    """A delivery stream to S3 (moto), with every PutRecordBatch's records kept in ``firehose.puts``."""
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="u-audit-archive")
    client = boto3.client("firehose", region_name="us-east-1")
    client.create_delivery_stream(
        DeliveryStreamName=STREAM,
        DeliveryStreamType="DirectPut",
        ExtendedS3DestinationConfiguration={
            "RoleARN": "arn:aws:iam::123456789012:role/firehose",
            "BucketARN": "arn:aws:s3:::u-audit-archive",
        },
    )
    client.puts = []

    def kept(params: dict[str, Any], **_: Any) -> None:
        client.puts.append([json.loads(r["Data"])["question_id"] for r in params["Records"]])

    client.meta.events.register("provide-client-params.firehose.PutRecordBatch", kept)
    return client


def decide(aws: Aws, count: int) -> list[str]:
    """Raise ``count`` questions and answer each: one archive record each."""
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb)
    ids = [f"q-{n}" for n in range(count)]
    for n, question_id in enumerate(ids):
        aws.raise_question(f"t-{n}", question_id)
        ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
    return ids


def dispatch(records: list[dict[str, Any]], stream: LedgerStream) -> list[str]:
    response = load_handler("dispatcher").handle({"Records": records}, LambdaContext(), stream)
    return [failure["itemIdentifier"] for failure in response["batchItemFailures"]]


def test_a_batch_of_decided_questions_is_archived_with_one_put_record_batch(aws: Aws, firehose: Any) -> None:
    ids = decide(aws, 4)
    stream = LedgerStream([ArchiveConsumer(FirehoseSink(STREAM, firehose))])

    assert dispatch(stream_records(aws), stream) == []

    # Eight records (four raised, four answered): one call for the batch, its four archive records
    assert firehose.puts == [ids]


def test_a_refused_put_retries_the_batch_from_its_first_archived_record_and_loses_nothing(
    aws: Aws, firehose: Any
) -> None:
    ids = decide(aws, 3)
    records = stream_records(aws)
    refused = [0]

    def refuse(**_: Any) -> None:
        if not refused[0]:
            refused[0] += 1
            raise ClientError(
                {"Error": {"Code": "ServiceUnavailableException", "Message": "injected"}}, "Put"
            )

    firehose.meta.events.register("before-call.firehose.PutRecordBatch", refuse)
    stream = LedgerStream([ArchiveConsumer(FirehoseSink(STREAM, firehose))])

    failed = dispatch(records, stream)

    # The first answered record is where the mapping retries from (the questions raised before it
    # archive nothing and stay checkpointed); its batch keeps no records for the next one.
    first_archived = next(
        r["dynamodb"]["SequenceNumber"]
        for r in records
        if r["dynamodb"]["NewImage"].get("status") == {"S": "answered"}
    )
    assert failed == [first_archived]
    assert firehose.puts == [ids]  # the refused call's records
    retry = [r for r in records if int(r["dynamodb"]["SequenceNumber"]) >= int(first_archived)]
    assert dispatch(retry, stream) == []
    assert firehose.puts == [ids, ids]


def test_a_record_processed_on_its_own_is_written_before_process_returns(aws: Aws, firehose: Any) -> None:
    # LedgerStream.process (a batch of one record) writes at once; a refused write raises.
    [question_id] = decide(aws, 1)
    answered = [
        r for r in stream_records(aws) if r["dynamodb"]["NewImage"].get("status") == {"S": "answered"}
    ]
    stream = LedgerStream([ArchiveConsumer(FirehoseSink(STREAM, firehose))])

    stream.process(answered[0])

    assert firehose.puts == [[question_id]]


# -- the analytics' counts: one transaction per batch, each fact once ---------------------------


def stats_store(aws: Aws) -> Any:
    from wait_service.stream.analytics import StatsStore

    return StatsStore(aws.settings.require("stats_table"), aws.dynamodb)


def totals(aws: Aws) -> dict[str, Any]:
    from datetime import date

    from wait_service.stream.analytics import StatsService

    return StatsService(stats_store(aws)).stats(since=date(2026, 11, 1), until=date(2026, 12, 31))["totals"]


def transactions(aws: Aws) -> list[list[str]]:
    """Every TransactWriteItems of ``aws.dynamodb`` from now on: the kind of each item (Put, Update)."""
    seen: list[list[str]] = []

    def kept(params: dict[str, Any], **_: Any) -> None:
        seen.append([next(iter(item)) for item in params["TransactItems"]])

    aws.dynamodb.meta.events.register("provide-client-params.dynamodb.TransactWriteItems", kept)
    return seen


def test_a_batch_counts_its_facts_in_one_transaction_one_update_per_cell(aws: Aws) -> None:
    from wait_service.stream.analytics import AnalyticsConsumer

    decide(aws, 4)
    seen = transactions(aws)
    stream = LedgerStream([AnalyticsConsumer(stats_store(aws))])

    assert dispatch(stream_records(aws), stream) == []

    # Eight facts (four raised, four answered by ann): eight markers and two cells, one call
    assert seen == [["Put"] * 8 + ["Update"] * 2]
    counted = totals(aws)
    assert (counted["raised"], counted["answered"], counted["approve"]) == (4, 4, 4)


def test_a_batch_handed_over_again_in_another_shape_counts_each_fact_once(aws: Aws) -> None:
    from wait_service.stream.analytics import AnalyticsConsumer

    decide(aws, 4)
    records = stream_records(aws)
    stream = LedgerStream([AnalyticsConsumer(stats_store(aws))])
    throttled = [0]

    def throttle(**_: Any) -> None:
        if throttled[0] == 1:  # the second transaction: the whole batch, refused once
            throttled[0] += 1
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "injected"}}, "Transact")
        throttled[0] += 1

    aws.dynamodb.meta.events.register("before-call.dynamodb.TransactWriteItems", throttle)

    # Half the records counted as a batch; then the whole stream as one batch, refused: the mapping
    # retries it from its first record with facts (the first record of all)
    assert dispatch(records[:4], stream) == []
    assert dispatch(records, stream) == [records[0]["dynamodb"]["SequenceNumber"]]
    assert totals(aws)["raised"] == 2
    # The retry holds the facts counted by the first batch too: their markers are there, they
    # are dropped and the others counted
    assert dispatch(records, stream) == []
    assert dispatch(records, stream) == []  # and once more, as a late duplicate

    counted = totals(aws)
    assert (counted["raised"], counted["answered"], counted["approve"]) == (4, 4, 4)


def test_the_max_is_written_only_when_it_may_be_larger_than_the_stored_one(aws: Aws) -> None:
    from wait_service.stream.analytics import AnalyticsConsumer, shard_of

    answered_at = [START]
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=lambda: answered_at[0])
    store = stats_store(aws)
    stream = LedgerStream([AnalyticsConsumer(store)])
    maxima: list[str] = []

    def kept(params: dict[str, Any], **_: Any) -> None:
        if params.get("UpdateExpression") == "SET tta_max_ms = :v":
            maxima.append(params["ExpressionAttributeValues"][":v"]["N"])

    aws.dynamodb.meta.events.register("provide-client-params.dynamodb.UpdateItem", kept)
    handed = 0
    # Three questions whose answers count in the same cell (same day, function, responder, rung
    # and shard), answered 60 s, 10 s, then 120 s after they were raised (one batch each)
    ids = [q for q in (f"q-{n}" for n in range(100)) if shard_of(q) == shard_of("q-0")][:3]
    for n, (question_id, waited) in enumerate(zip(ids, (60, 10, 120), strict=True)):
        aws.raise_question(f"t-{n}", question_id, now=START)
        answered_at[0] = START + timedelta(seconds=waited)
        ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
        records = stream_records(aws)
        assert dispatch(records[handed:], stream) == []
        handed = len(records)

    # The 10 s answer is no new max and this process knows it: no write for it
    assert maxima == ["60000", "120000"]
    assert totals(aws)["time_to_answer"]["max_ms"] == 120_000
