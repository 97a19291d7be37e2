"""What lets the stack run at 1,000 questions a second, as synthesized.

FIFO queues in high-throughput mode (limits per thread, not per queue), indexes that project only
what their queries read and are keyed so that their writes spread, and every throughput limit a
context setting (infra.config) with the defaults docs/deploy.md and docs/performance.md document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from aws_cdk.assertions import Match
from test_template import logical_id

from infra import constants
from wait_service.resources import DISPATCHER, LEDGER, LISTED_ATTRIBUTES

if TYPE_CHECKING:
    from tests.infra.conftest import Synth

pytestmark = pytest.mark.infra


def test_inbox_and_outbox_are_high_throughput_fifo_queues(default_synth: Synth) -> None:
    stack = default_synth.stack
    queues = default_synth.resources("AWS::SQS::Queue")
    for queue in (stack.inbox.queue, stack.fanout.outbox):
        props = queues[logical_id(default_synth, queue)]["Properties"]
        assert (props["FifoQueue"], props["DeduplicationScope"], props["FifoThroughputLimit"]) == (
            True,
            "messageGroup",
            "perMessageGroupId",
        )


def test_ledger_indexes_project_only_what_a_page_reads_from_them(default_synth: Synth) -> None:
    props = default_synth.resources("AWS::DynamoDB::Table")[
        logical_id(default_synth, default_synth.stack.ledger.table)
    ]["Properties"]
    indexes = {index["IndexName"]: index for index in props["GlobalSecondaryIndexes"]}
    assert set(indexes) == {"by-status", "by-thread"}
    listing = indexes["by-status"]["Projection"]
    assert listing["ProjectionType"] == "INCLUDE"
    assert sorted(listing["NonKeyAttributes"]) == sorted(LISTED_ATTRIBUTES)
    # The envelope (the largest attribute) and the bookkeeping stay in the table only.
    assert not {"envelope", "kind", "reminders_sent", "expires_ttl"} & set(listing["NonKeyAttributes"])
    # A thread's page reads its items from the table by key: its index holds the keys alone, so
    # no move of a question writes it.
    assert indexes["by-thread"]["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    # The status listing is keyed on the write-sharded attribute, never on `status` (a handful of
    # values): every index key is high-cardinality.
    assert [k["AttributeName"] for k in indexes["by-status"]["KeySchema"]] == ["status_shard", "created_at"]
    assert [k["AttributeName"] for k in indexes["by-thread"]["KeySchema"]] == ["thread_id", "created_at"]
    assert all(index.partition_key != "status" for index in LEDGER.indexes)


def test_the_dispatcher_reads_the_ledger_stream_in_batches_sized_for_1000_questions_a_second(
    default_synth: Synth,
) -> None:
    # At 1,000 questions a second the ledger's stream carries about 10,000 records a second; each
    # dispatcher invocation costs a Lambda request, its log lines, an archive PutRecordBatch (2,000
    # a second per delivery stream) and an analytics transaction. Batches of 10 made that over 1,000
    # invocations a second; up to 100, gathered for at most a second, make it about 100 under load.
    ledger_id = logical_id(default_synth, default_synth.stack.ledger.table)
    [mapping] = [
        resource["Properties"]
        for resource in default_synth.resources("AWS::Lambda::EventSourceMapping").values()
        if resource["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [ledger_id, "StreamArn"]}
    ]
    assert (mapping["BatchSize"], mapping["MaximumBatchingWindowInSeconds"]) == (100, 1)
    assert (DISPATCHER.batch_size, DISPATCHER.max_batching_window_seconds) == (100, 1)
    # A batch of 100 records at a few calls each stays well within the function's timeout.
    dispatcher = default_synth.resources("AWS::Lambda::Function")[
        logical_id(default_synth, default_synth.stack.dispatcher.function)
    ]["Properties"]
    assert dispatcher["Timeout"] >= 30


def _stream_mapping(synth: Synth) -> dict[str, Any]:
    ledger_id = logical_id(synth, synth.stack.ledger.table)
    [mapping] = [
        resource["Properties"]
        for resource in synth.resources("AWS::Lambda::EventSourceMapping").values()
        if resource["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [ledger_id, "StreamArn"]}
    ]
    return dict(mapping)


def test_the_dispatchers_batches_of_a_shard_at_once_default_to_two_and_come_from_context(
    default_synth: Synth, bucket_synth: Synth
) -> None:
    # Two batches of a shard at once by default (under half busy at the default rate: make capacity);
    # dispatcher_parallelization takes it up to 10 (each item's changes still in order).
    assert (
        _stream_mapping(default_synth)["ParallelizationFactor"] == constants.DISPATCHER_PARALLELIZATION == 2
    )
    assert _stream_mapping(bucket_synth)["ParallelizationFactor"] == 10


def test_throughput_settings_default_to_the_documented_values(default_synth: Synth) -> None:
    default_synth.template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "MethodSettings": Match.array_with(
                [
                    Match.object_like(
                        {
                            "HttpMethod": "*",
                            "ResourcePath": "/*",
                            "ThrottlingRateLimit": constants.API_THROTTLE_RATE,
                            "ThrottlingBurstLimit": constants.API_THROTTLE_BURST,
                        }
                    )
                ]
            )
        },
    )
    default_synth.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {"ScalingConfig": {"MaximumConcurrency": constants.RUNNER_MAX_CONCURRENCY}},
    )
    runner = default_synth.resources("AWS::Lambda::Function")[
        logical_id(default_synth, default_synth.stack.runner.function)
    ]["Properties"]
    assert "ReservedConcurrentExecutions" not in runner


def test_throughput_settings_come_from_context(bucket_synth: Synth) -> None:
    bucket_synth.template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "MethodSettings": Match.array_with(
                [Match.object_like({"ThrottlingRateLimit": 1200, "ThrottlingBurstLimit": 2400})]
            )
        },
    )
    bucket_synth.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping", {"ScalingConfig": {"MaximumConcurrency": 25}}
    )
    runner = bucket_synth.resources("AWS::Lambda::Function")[
        logical_id(bucket_synth, bucket_synth.stack.runner.function)
    ]["Properties"]
    assert runner["ReservedConcurrentExecutions"] == 40


def _listing_shards(synth: Synth) -> dict[str, str]:
    """Each function that reads or writes the ledger: its listing shards variable (absent: missing)."""
    found = {}
    for name, function in synth.resources("AWS::Lambda::Function").items():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if "AGENT_WAIT_LEDGER_TABLE" in variables:
            found[name] = variables.get("AGENT_WAIT_LISTING_SHARDS", "missing")
    return found


def test_every_function_of_the_ledger_lists_over_the_same_shards(
    default_synth: Synth, bucket_synth: Synth
) -> None:
    # The api reads the shards the runner, lifecycle and dispatcher write questions into: one
    # count for all, one Query a page by default, the context's count when set.
    default = _listing_shards(default_synth)
    assert len(default) == 4
    assert set(default.values()) == {"1"}
    assert set(_listing_shards(bucket_synth).values()) == {"16"}
