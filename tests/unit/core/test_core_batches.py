"""Batch delivery to SQS and SNS: few calls, nothing lost, each message group in the order given."""

from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws

from agent_wait.aws import SnsAnnounce, SqsAnnounce
from agent_wait.aws.batches import (
    MAX_BATCH_BYTES,
    MAX_BATCH_ENTRIES,
    BatchEntry,
    PartialDelivery,
    runs,
    send_in_batches,
)
from agent_wait.testing import sample_envelope

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(autouse=True)
def _moto() -> Iterator[None]:
    with mock_aws():
        yield


def _entry(name: str, group: str | None = None, size: int = 100) -> BatchEntry:
    return BatchEntry({"MessageBody": name}, size, group)


def _names(run: list[BatchEntry]) -> list[str]:
    return [str(entry.fields["MessageBody"]) for entry in run]


@pytest.mark.parametrize("seed", range(40))
def test_runs_cover_every_entry_in_order_within_each_limit(seed: int) -> None:
    # Entries of random size (some near the byte limit) and groups (some none)
    rng = random.Random(seed)
    entries = [
        _entry(
            f"m-{n}",
            rng.choice([None, "t-1", "t-2", "t-3", f"t-{n}"]),
            rng.choice([10, 2_000, 60_000, MAX_BATCH_BYTES // 2 + 1]),
        )
        for n in range(rng.randint(0, 60))
    ]

    cut = list(runs(entries))

    # Consecutive runs, all of them, each one call's worth: ≤ 10 entries, ≤ 256 KiB, one per group
    assert [e for _, run in cut for e in run] == entries
    assert [start for start, _ in cut] == [sum(len(run) for _, run in cut[:n]) for n in range(len(cut))]
    for _, run in cut:
        assert 1 <= len(run) <= MAX_BATCH_ENTRIES
        assert sum(e.size for e in run) <= MAX_BATCH_BYTES
        groups = [e.group for e in run if e.group is not None]
        assert len(groups) == len(set(groups))


def test_a_run_ends_at_the_eleventh_entry_a_repeated_group_and_the_byte_limit() -> None:
    ten = [_entry(f"a{n}") for n in range(11)]
    assert [len(run) for _, run in runs(ten)] == [10, 1]

    grouped = [_entry("x1", "t-1"), _entry("y1", "t-2"), _entry("x2", "t-1")]
    assert [_names(run) for _, run in runs(grouped)] == [["x1", "y1"], ["x2"]]

    heavy = [_entry("h1", size=MAX_BATCH_BYTES - 10), _entry("h2", size=11), _entry("h3", size=1)]
    assert [_names(run) for _, run in runs(heavy)] == [["h1"], ["h2", "h3"]]

    # One message over the limit on its own still goes (in a call of its own: the service judges it)
    assert [_names(run) for _, run in runs([_entry("big", size=MAX_BATCH_BYTES + 1), _entry("s")])] == [
        ["big"],
        ["s"],
    ]


class Refusing:
    """A batch call that refuses the entries named (by their message) and records what it sent."""

    def __init__(self, refuse: set[str] = frozenset(), raise_on: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.refuse = set(refuse)
        self.raise_on = set(raise_on)
        self.calls: list[list[str]] = []
        self.sent: list[str] = []

    def __call__(self, batch: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append([e["MessageBody"] for e in batch])
        if len(self.calls) in self.raise_on:
            raise ConnectionError("connection reset")
        failed = [e for e in batch if e["MessageBody"] in self.refuse]
        self.sent += [e["MessageBody"] for e in batch if e not in failed]
        return {
            "Successful": [{"Id": e["Id"]} for e in batch if e not in failed],
            "Failed": [{"Id": e["Id"], "Code": "InternalError", "Message": "injected"} for e in failed],
        }


def test_a_refused_entry_stops_the_delivery_there_and_names_its_position() -> None:
    # 25 messages of 25 groups: runs of 10, 10 and 5; the 14th (in the second run) is refused
    entries = [_entry(f"m{n}", f"t-{n}") for n in range(25)]
    call = Refusing(refuse={"m13"})

    with pytest.raises(PartialDelivery) as raised:
        send_in_batches(entries, call)

    # Everything before it went; the rest of its run went too (SQS reports entries one by one),
    # and the third run was never sent
    assert raised.value.first_failed == 13
    assert raised.value.errors == ["InternalError: injected"]
    assert len(call.calls) == 2
    assert call.sent == [f"m{n}" for n in range(25) if n < 20 and n != 13]
    # The batch ids are positions within the call
    assert "m13" in call.calls[1]


def test_a_call_that_raises_names_the_first_entry_of_its_run() -> None:
    entries = [_entry(f"m{n}", f"t-{n}") for n in range(15)]
    call = Refusing(raise_on={2})

    with pytest.raises(PartialDelivery) as raised:
        send_in_batches(entries, call)

    assert raised.value.first_failed == 10
    assert raised.value.errors == ["ConnectionError: connection reset"]
    assert isinstance(raised.value.__cause__, ConnectionError)


def test_a_group_refused_in_one_call_has_nothing_later_sent() -> None:
    # t-1's second message is in the next run: the first one's failure stops it from going first
    entries = [_entry("t1-a", "t-1"), _entry("t2-a", "t-2"), _entry("t1-b", "t-1")]
    call = Refusing(refuse={"t1-a"})

    with pytest.raises(PartialDelivery) as raised:
        send_in_batches(entries, call)

    assert raised.value.first_failed == 0
    assert "t1-b" not in call.sent


def _fifo_queue(sqs: Any, name: str) -> str:
    return str(
        sqs.create_queue(
            QueueName=name, Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"}
        )["QueueUrl"]
    )


def _drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while batch := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], AttributeNames=["All"]
    ).get("Messages"):
        messages += batch
        for message in batch:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return messages


def _counting(client: Any) -> list[str]:
    calls: list[str] = []
    client.meta.events.register("before-call.*.*", lambda model, **_: calls.append(model.name))
    return calls


def test_sqs_batch_delivery_sends_what_deliver_sends_in_fewer_calls_each_thread_in_order() -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    one_by_one, batched = _fifo_queue(sqs, "one.fifo"), _fifo_queue(sqs, "batched.fifo")
    # 24 questions of 4 threads, interleaved
    envelopes = [sample_envelope(f"q-{n}", f"thread-{n % 4}") for n in range(24)]
    for envelope in envelopes:
        SqsAnnounce(one_by_one, client=sqs).deliver(envelope)
    calls = _counting(sqs)

    SqsAnnounce(batched, client=sqs).deliver_batch(envelopes)
    # 4 threads a call at most: 6 calls for 24 messages, not 24
    assert calls == ["SendMessageBatch"] * 6
    # Sent again (a retried batch): the FIFO queue drops every one by its deduplication id
    SqsAnnounce(batched, client=sqs).deliver_batch(envelopes)

    expected, got = _drain(sqs, one_by_one), _drain(sqs, batched)
    assert [(m["Body"], m["MessageAttributes"], m["Attributes"]["MessageGroupId"]) for m in got] == [
        (m["Body"], m["MessageAttributes"], m["Attributes"]["MessageGroupId"]) for m in expected
    ]
    for thread in range(4):
        bodies = [
            json.loads(m["Body"]) for m in got if m["Attributes"]["MessageGroupId"] == f"thread-{thread}"
        ]
        assert [b["question_id"] for b in bodies] == [f"q-{n}" for n in range(thread, 24, 4)]


def test_sns_batch_delivery_publishes_what_deliver_publishes_in_fewer_calls() -> None:
    sns, sqs = boto3.client("sns", region_name="us-east-1"), boto3.client("sqs", region_name="us-east-1")
    topics = {}
    for name in ("one", "batched"):
        arn = sns.create_topic(Name=name)["TopicArn"]
        url = sqs.create_queue(QueueName=f"{name}-subscriber")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        sns.subscribe(
            TopicArn=arn, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"}
        )
        topics[name] = (arn, url)
    envelopes = [sample_envelope(f"q-{n}", f"thread-{n % 3}") for n in range(23)]
    for envelope in envelopes:
        SnsAnnounce(topics["one"][0], client=sns).deliver(envelope)
    calls = _counting(sns)

    SnsAnnounce(topics["batched"][0], client=sns).deliver_batch(envelopes)

    # A standard topic keeps no order per thread: full calls of 10
    assert calls == ["PublishBatch"] * 3
    expected, got = _drain(sqs, topics["one"][1]), _drain(sqs, topics["batched"][1])
    assert sorted((m["Body"], json.dumps(m["MessageAttributes"], sort_keys=True)) for m in got) == sorted(
        (m["Body"], json.dumps(m["MessageAttributes"], sort_keys=True)) for m in expected
    )
    assert len(got) == 23


def test_a_batch_delivery_of_nothing_makes_no_call() -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    announce = SqsAnnounce(_fifo_queue(sqs, "empty.fifo"), client=sqs)
    calls = _counting(sqs)
    announce.deliver_batch([])
    assert calls == []
