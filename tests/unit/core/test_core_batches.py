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
    calls,
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


def _names(entries: list[BatchEntry], positions: list[int]) -> list[str]:
    return [str(entries[p].fields["MessageBody"]) for p in positions]


@pytest.mark.parametrize("seed", range(40))
def test_calls_send_every_entry_once_within_each_limit_each_group_in_order(seed: int) -> None:
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

    planned = calls(entries)

    # Every entry once; each call within SQS's and SNS's limits, one entry of a group at most
    assert sorted(p for call in planned for p in call) == list(range(len(entries)))
    for call in planned:
        assert 1 <= len(call) <= MAX_BATCH_ENTRIES
        assert len(call) == 1 or sum(entries[p].size for p in call) <= MAX_BATCH_BYTES
        groups = [entries[p].group for p in call if entries[p].group is not None]
        assert len(groups) == len(set(groups))
    # A group's entries go in the order given, each in a later call than the one before it
    sent = {p: n for n, call in enumerate(planned) for p in call}
    for group in {e.group for e in entries if e.group is not None}:
        mine = [p for p, e in enumerate(entries) if e.group == group]
        assert [sent[p] for p in mine] == sorted(sent[p] for p in mine)
        assert len({sent[p] for p in mine}) == len(mine)


def test_a_call_ends_at_ten_entries_or_the_byte_limit_and_a_groups_next_message_waits_for_a_later_call() -> (
    None
):
    eleven = [_entry(f"a{n}") for n in range(11)]
    assert [len(call) for call in calls(eleven)] == [10, 1]

    # Three threads' three messages each, thread after thread: three calls, not nine
    threads = [_entry(f"{t}{n}", t) for t in "abc" for n in (1, 2, 3)]
    assert [_names(threads, call) for call in calls(threads)] == [
        ["a1", "b1", "c1"],
        ["a2", "b2", "c2"],
        ["a3", "b3", "c3"],
    ]

    # A message goes in the first call it fits in
    heavy = [_entry("h1", size=MAX_BATCH_BYTES - 10), _entry("h2", size=11), _entry("h3", size=1)]
    assert [_names(heavy, call) for call in calls(heavy)] == [["h1", "h3"], ["h2"]]

    # One message over the limit on its own still goes (in a call of its own: the service judges it)
    big = [_entry("big", size=MAX_BATCH_BYTES + 1), _entry("s")]
    assert [_names(big, call) for call in calls(big)] == [["big"], ["s"]]


class Refusing:
    """A batch call that refuses the entries named (by their message) and records what it sent."""

    def __init__(self, refuse: frozenset[str] = frozenset(), raise_on: frozenset[int] = frozenset()) -> None:
        self.refuse = refuse
        self.raise_on = raise_on
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


def test_a_refused_entry_stops_the_delivery_after_its_call_and_names_what_did_not_go() -> None:
    # 25 messages of 25 groups: calls of 10, 10 and 5; the 14th (in the second call) is refused
    entries = [_entry(f"m{n}", f"t-{n}") for n in range(25)]
    call = Refusing(refuse=frozenset({"m13"}))

    with pytest.raises(PartialDelivery) as raised:
        send_in_batches(entries, call)

    # The rest of its call went (SQS reports entries one by one); the third call was never sent
    assert raised.value.undelivered == [13, 20, 21, 22, 23, 24]
    assert raised.value.errors == ["InternalError: injected"]
    assert len(call.calls) == 2
    assert call.sent == [f"m{n}" for n in range(20) if n != 13]


def test_a_call_that_raises_leaves_its_entries_and_the_later_ones_undelivered() -> None:
    entries = [_entry(f"m{n}", f"t-{n}") for n in range(15)]
    call = Refusing(raise_on=frozenset({2}))

    with pytest.raises(PartialDelivery) as raised:
        send_in_batches(entries, call)

    assert raised.value.undelivered == list(range(10, 15))
    assert raised.value.errors == ["ConnectionError: connection reset"]
    assert isinstance(raised.value.__cause__, ConnectionError)


def test_a_group_refused_in_one_call_has_nothing_later_sent() -> None:
    # t-1's second message waits for the next call: the first one's failure stops it from going first
    entries = [_entry("t1-a", "t-1"), _entry("t2-a", "t-2"), _entry("t1-b", "t-1")]
    call = Refusing(refuse=frozenset({"t1-a"}))

    with pytest.raises(PartialDelivery) as raised:
        send_in_batches(entries, call)

    assert raised.value.undelivered == [0, 2]
    assert call.sent == ["t2-a"]


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
