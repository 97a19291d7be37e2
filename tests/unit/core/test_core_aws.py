"""The AWS announcers against moto's in-process mock (no network), plus their request shapes."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from boto3.dynamodb.types import TypeDeserializer
from moto import mock_aws

from agent_wait import (
    Envelope,
    OnExpiry,
    Policy,
    Question,
    approval,
    build_envelope,
    canonical_json,
    decision,
)
from agent_wait.aws import DynamoDbAnnounce, SnsAnnounce, SqsAnnounce
from agent_wait.aws.dynamodb import (
    ledger_envelope,
    ledger_put,
    question_id_of,
    raised_stage,
    read_policy,
    status_shard,
    stored_policy,
)
from agent_wait.errors import QuestionCollisionError
from agent_wait.testing import AnnounceConformance, sample_envelope

if TYPE_CHECKING:
    from collections.abc import Iterator

    from agent_wait import BaseAnnounce


@pytest.fixture(autouse=True)
def _moto() -> Iterator[None]:
    with mock_aws():
        yield


def _drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while batch := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=0
    ).get("Messages"):
        messages += batch
        for message in batch:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return messages


class RecordingClient:
    """Records the calls an announcer makes; stands in for a boto3 client."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, operation: str) -> Any:
        return lambda **kwargs: self.calls.append((operation, kwargs))


class TestSqsAnnounceFifo(AnnounceConformance):
    deduplicates = True

    def make_announce(self) -> SqsAnnounce:
        self.sqs = boto3.client("sqs", region_name="us-east-1")
        url = self.sqs.create_queue(
            QueueName="outbox.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"}
        )["QueueUrl"]
        return SqsAnnounce(url, client=self.sqs)

    def delivered(self, announce: BaseAnnounce) -> list[Envelope]:
        assert isinstance(announce, SqsAnnounce)
        return [Envelope.model_validate_json(m["Body"]) for m in _drain(self.sqs, announce.queue_url)]

    def make_broken(self) -> SqsAnnounce:
        return SqsAnnounce(
            "https://sqs.us-east-1.amazonaws.com/123456789012/missing.fifo",
            client=boto3.client("sqs", region_name="us-east-1"),
        )


class TestSnsAnnounce(AnnounceConformance):
    def make_announce(self) -> SnsAnnounce:
        sns = boto3.client("sns", region_name="us-east-1")
        self.sqs = boto3.client("sqs", region_name="us-east-1")
        topic = sns.create_topic(Name="wait-created")["TopicArn"]
        self.url = self.sqs.create_queue(QueueName="subscriber")["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})
        return SnsAnnounce(topic, client=sns)

    def delivered(self, announce: BaseAnnounce) -> list[Envelope]:
        messages = _drain(self.sqs, self.url)
        for message in messages:
            attrs = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
            assert attrs["type"] == "wait.created"
            envelope = Envelope.model_validate_json(message["Body"])
            assert attrs == {
                "type": "wait.created",
                "dedupe_key": envelope.dedupe_key,
                "thread_id": envelope.thread_id,
                "function": envelope.question["function"]  # type: ignore[index,call-overload]
                if isinstance(envelope.question, dict)
                else "interrupt",
                "status": "raised",
                "policy_kind": envelope.policy.kind,
            }
        # A standard topic gives no order guarantee; the suite compares in publish order.
        return sorted((Envelope.model_validate_json(m["Body"]) for m in messages), key=lambda e: e.event_id)

    def make_broken(self) -> SnsAnnounce:
        return SnsAnnounce(
            "arn:aws:sns:us-east-1:123456789012:missing", client=boto3.client("sns", region_name="us-east-1")
        )


class TestDynamoDbAnnounce(AnnounceConformance):
    deduplicates = True

    def make_announce(self) -> DynamoDbAnnounce:
        self.ddb = boto3.client("dynamodb", region_name="us-east-1")
        self.ddb.create_table(
            TableName="ledger",
            KeySchema=[{"AttributeName": "dedupe_key", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "dedupe_key", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        return DynamoDbAnnounce("ledger", client=self.ddb)

    def delivered(self, announce: BaseAnnounce) -> list[Envelope]:
        items = self.ddb.scan(TableName="ledger")["Items"]
        # The item holds the envelope's fields, not its JSON: the envelope is rebuilt from them.
        envelopes = [ledger_envelope(plain_values(item)) for item in items]
        return sorted(envelopes, key=lambda e: e.event_id)

    def make_broken(self) -> DynamoDbAnnounce:
        return DynamoDbAnnounce("missing", client=boto3.client("dynamodb", region_name="us-east-1"))


def test_sns_fifo_topic_adds_group_and_deduplication_ids() -> None:
    client = RecordingClient()
    envelope = sample_envelope("q-f", "thread-f")
    SnsAnnounce("arn:aws:sns:us-east-1:123456789012:wait-created.fifo", client=client).deliver(envelope)
    SnsAnnounce("arn:aws:sns:us-east-1:123456789012:wait-created", client=client).deliver(envelope)
    (op, fifo), (_, standard) = client.calls
    assert op == "publish"
    assert (fifo["MessageGroupId"], fifo["MessageDeduplicationId"]) == ("thread-f", "wait.created:q-f")
    assert "MessageGroupId" not in standard and "MessageDeduplicationId" not in standard
    assert fifo["Message"] == standard["Message"] == envelope.to_json()
    assert standard["MessageAttributes"]["dedupe_key"] == {
        "DataType": "String",
        "StringValue": "wait.created:q-f",
    }


def test_sqs_fifo_message_ids() -> None:
    client = RecordingClient()
    SqsAnnounce("https://sqs.us-east-1.amazonaws.com/1/outbox.fifo", client=client).deliver(
        sample_envelope("q", "t")
    )
    [(op, kwargs)] = client.calls
    assert op == "send_message"
    assert (kwargs["MessageDeduplicationId"], kwargs["MessageGroupId"]) == ("wait.created:q", "t")


def test_default_clients_come_from_boto3() -> None:
    assert SqsAnnounce("https://x/q.fifo").client.meta.service_model.service_name == "sqs"
    assert SnsAnnounce("arn:aws:sns:us-east-1:1:t").client.meta.service_model.service_name == "sns"
    assert DynamoDbAnnounce("ledger").client.meta.service_model.service_name == "dynamodb"


def test_ledger_item_matches_internals_and_floats_become_numbers() -> None:
    """The question item as docs/internals.md "Ledger" specifies it."""
    ddb = boto3.resource("dynamodb", region_name="us-east-1")
    table = ddb.create_table(
        TableName="ledger",
        KeySchema=[{"AttributeName": "dedupe_key", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "dedupe_key", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    envelope = build_envelope(
        "thread-1",
        Question(
            question_id="q-1",
            question={"function": "pay", "args": {"amount": 40.5, "items": [1, 2.25], "note": None}},
            policy=approval(ttl=60),
            source={"function": "pay", "module": "m"},
        ),
        reply_url="https://api.example/questions/{question_id}/reply",
    )
    assert DynamoDbAnnounce("ledger", client=boto3.client("dynamodb", region_name="us-east-1")).announce(
        envelope
    )

    item = table.get_item(Key={"dedupe_key": envelope.dedupe_key})["Item"]
    created = envelope.created_at.isoformat().replace("+00:00", "Z")
    assert item == {
        "dedupe_key": "wait.created:q-1",
        "kind": "question",
        # Kept though the key holds it: earlier versions read it
        "question_id": "q-1",
        "thread_id": "thread-1",
        "digest": envelope.digest,
        "status": "raised",
        # The status listing's shard: open while a person may answer, numbered from the id.
        "status_shard": status_shard("open", "q-1"),
        "created_at": created,
        "updated_at": created,
        "expires_at": envelope.expires_at.isoformat().replace("+00:00", "Z"),  # type: ignore[union-attr]
        # Not the envelope JSON (half the item, billed at every move): what it adds to these fields.
        "event_id": envelope.event_id,
        "question": {
            "function": "pay",
            "args": {"amount": Decimal("40.5"), "items": [1, Decimal("2.25")], "note": None},
        },
        # The policy's fields left at "none" (null, empty list) are not stored
        "policy": {"kind": "approval", "ttl": 60, "bind": True},
        "source": {"function": "pay", "module": "m"},
        "reply_url": "https://api.example/questions/q-1/reply",
        # No lifecycle yet: its first stage, raised, is created_at and the agent
    }
    assert (question_id_of(item["dedupe_key"]), raised_stage(created)) == (
        "q-1",
        {"stage": "raised", "at": created, "actor": "agent"},
    )
    assert read_policy(item["policy"]) == approval(ttl=60).model_dump(mode="json")
    # The envelope its follow-ups re-announce is the one published, field for field and byte for byte.
    rebuilt = ledger_envelope(item)
    assert rebuilt == envelope
    assert rebuilt.to_json() == envelope.to_json()


def plain_values(item: dict[str, Any]) -> dict[str, Any]:
    """A low-level item's attributes as plain values (what the boto3 resource reads)."""
    deserializer = TypeDeserializer()
    return {name: deserializer.deserialize(value) for name, value in item.items()}


@pytest.mark.parametrize("reply_url", [None, "https://api.example/questions/{question_id}/reply"])
@pytest.mark.parametrize("ttl", [None, 3600])
def test_envelope_rebuilt_from_the_item_is_the_published_one(reply_url: str | None, ttl: int | None) -> None:
    """Every field of the envelope comes back: ids, digest, question (exact numbers), policy,
    source, policy version, times and reply_with; an expiry moved later leaves the raised one."""
    envelope = build_envelope(
        "thread-r",
        Question(
            question_id="q-r",
            question={
                "function": "pay",
                "args": {"amount": 0.1, "big": 12345678901234567890, "nested": [{"x": -2.5e-7}]},
            },
            policy=approval(ttl=ttl, reminders=[60, 120]),
            source={"function": "pay", "line": 12},
            policy_version=3,
        ),
        reply_url=reply_url,
    )
    item = plain_values(ledger_put("ledger", envelope)["Item"])
    assert "envelope" not in item
    assert ledger_envelope(item).to_json() == envelope.to_json()
    moved = {**item, "expires_at": "2030-01-01T00:00:00Z", "raised_expires_at": item["expires_at"]}
    if ttl is not None:
        assert ledger_envelope(moved) == envelope


def test_item_written_with_the_envelope_json_still_gives_it() -> None:
    """Items written before the slimming hold the envelope JSON (deployed stacks): it is read as is."""
    envelope = sample_envelope("q-old-format", policy=approval(ttl=60))
    item = plain_values(ledger_put("ledger", envelope)["Item"])
    old = {name: value for name, value in item.items() if name not in ("event_id", "reply_url")}
    old["envelope"] = envelope.to_json()
    assert ledger_envelope(old) == envelope
    with pytest.raises(KeyError):
        ledger_envelope({name: value for name, value in item.items() if name != "event_id"})


def test_ledger_write_is_a_put_only_when_the_item_is_absent() -> None:
    client = RecordingClient()
    envelope = sample_envelope("q-put")
    DynamoDbAnnounce("ledger", client=client).deliver(envelope)
    [(operation, request)] = client.calls
    assert operation == "put_item"
    assert request["TableName"] == "ledger"
    assert request["ConditionExpression"] == "attribute_not_exists(dedupe_key)"
    assert request["Item"]["dedupe_key"] == {"S": "wait.created:q-put"}


def test_a_republish_with_another_digest_leaves_the_first_item_untouched() -> None:
    """The first publish's item stands whole, and the other question is not swallowed: a collision."""
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(
        TableName="ledger",
        KeySchema=[{"AttributeName": "dedupe_key", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "dedupe_key", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    announce = DynamoDbAnnounce("ledger", client=ddb)
    first = sample_envelope("q-same", policy=approval(ttl=60))
    assert announce.announce(first)
    key = {"dedupe_key": {"S": first.dedupe_key}}
    stored = ddb.get_item(TableName="ledger", Key=key)["Item"]

    other = sample_envelope(
        "q-same", question={"function": "issue_refund", "args": {"amount": 99}}, policy=approval(ttl=600)
    )
    assert other.digest != first.digest
    assert announce.announce(other) is False
    with pytest.raises(QuestionCollisionError) as collided:
        announce.deliver(other)
    assert collided.value.stored_digest == first.digest
    # The same question again is recorded already: that counts as delivered
    assert announce.announce(first) is True

    assert ddb.get_item(TableName="ledger", Key=key)["Item"] == stored
    assert stored["digest"] == {"S": first.digest}


def test_a_question_recorded_before_digests_bound_the_id_is_the_same_question() -> None:
    """A question parked across the upgrade (its item holds the digest of question and policy
    alone) republishes as delivered, untouched; another question under its id still collides."""
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(
        TableName="ledger",
        KeySchema=[{"AttributeName": "dedupe_key", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "dedupe_key", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    announce = DynamoDbAnnounce("ledger", client=ddb)
    envelope = sample_envelope("q-old", policy=approval(ttl=60))
    old_digest = hashlib.sha256(
        canonical_json(
            {"question": envelope.question, "policy": envelope.policy.model_dump(mode="json")}
        ).encode()
    ).hexdigest()
    assert announce.announce(envelope.model_copy(update={"digest": old_digest}))
    key = {"dedupe_key": {"S": envelope.dedupe_key}}
    stored = ddb.get_item(TableName="ledger", Key=key)["Item"]

    assert announce.announce(envelope) is True
    assert ddb.get_item(TableName="ledger", Key=key)["Item"] == stored
    other = sample_envelope("q-old", question={"function": "issue_refund", "args": {"amount": 99}})
    with pytest.raises(QuestionCollisionError):
        announce.deliver(other)


@pytest.mark.parametrize(
    "policy",
    [
        Policy(),
        approval(ttl=60),
        approval(ttl=3600, reminders=[600, 1800], responders=["ops"], prompt="Refund?"),
        decision(["a", "b"], on_expiry=OnExpiry(action="default", answer={"choice": "a"})),
        approval(approvals_required=2, requester_cannot_approve=True, max_extension=600),
    ],
)
def test_a_stored_policy_reads_back_whole_and_in_order(policy: Policy) -> None:
    whole = policy.model_dump(mode="json")
    stored = stored_policy(policy)
    # Nothing left at null or empty is stored; everything else is, as dumped
    assert all(value is not None and value != [] for value in stored.values())
    assert {name: value for name, value in whole.items() if name in stored} == stored
    # and the reader gives the dump back, key for key and in its order
    assert list(read_policy(stored).items()) == list(whole.items())
    assert Policy.model_validate(stored) == policy


def test_a_policy_stored_whole_or_odd_reads_as_stored() -> None:
    whole = approval(ttl=60).model_dump(mode="json")
    assert read_policy(whole) == whole  # items written before
    assert read_policy({}) == {}
    # A key no policy has (written by hand, or by a later version) is kept, after the known ones
    read = read_policy({"kind": "approval", "future_field": 1})
    assert read["future_field"] == 1 and read["prompt"] is None and list(read)[-1] == "future_field"


@pytest.mark.parametrize(
    "policy",
    [
        approval(ttl=60, max_extension=5, requester_cannot_approve=True),
        decision(
            ["a"],
            prompt="p",
            ttl=10,
            reminders=[1],
            responders=["r"],
            on_expiry=OnExpiry(action="escalate", to=["m"]),
        ),
    ],
    ids=["fields-left-out-at-their-default", "every-none-field-set"],
)
def test_a_policy_stored_in_any_key_order_reads_in_the_models_order(policy: Policy) -> None:
    # DynamoDB keeps no order of a map's keys: the read gives the model's whatever the stored one
    stored = dict(reversed(list(stored_policy(policy).items())))
    assert list(read_policy(stored).items()) == list(policy.model_dump(mode="json").items())


def test_each_read_policy_has_lists_of_its_own() -> None:
    # A caller changing one read policy's list changes no other read
    first, second = read_policy({"kind": "approval"}), read_policy({"kind": "approval"})
    first["reminders"].append(60)
    assert second["reminders"] == [] and read_policy({"kind": "approval"})["responders"] == []
