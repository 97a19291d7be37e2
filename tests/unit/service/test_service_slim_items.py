"""A question item holds no envelope JSON; its reminders and escalations re-announce the same envelope.

Every move of a question rewrites its whole item, billed per KB: the item keeps the envelope's
fields once (question, policy, digest, times...) and only what the envelope adds to them
(``event_id``, ``reply_url``). The follow-up events are built from the envelope rebuilt from the
item, so they must carry exactly what they carried when the item held the envelope JSON; and items
written in that older form (deployed stacks) must keep working.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from boto3.dynamodb.types import TypeDeserializer

from agent_wait import Envelope, OnExpiry, approval
from agent_wait.aws.dynamodb import LEDGER_ENVELOPE_FIELDS, ledger_envelope
from agent_wait.envelope import isoformat_z
from agent_wait.errors import AnnounceError
from wait_service.answers.replies import REPLY_READS
from wait_service.ledger import Ledger
from wait_service.ledger.questions import lifecycle_entries
from wait_service.lifecycle.timers import TimerEvent
from wait_service.lifecycle.unanswered import LifecycleService, build_lifecycle, envelope_of

if TYPE_CHECKING:
    from service_events import Aws, FakeClock

POLICY = approval(
    ttl=60,
    reminders=[20, 40],
    on_expiry=OnExpiry(action="escalate", to=["managers"], answer={"action": "reject"}),
)


@pytest.fixture
def lifecycle(aws: Aws, clock: FakeClock) -> LifecycleService:
    return build_lifecycle(
        aws.settings, dynamodb=aws.dynamodb, sns=aws.sns, sqs=aws.sqs, scheduler=aws.scheduler, clock=clock
    )


@pytest.fixture
def ledger(aws: Aws, clock: FakeClock) -> Ledger:
    return Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)


def rewrite(aws: Aws, envelope: Envelope, expression: str, values: dict[str, Any] | None = None) -> None:
    """Change the question's stored item by hand, as another version would have written it."""
    aws.dynamodb.update_item(
        TableName=aws.resources.ledger_table,
        Key={"dedupe_key": {"S": envelope.dedupe_key}},
        UpdateExpression=expression,
        **({"ExpressionAttributeValues": values} if values else {}),
    )


def fire(lifecycle: LifecycleService, timer: str, n: int) -> str:
    return lifecycle.handle(TimerEvent.model_validate({"question_id": "q-1", "timer": timer, "n": n}))


def expected(follow_up: Envelope) -> dict[str, Any]:
    """An event's fields, its fresh ``event_id`` left out (each follow-up gets a new one)."""
    return follow_up.model_dump(mode="json", exclude={"event_id"})


def announced(aws: Aws) -> list[dict[str, Any]]:
    return [expected(Envelope.model_validate(event)) for event in aws.outbox()]


def test_the_item_holds_no_envelope_and_gives_back_the_published_one(
    aws: Aws, ledger: Ledger, clock: FakeClock
) -> None:
    envelope = aws.raise_question(
        policy=POLICY, question={"function": "pay", "args": {"amount": 40.5}}, now=clock.now
    )

    item = aws.dynamodb.get_item(
        TableName=aws.resources.ledger_table, Key={"dedupe_key": {"S": envelope.dedupe_key}}
    )["Item"]
    assert "envelope" not in item
    assert (item["event_id"], item["reply_url"]) == (
        {"S": envelope.event_id},
        {"S": "https://api.example/questions/q-1/reply"},
    )
    rebuilt = envelope_of(ledger.get_question("q-1"))
    assert rebuilt == envelope
    assert rebuilt.to_json() == envelope.to_json()


def test_a_reminder_after_an_escalation_carries_the_raised_envelope(
    aws: Aws, lifecycle: LifecycleService, ledger: Ledger, clock: FakeClock
) -> None:
    # Given a question escalated once: the write moved its expiry
    envelope = aws.raise_question(policy=POLICY, now=clock.now)
    clock.advance(60)
    assert fire(lifecycle, "expire", 0) == "escalated"
    moved = ledger.get_question("q-1")
    assert moved.expires_at != moved.raised_expires_at == "2026-11-30T10:01:00Z"
    [escalated] = announced(aws)
    assert escalated == expected(
        envelope.follow_up(
            "wait.escalated", 1, route="managers", expires_at=clock.now + timedelta(seconds=60)
        )
    )

    # When a reminder fires on the new rung
    assert fire(lifecycle, "remind", 2) == "reminded"

    # Then it is the original envelope's reminder, as when the item held the envelope JSON
    [reminder] = announced(aws)
    assert reminder == expected(envelope.follow_up("wait.reminder", 2))
    assert envelope_of(ledger.get_question("q-1")) == envelope


def test_an_extension_keeps_the_raised_expiry_once(aws: Aws, ledger: Ledger, clock: FakeClock) -> None:
    envelope = aws.raise_question(policy=approval(ttl=60, reminders=[30]), now=clock.now)
    for seconds in (60, 120):
        seen = ledger.get_question("q-1")
        until = clock.now + timedelta(seconds=60 + seconds)
        assert (
            ledger.record_extension(
                "q-1", seen=seen, until=until, seconds=seconds, max_total=3600, by="ops", reason="r"
            )
            is None
        )

    question = ledger.get_question("q-1")
    assert question.raised_expires_at == "2026-11-30T10:01:00Z" != question.expires_at
    assert envelope_of(question) == envelope


def test_a_crash_after_the_escalation_write_still_re_announces_the_same_envelope(
    aws: Aws, lifecycle: LifecycleService, ledger: Ledger, clock: FakeClock
) -> None:
    """The raised expiry is kept by the very write that moves the expiry: no crash separates them."""
    envelope = aws.raise_question(policy=POLICY, now=clock.now)
    clock.advance(60)

    def outbox_down(**_: Any) -> None:
        raise RuntimeError("outbox down")

    aws.sqs.meta.events.register("before-call.sqs.SendMessage", outbox_down)
    with pytest.raises(AnnounceError):
        fire(lifecycle, "expire", 0)
    aws.sqs.meta.events.unregister("before-call.sqs.SendMessage", outbox_down)
    assert ledger.get_question("q-1").escalation == 1

    assert fire(lifecycle, "expire", 0) == "escalated"
    assert fire(lifecycle, "remind", 2) == "reminded"
    escalated, reminder = announced(aws)
    assert escalated["expires_at"] == "2026-11-30T10:02:00Z"
    assert reminder == expected(envelope.follow_up("wait.reminder", 2))


def test_an_item_written_with_the_envelope_json_still_reminds(
    aws: Aws, lifecycle: LifecycleService, ledger: Ledger, clock: FakeClock
) -> None:
    # Given an item in the older form: the envelope JSON, no event_id or reply_url
    envelope = aws.raise_question(policy=POLICY, now=clock.now)
    rewrite(aws, envelope, "SET envelope = :e REMOVE event_id, reply_url", {":e": {"S": envelope.to_json()}})

    # When its reminder and escalation fire
    assert fire(lifecycle, "remind", 1) == "reminded"
    clock.advance(60)
    assert fire(lifecycle, "expire", 0) == "escalated"

    # Then they re-announce the stored envelope
    reminder, escalated = announced(aws)
    assert reminder == expected(envelope.follow_up("wait.reminder", 1))
    assert escalated["reply_with"] == reminder["reply_with"] == envelope.reply_with.model_dump(mode="json")
    assert envelope_of(ledger.get_question("q-1")) == envelope


def test_a_delivery_to_several_sinks_is_stored_once_and_read_as_one_stage_per_sink(
    aws: Aws, ledger: Ledger, clock: FakeClock
) -> None:
    envelope = aws.raise_question(policy=POLICY, now=clock.now)
    key = {"dedupe_key": {"S": envelope.dedupe_key}}

    assert ledger.mark_delivered("q-1", ["dynamodb", "sns", "sqs"])

    # The item stores the stage, its time and its actor once, with the sinks' list (and not the
    # raise before it: that is created_at and the agent)
    stored = aws.dynamodb.get_item(TableName=aws.resources.ledger_table, Key=key)["Item"]["lifecycle"]["L"]
    assert [entry["M"]["stage"]["S"] for entry in stored] == ["delivered"]
    assert stored[0]["M"]["details"] == {"L": [{"S": "dynamodb"}, {"S": "sns"}, {"S": "sqs"}]}
    assert "detail" not in stored[0]["M"]
    # and every reader sees the raise, then one delivered stage per sink, as before
    lifecycle = ledger.get_question("q-1").lifecycle
    assert lifecycle[0] == {"stage": "raised", "at": isoformat_z(envelope.created_at), "actor": "agent"}
    delivered = lifecycle[1:]
    assert [entry["detail"] for entry in delivered] == ["dynamodb", "sns", "sqs"]
    assert {(entry["at"], entry["actor"]) for entry in delivered} == {(stored[0]["M"]["at"]["S"], "runner")}
    assert all(set(entry) == {"stage", "at", "actor", "detail"} for entry in delivered)


def test_a_delivery_to_one_sink_keeps_its_detail_and_one_written_per_sink_reads_the_same(
    aws: Aws, ledger: Ledger, clock: FakeClock
) -> None:
    aws.raise_question(policy=POLICY, now=clock.now)
    assert ledger.mark_delivered("q-1", ["sns"])
    one = [entry for entry in ledger.get_question("q-1").lifecycle if entry["stage"] == "delivered"]
    assert one == [{"stage": "delivered", "at": one[0]["at"], "actor": "runner", "detail": "sns"}]

    # An item written before (its raise stored, an entry per sink) reads as it did
    older = aws.raise_question(policy=POLICY, question_id="q-2", now=clock.now)
    at = "2026-01-01T00:00:00.000Z"
    raised = {"M": {"stage": {"S": "raised"}, "at": {"S": at}, "actor": {"S": "agent"}}}
    per_sink = [
        {"M": {"stage": {"S": "delivered"}, "at": {"S": at}, "actor": {"S": "runner"}, "detail": {"S": sink}}}
        for sink in ("dynamodb", "sns")
    ]
    rewrite(aws, older, "SET lifecycle = :whole", {":whole": {"L": [raised, *per_sink]}})
    stages = ledger.get_question("q-2").lifecycle
    assert [(entry["stage"], entry["at"], entry.get("detail")) for entry in stages] == [
        ("raised", at, None),
        ("delivered", at, "dynamodb"),
        ("delivered", at, "sns"),
    ]


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        # No lifecycle stored yet: the raise alone
        (None, [{"stage": "raised", "at": "t0", "actor": "agent"}]),
        ([], [{"stage": "raised", "at": "t0", "actor": "agent"}]),
        # An entry whose details list is empty (never written so) keeps its stage
        (
            [{"stage": "delivered", "at": "t1", "actor": "runner", "details": []}],
            [
                {"stage": "raised", "at": "t0", "actor": "agent"},
                {"stage": "delivered", "at": "t1", "actor": "runner", "details": []},
            ],
        ),
        # A stored raise (items written before) is not repeated, whatever created_at says
        (
            [{"stage": "raised", "at": "t-stored", "actor": "agent"}],
            [{"stage": "raised", "at": "t-stored", "actor": "agent"}],
        ),
        # Details that are not a list are one detail's value, read as stored
        (
            [{"stage": "escalated", "at": "t1", "actor": "system:expiry", "details": "managers"}],
            [
                {"stage": "raised", "at": "t0", "actor": "agent"},
                {"stage": "escalated", "at": "t1", "actor": "system:expiry", "details": "managers"},
            ],
        ),
    ],
)
def test_a_stored_lifecycle_of_any_shape_reads_without_losing_a_stage(stored: Any, read: Any) -> None:
    assert lifecycle_entries(stored, "t0") == read


def test_a_record_without_created_at_gets_no_made_up_raise() -> None:
    # A partial read that did not ask for created_at (and so not for the lifecycle) invents nothing
    assert lifecycle_entries([{"stage": "answered", "at": "t1", "actor": "ann"}], None) == [
        {"stage": "answered", "at": "t1", "actor": "ann"}
    ]


def test_a_partial_read_without_the_lifecycle_shows_no_stage(
    ledger: Ledger, aws: Aws, clock: FakeClock
) -> None:
    # Given an answered question, read as the reply path reads it: created_at, not the lifecycle
    aws.raise_question(policy=POLICY, now=clock.now)
    assert ledger.record_answer("q-1", {"action": "approve"}, answered_by="ann") is None
    assert "created_at" in REPLY_READS and "lifecycle" not in REPLY_READS

    # Then its lifecycle holds its default (no first stage read back from created_at)
    assert ledger.get_question("q-1", reading=REPLY_READS).lifecycle == []
    assert [stage["stage"] for stage in ledger.get_question("q-1").lifecycle] == ["raised", "answered"]


def test_an_item_without_its_question_id_reads_the_id_from_its_key(
    aws: Aws, lifecycle: LifecycleService, ledger: Ledger, clock: FakeClock
) -> None:
    # Given an item as a later version may write it: the id in its key only
    envelope = aws.raise_question(policy=POLICY, now=clock.now)
    rewrite(aws, envelope, "REMOVE question_id")

    # Then every read names the question, its follow-ups re-announce the same envelope, and a
    # listing page shows it
    assert ledger.get_question("q-1").question_id == "q-1"
    assert ledger.get_question("q-1", reading=REPLY_READS).question_id == "q-1"  # a partial read
    assert envelope_of(ledger.get_question("q-1")) == envelope
    assert fire(lifecycle, "remind", 1) == "reminded"
    assert announced(aws) == [expected(envelope.follow_up("wait.reminder", 1))]
    assert [q.question_id for q in ledger.list_questions(status="pending").items] == ["q-1"]
    # and the fields the envelope is rebuilt from, read alone, rebuild it
    item = aws.dynamodb.get_item(
        TableName=aws.resources.ledger_table,
        Key={"dedupe_key": {"S": envelope.dedupe_key}},
        ProjectionExpression=", ".join("#source" if n == "source" else n for n in LEDGER_ENVELOPE_FIELDS),
        ExpressionAttributeNames={"#source": "source"},
    )["Item"]
    assert (
        ledger_envelope({name: TypeDeserializer().deserialize(value) for name, value in item.items()})
        == envelope
    )
