"""Every wait ends on its own: expiry, default answers, escalation, reminders, revocation.

Seed 002: "If Ttl expires with no interaction, Ved either applies a default response or forwards
to Routing.secondary per OnExpiry ... Nothing waiting on a human silently vanishes." Time is a
``FakeClock``; timers are fired by calling the lifecycle handler as EventBridge Scheduler would.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from service_events import api_event, body_of, load_handler, reply_event

from agent_wait import OnExpiry, approval
from wait_service.ledger import Ledger
from wait_service.lifecycle.timers import TimerEvent, schedule_name
from wait_service.lifecycle.unanswered import LifecycleService, build_lifecycle
from wait_service.observability import metrics

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from service_events import Aws, FakeClock, LambdaContext

    Call = Callable[[dict[str, Any]], dict[str, Any]]

APPROVE = {"action": "approve"}
TIMED_OUT = {"action": "reject", "reason": "nobody answered in time"}
LADDER = OnExpiry(action="escalate", to=["managers", "directors"], answer=TIMED_OUT)


@pytest.fixture(autouse=True)
def fresh_metrics() -> Iterator[None]:
    metrics.clear_metrics()
    yield
    metrics.clear_metrics()


def metric(name: str) -> float:
    return float(sum(metrics.metric_set.get(name, {}).get("Value", [])))


@pytest.fixture
def lifecycle(aws: Aws, clock: FakeClock) -> LifecycleService:
    return build_lifecycle(
        aws.settings, dynamodb=aws.dynamodb, sns=aws.sns, sqs=aws.sqs, scheduler=aws.scheduler, clock=clock
    )


@pytest.fixture
def ledger(aws: Aws, clock: FakeClock) -> Ledger:
    return Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)


def fire(lifecycle: LifecycleService, timer: str, n: int = 0, question_id: str = "q-1") -> str:
    return lifecycle.handle(TimerEvent.model_validate({"question_id": question_id, "timer": timer, "n": n}))


def resumes(aws: Aws) -> list[dict[str, Any]]:
    return [
        {k: m[k] for k in ("thread_id", "question_id")} for m in aws.inbox_messages() if "question_id" in m
    ]


def revoke_event(question_id: str, body: Any, **kwargs: Any) -> dict[str, Any]:
    return api_event(
        "reply.json",
        path=f"/questions/{question_id}/revoke",
        resource="/questions/{question_id}/revoke",
        path_parameters={"question_id": question_id},
        body=json.dumps(body),
        **kwargs,
    )


def quoted(digest: str) -> str:
    return f'"{digest}"'


# -- expiry ------------------------------------------------------------------------------------


def test_expiry_with_a_default_answers_the_question_and_resumes_the_thread(
    aws: Aws, lifecycle: LifecycleService, ledger: Ledger, clock: FakeClock, call: Call
) -> None:
    # Given an approval whose ttl runs out with a default answer
    envelope = aws.raise_question(
        policy=approval(ttl=60, on_expiry=OnExpiry(action="default", answer=TIMED_OUT)), now=clock.now
    )
    clock.advance(60)

    # When its expiry timer fires
    assert fire(lifecycle, "expire") == "expired"

    # Then it is answered with the default by the system, and the thread resumed with it, once
    question = ledger.get_question("q-1")
    assert (question.status, question.answer, question.answered_by) == ("expired", TIMED_OUT, "system:expiry")
    assert question.lifecycle[-1]["stage"] == "expired"
    assert resumes(aws) == [{"thread_id": "t-1", "question_id": "q-1"}]
    assert metric("QuestionsExpired") == 1
    # and a later reply gets 410 with the standing answer
    late = call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))
    assert late["statusCode"] == 410
    assert body_of(late)["standing_answer"] == TIMED_OUT


def test_expiry_without_on_expiry_resumes_the_thread_with_a_rejection(
    aws: Aws, lifecycle: LifecycleService, ledger: Ledger, clock: FakeClock
) -> None:
    aws.raise_question(policy=approval(ttl=60), now=clock.now)
    clock.advance(60)

    assert fire(lifecycle, "expire") == "expired"

    question = ledger.get_question("q-1")
    assert (question.status, question.answer) == ("expired", {"action": "reject", "reason": "expired"})
    assert resumes(aws) == [{"thread_id": "t-1", "question_id": "q-1"}]


# -- escalation --------------------------------------------------------------------------------


def test_an_escalation_ladder_moves_one_rung_per_ttl_and_stays_answerable(
    aws: Aws, lifecycle: LifecycleService, ledger: Ledger, clock: FakeClock, call: Call
) -> None:
    # Given a question with a two-rung ladder, raised and delivered
    envelope = aws.raise_question(policy=approval(ttl=60, on_expiry=LADDER), now=clock.now)
    aws.subscribed()

    # When its first ttl runs out
    clock.advance(60)
    assert fire(lifecycle, "expire", 0) == "escalated"

    # Then it moved to the first rung, with a new expiry, and a wait.escalated event went out
    question = ledger.get_question("q-1")
    assert (question.status, question.escalation) == ("escalated", 1)
    assert question.expires_at == "2026-11-30T10:02:00.000Z"
    assert question.lifecycle[-1] | {"at": "-"} == {
        "stage": "escalated",
        "at": "-",
        "actor": "system:expiry",
        "detail": "managers",
    }
    [escalated] = aws.outbox()
    assert {
        k: escalated[k] for k in ("type", "question_id", "digest", "route", "escalation", "dedupe_key")
    } == {
        "type": "wait.escalated",
        "question_id": "q-1",
        "digest": envelope.digest,
        "route": "managers",
        "escalation": 1,
        "dedupe_key": "wait.escalated:q-1:1",
    }
    [(on_topic, attributes)] = aws.subscribed()
    assert on_topic == escalated
    assert (attributes["type"], attributes["route"]) == ("wait.escalated", "managers")
    assert metric("QuestionsEscalated") == 1
    # and the next rung's timer is armed at the new expiry
    assert aws.schedules()[schedule_name("q-1", "expire", 1)]["at"] == "at(2026-11-30T10:02:00)"

    # When the second rung's ttl runs out too, and then someone answers with the same If-Match
    clock.advance(60)
    assert fire(lifecycle, "expire", 1) == "escalated"
    assert ledger.get_question("q-1").escalation == 2
    assert [e["route"] for e in aws.outbox()] == ["directors"]
    reply = call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))

    # Then the answer stands as any other, and the thread is resumed once
    assert reply["statusCode"] == 202
    assert ledger.get_question("q-1").status == "answered"
    assert resumes(aws) == [{"thread_id": "t-1", "question_id": "q-1"}]


def test_a_ladder_that_runs_out_applies_its_default(
    aws: Aws, lifecycle: LifecycleService, ledger: Ledger, clock: FakeClock
) -> None:
    aws.raise_question(policy=approval(ttl=60, on_expiry=LADDER), now=clock.now)
    for rung in (0, 1):
        clock.advance(60)
        assert fire(lifecycle, "expire", rung) == "escalated"

    clock.advance(60)
    assert fire(lifecycle, "expire", 2) == "expired"

    question = ledger.get_question("q-1")
    assert (question.status, question.answer, question.escalation) == ("expired", TIMED_OUT, 2)
    assert resumes(aws) == [{"thread_id": "t-1", "question_id": "q-1"}]


def test_a_ladder_without_a_default_ends_in_the_plain_expiry_rejection(
    aws: Aws, lifecycle: LifecycleService, ledger: Ledger, clock: FakeClock
) -> None:
    aws.raise_question(
        policy=approval(ttl=60, on_expiry=OnExpiry(action="escalate", to=["managers"])), now=clock.now
    )
    assert fire(lifecycle, "expire", 0) == "escalated"
    assert fire(lifecycle, "expire", 1) == "expired"

    assert ledger.get_question("q-1").answer == {"action": "reject", "reason": "expired"}


# -- reminders ---------------------------------------------------------------------------------


def test_reminders_go_out_while_the_question_is_open_and_never_after(
    aws: Aws, lifecycle: LifecycleService, ledger: Ledger, clock: FakeClock, call: Call
) -> None:
    # Given a question with three reminders
    envelope = aws.raise_question(policy=approval(ttl=3600, reminders=[60, 600, 1800]), now=clock.now)

    # When the first two fire
    assert fire(lifecycle, "remind", 1) == "reminded"
    assert fire(lifecycle, "remind", 2) == "reminded"

    # Then two wait.reminder events went out, numbered, and the lifecycle shows them
    sent = aws.outbox()
    assert [(e["type"], e["reminder"], e["dedupe_key"]) for e in sent] == [
        ("wait.reminder", 1, "wait.reminder:q-1:1"),
        ("wait.reminder", 2, "wait.reminder:q-1:2"),
    ]
    assert [(s["stage"], s.get("detail")) for s in ledger.get_question("q-1").lifecycle] == [
        ("raised", None),
        ("reminded", 1),
        ("reminded", 2),
    ]
    assert metric("RemindersSent") == 2

    # When the question is answered, then the third reminder fires
    assert call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))["statusCode"] == 202
    assert fire(lifecycle, "remind", 3) == "closed"

    # Then nothing more goes out
    assert aws.outbox() == []
    assert metric("RemindersSent") == 2


# -- idempotent timers -------------------------------------------------------------------------


def test_a_timer_firing_twice_late_or_after_an_answer_changes_nothing(
    aws: Aws, lifecycle: LifecycleService, ledger: Ledger, clock: FakeClock, call: Call
) -> None:
    # Given a question answered before its expiry timer fired
    envelope = aws.raise_question(
        policy=approval(ttl=60, on_expiry=OnExpiry(action="default", answer=TIMED_OUT)), now=clock.now
    )
    assert call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))["statusCode"] == 202
    answered = ledger.get_question("q-1")

    # When the timer fires late, and again
    clock.advance(3600)
    assert fire(lifecycle, "expire", 0) == "decided"
    assert fire(lifecycle, "expire", 0) == "decided"

    # Then the answer stands and the thread was resumed once, by the reply
    assert ledger.get_question("q-1") == answered
    assert resumes(aws) == [{"thread_id": "t-1", "question_id": "q-1"}]
    assert metric("QuestionsExpired") == 0


def test_an_earlier_rungs_timer_firing_after_the_ladder_moved_on_changes_nothing(
    aws: Aws, lifecycle: LifecycleService, ledger: Ledger, clock: FakeClock
) -> None:
    aws.raise_question(policy=approval(ttl=60, on_expiry=LADDER), now=clock.now)
    assert fire(lifecycle, "expire", 0) == "escalated"
    assert fire(lifecycle, "expire", 1) == "escalated"
    before = ledger.get_question("q-1")

    assert fire(lifecycle, "expire", 0) == "stale"

    assert ledger.get_question("q-1") == before
    assert resumes(aws) == []


def test_a_repeated_escalation_timer_only_repeats_its_announcement(
    aws: Aws, lifecycle: LifecycleService, ledger: Ledger, clock: FakeClock
) -> None:
    """A timer whose first run moved the question but failed to announce must announce on retry."""
    aws.raise_question(policy=approval(ttl=60, on_expiry=LADDER), now=clock.now)
    assert fire(lifecycle, "expire", 0) == "escalated"
    moved = ledger.get_question("q-1")

    assert fire(lifecycle, "expire", 0) == "escalated"

    assert ledger.get_question("q-1") == moved
    # The FIFO outbox deduplicates the second announcement on its dedupe key
    assert [e["dedupe_key"] for e in aws.outbox()] == ["wait.escalated:q-1:1"]


def test_an_expiry_whose_writer_died_after_the_write_is_resumed_from_the_stream(
    aws: Aws, lifecycle: LifecycleService, ledger: Ledger, clock: FakeClock
) -> None:
    # Given a question expired by a lifecycle run that died right after its write
    aws.raise_question(policy=approval(ttl=60), now=clock.now)
    ledger.record_expiry("q-1", {"action": "reject", "reason": "expired"}, rung=0)

    # When the ledger's stream is read (nothing else runs): the resume is enqueued, once
    assert resumes(aws) == [{"thread_id": "t-1", "question_id": "q-1"}]

    # Then the timer firing again finds it decided and sends nothing more
    clock.advance(120)
    assert fire(lifecycle, "expire", 0) == "decided"
    assert resumes(aws) == []


def test_a_timer_for_an_unknown_question_does_nothing(lifecycle: LifecycleService) -> None:
    assert fire(lifecycle, "expire", 0, question_id="nope") == "unknown"


# -- revocation --------------------------------------------------------------------------------


def test_revoke_closes_the_question_and_resumes_the_thread_with_a_rejection(
    aws: Aws, ledger: Ledger, call: Call
) -> None:
    envelope = aws.raise_question()

    response = call(revoke_event("q-1", {"reason": "duplicate request"}))

    assert response["statusCode"] == 200
    body = body_of(response)
    assert (body["status"], body["answer"]) == (
        "revoked",
        {"action": "reject", "reason": "revoked: duplicate request"},
    )
    assert body["lifecycle"][-1]["stage"] == "revoked"
    assert resumes(aws) == [{"thread_id": "t-1", "question_id": "q-1"}]
    assert metric("QuestionsRevoked") == 1
    # Later replies and revocations are refused with 410
    late = call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))
    assert (late["statusCode"], body_of(late)["status"]) == (410, "revoked")
    assert call(revoke_event("q-1", {"reason": "again"}))["statusCode"] == 410


def test_revoke_after_an_answer_is_409_with_the_standing_answer(aws: Aws, call: Call) -> None:
    envelope = aws.raise_question()
    call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))

    response = call(revoke_event("q-1", {"reason": "too late"}))

    assert response["statusCode"] == 409
    assert body_of(response)["standing_answer"] == APPROVE
    assert resumes(aws) == [{"thread_id": "t-1", "question_id": "q-1"}]


def test_revoke_after_expiry_is_409_with_the_standing_answer(
    aws: Aws, lifecycle: LifecycleService, call: Call
) -> None:
    aws.raise_question(policy=approval(ttl=60))
    fire(lifecycle, "expire")

    response = call(revoke_event("q-1", {"reason": "too late"}))

    assert response["statusCode"] == 409
    assert body_of(response)["standing_answer"] == {"action": "reject", "reason": "expired"}


@pytest.mark.parametrize(
    ("question_id", "body", "status"),
    [
        ("nope", {"reason": "x"}, 404),
        ("q-1", {}, 400),
        ("q-1", {"reason": ""}, 400),
        ("q-1", {"why": "x"}, 400),
    ],
)
def test_revoke_refusals(aws: Aws, call: Call, question_id: str, body: Any, status: int) -> None:
    aws.raise_question()

    assert call(revoke_event(question_id, body))["statusCode"] == status
    assert resumes(aws) == []


def test_a_policy_s_responders_limit_who_may_revoke(aws: Aws, call: Call) -> None:
    aws.raise_question(policy=approval(responders=["arn:aws:iam::123456789012:user/bob"]))

    response = call(revoke_event("q-1", {"reason": "mine to revoke"}))

    assert response["statusCode"] == 403
    assert resumes(aws) == []


# -- the runner arms and disarms the timers ----------------------------------------------------


def test_the_runner_arms_a_questions_timers_and_disarms_them_once_it_is_decided(
    aws: Aws, clock: FakeClock
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from examples.refund_agent import build_graph
    from wait_service.lifecycle.timers import build_timers
    from wait_service.runs.inbox import ResumeMessage, StartMessage
    from wait_service.runs.runner import RunnerService, build_announce

    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)
    runner = RunnerService(
        build_graph(InMemorySaver()),
        build_announce(aws.settings, dynamodb=aws.dynamodb, sns=aws.sns, sqs=aws.sqs),
        ledger,
        default_ttl=600,
        clock=clock,
        timers=build_timers(aws.settings, aws.scheduler, clock=clock),
    )

    # When a run parks on a question (the sample's policy has no ttl: the default of 600 s applies)
    [question_id] = runner.run(
        StartMessage(thread_id="t-1", input={"customer": "c-17", "amount": 40})
    ).pending

    # Then its expiry timer is armed at its expires_at, deleting itself after it fires
    expected = {
        "at": "at(2026-11-30T10:10:00)",
        "input": {"question_id": question_id, "timer": "expire", "n": 0},
        "after": "DELETE",
    }
    assert aws.schedules() == {schedule_name(question_id, "expire", 0): expected}

    # When it is answered and the thread resumed, the timer is gone
    ledger.record_answer(question_id, APPROVE, answered_by="ann")
    assert runner.run(ResumeMessage(thread_id="t-1", question_id=question_id)).status == "done"
    assert aws.schedules() == {}


# -- one live schedule per question ------------------------------------------------------------


def fire_the_live_schedule(aws: Aws, lifecycle: LifecycleService, clock: FakeClock) -> tuple[str, str]:
    """Fire the question's one schedule as Scheduler does: at its time, then it deletes itself."""
    [(name, schedule)] = aws.schedules().items()
    aws.scheduler.delete_schedule(Name=name, GroupName=aws.resources.schedule_group or "")
    at = schedule["at"].removeprefix("at(").removesuffix(")")
    clock.now = clock.now.fromisoformat(at + "+00:00")
    event = TimerEvent.model_validate(schedule["input"])
    return f"{event.timer}-{event.n}", lifecycle.handle(event)


def live(aws: Aws) -> list[tuple[str, str]]:
    return [
        (f"{s['input']['timer']}-{s['input']['n']}", s["at"].removeprefix("at(2026-11-30T").removesuffix(")"))
        for s in aws.schedules().values()
    ]


def test_a_question_has_one_live_schedule_its_next_timer_re_armed_as_each_fires(
    aws: Aws, lifecycle: LifecycleService, clock: FakeClock
) -> None:
    from wait_service.lifecycle.timers import build_timers

    assert lifecycle.timers is not None
    # Given a question with a ttl of an hour and reminders at 10 and 20 minutes
    envelope = aws.raise_question(policy=approval(ttl=3600, reminders=[600, 1200]), now=clock.now)

    # When the runner arms its timers
    timers = build_timers(aws.settings, aws.scheduler, clock=clock)
    assert timers is not None
    timers.set(timers.for_envelope(envelope))

    # Then only the first reminder has a schedule; as each fires, the next takes its place
    assert live(aws) == [("remind-1", "10:10:00")]
    assert fire_the_live_schedule(aws, lifecycle, clock) == ("remind-1", "reminded")
    assert live(aws) == [("remind-2", "10:20:00")]
    assert fire_the_live_schedule(aws, lifecycle, clock) == ("remind-2", "reminded")
    assert live(aws) == [("expire-0", "11:00:00")]
    # and once the expiry decides the question, nothing is armed
    assert fire_the_live_schedule(aws, lifecycle, clock) == ("expire-0", "expired")
    assert live(aws) == []


def test_on_a_ladder_each_rung_arms_the_next_and_there_is_never_more_than_one_schedule(
    aws: Aws, lifecycle: LifecycleService, ledger: Ledger, clock: FakeClock
) -> None:
    from wait_service.lifecycle.timers import build_timers

    # Given a question with a 60 s ttl per rung, two rungs, and reminders at 20 s and 40 s
    envelope = aws.raise_question(
        policy=approval(ttl=60, reminders=[20, 40], on_expiry=LADDER), now=clock.now
    )
    timers = build_timers(aws.settings, aws.scheduler, clock=clock)
    assert timers is not None
    timers.set(timers.for_envelope(envelope))

    # When each live schedule fires in turn, there is always exactly one, the next due
    fired = []
    while aws.schedules():
        fired.append(fire_the_live_schedule(aws, lifecycle, clock))
        assert len(aws.schedules()) <= 1
    # Then the reminders, then one rung per ttl, and the ladder's end decides the question
    assert fired == [
        ("remind-1", "reminded"),
        ("remind-2", "reminded"),
        ("expire-0", "escalated"),  # at 60 s: the first rung runs to 120 s
        ("expire-1", "escalated"),  # at 120 s: the second rung runs to 180 s
        ("expire-2", "expired"),
    ]
    assert ledger.get_question("q-1").status == "expired"


def test_a_reminder_whose_send_fails_keeps_the_next_timer_armed(
    aws: Aws, lifecycle: LifecycleService, clock: FakeClock
) -> None:
    from agent_wait.errors import AnnounceError

    # Given a question whose first reminder is due, with the outbox refusing every send
    aws.raise_question(policy=approval(ttl=3600, reminders=[600]), now=clock.now)
    clock.advance(600)

    def outbox_down(**_: Any) -> None:
        raise RuntimeError("outbox down")

    aws.sqs.meta.events.register("before-call.sqs.SendMessage", outbox_down)

    # When the reminder fires and its send fails
    with pytest.raises(AnnounceError):
        fire(lifecycle, "remind", 1)

    # Then the question still has its next timer (the expiry), armed before the send
    assert live(aws) == [("expire-0", "11:00:00")]


def test_a_decided_question_costs_one_schedule_delete(aws: Aws, ledger: Ledger, clock: FakeClock) -> None:
    from wait_service.lifecycle.timers import build_timers

    # Given a question with a ttl and two reminders, its one timer armed
    envelope = aws.raise_question(policy=approval(ttl=3600, reminders=[600, 1200]), now=clock.now)
    timers = build_timers(aws.settings, aws.scheduler, clock=clock)
    assert timers is not None
    calls: list[str] = []
    aws.scheduler.meta.events.register("before-call.scheduler.*", lambda model, **_: calls.append(model.name))
    timers.set(timers.for_envelope(envelope))

    # When it is answered before any timer fires, and its timers are cancelled
    assert ledger.record_answer("q-1", APPROVE, answered_by="ann") is None
    timers.cancel(ledger.get_question("q-1"))

    # Then one schedule was created and one deleted: nothing is left
    assert calls == ["CreateSchedule", "DeleteSchedule"]
    assert aws.schedules() == {}


def test_the_lifecycle_handler_parses_the_schedule_input(
    aws: Aws, lifecycle: LifecycleService, context: LambdaContext, clock: FakeClock
) -> None:
    aws.raise_question(policy=approval(ttl=60), now=clock.now)
    handler = load_handler("lifecycle")

    result = handler.handle({"question_id": "q-1", "timer": "expire", "n": 0}, context, service=lifecycle)

    assert result == {"question_id": "q-1", "outcome": "expired"}
    with pytest.raises(ValueError):
        handler.handle({"question_id": "q-1", "timer": "explode", "n": 0}, context, service=lifecycle)


def test_a_reply_past_due_applies_the_expiry_itself_when_the_timer_is_late(
    aws: Aws, ledger: Ledger, clock: FakeClock, call: Call
) -> None:
    envelope = aws.raise_question(policy=approval(ttl=60), now=clock.now)
    clock.advance(timedelta(seconds=61).total_seconds())

    response = call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))

    assert response["statusCode"] == 410
    assert ledger.get_question("q-1").answered_by == "system:expiry"
    assert resumes(aws) == [{"thread_id": "t-1", "question_id": "q-1"}]


def test_a_reply_past_due_on_a_ladder_is_still_an_answer(
    aws: Aws, ledger: Ledger, clock: FakeClock, call: Call
) -> None:
    """Escalating keeps a question answerable: a reply before the rung's timer fires is taken."""
    envelope = aws.raise_question(policy=approval(ttl=60, on_expiry=LADDER), now=clock.now)
    clock.advance(61)

    response = call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))

    assert response["statusCode"] == 202
    assert ledger.get_question("q-1").status == "answered"


class Chat:
    """Records the replies a question's chat thread gets; ``down`` makes every reply fail."""

    def __init__(self, down: bool = False) -> None:
        self.down = down
        self.replies: list[tuple[str, str]] = []

    def follow_up(self, question_id: str, text: str) -> None:
        if self.down:
            raise RuntimeError("Slack is down")
        self.replies.append((question_id, text))


def test_expiry_escalation_and_reminders_are_told_in_the_questions_chat_thread(
    aws: Aws, lifecycle: LifecycleService, clock: FakeClock
) -> None:
    """Slack: "Expiry, escalation and reminders post to the thread of the message"."""
    chat = Chat()
    lifecycle.chat = chat
    aws.raise_question(policy=approval(ttl=60, on_expiry=LADDER, reminders=[30]), now=clock.now)

    fire(lifecycle, "remind", 1)
    fire(lifecycle, "expire", 0)
    fire(lifecycle, "expire", 1)
    fire(lifecycle, "expire", 2)

    texts = [text for question_id, text in chat.replies if question_id == "q-1"]
    assert texts[0] == "Reminder 1: this question is still waiting for an answer."
    assert texts[1].startswith("Escalated to managers (rung 1)")
    assert texts[2].startswith("Escalated to directors (rung 2)")
    assert texts[3] == (
        'Expired: nobody answered in time, so the system answered {"action": "reject", '
        '"reason": "nobody answered in time"}.'
    )


def test_a_chat_that_fails_never_fails_the_timer(
    aws: Aws, lifecycle: LifecycleService, ledger: Ledger, clock: FakeClock
) -> None:
    lifecycle.chat = Chat(down=True)
    aws.raise_question(policy=approval(ttl=60), now=clock.now)

    assert fire(lifecycle, "expire") == "expired"
    assert ledger.get_question("q-1").status == "expired"
    assert resumes(aws) == [{"thread_id": "t-1", "question_id": "q-1"}]


def test_a_timer_whose_time_has_passed_is_set_a_few_seconds_ahead(aws: Aws, clock: FakeClock) -> None:
    """A republish re-arms a question's timers; a one-time schedule must lie in the future."""
    from datetime import timedelta

    from wait_service.lifecycle.timers import PAST_DUE_DELAY, Timer, Timers

    timers = Timers(
        aws.resources.schedule_group or "",
        aws.settings.lifecycle_arn or "",
        aws.settings.scheduler_role_arn or "",
        aws.scheduler,
        clock=clock,
    )
    first = TimerEvent(question_id="q-past", timer="remind", n=1)
    second = TimerEvent(question_id="q-past", timer="remind", n=2)
    soon = TimerEvent(question_id="q-soon", timer="remind", n=1)
    future = TimerEvent(question_id="q-future", timer="expire", n=0)

    timers.set(
        [
            Timer(first, clock.now - timedelta(minutes=5)),
            Timer(second, clock.now - timedelta(minutes=4)),
            Timer(soon, clock.now + timedelta(seconds=1)),
            Timer(future, clock.now + timedelta(hours=1)),
        ]
    )

    # Past ones a few seconds ahead, one second apart in their order; the others keep their time
    schedules = aws.schedules()
    ahead = clock.now + PAST_DUE_DELAY
    assert schedules[schedule_name("q-past", "remind", 1)]["at"] == f"at({ahead:%Y-%m-%dT%H:%M:%S})"
    later = ahead + timedelta(seconds=1)
    assert schedules[schedule_name("q-past", "remind", 2)]["at"] == f"at({later:%Y-%m-%dT%H:%M:%S})"
    assert schedules[schedule_name("q-soon", "remind", 1)]["at"] == "at(2026-11-30T10:00:01)"
    assert schedules[schedule_name("q-future", "expire", 0)]["at"] == "at(2026-11-30T11:00:00)"
