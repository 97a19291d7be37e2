"""Async-mode questions inside the runner: announced through the deployment, answered by a new run."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from agent_wait import async_question_id
from examples.async_agent import build_graph
from wait_service.answers.decisions import Decisions
from wait_service.ledger import Ledger
from wait_service.lifecycle.timers import build_timers
from wait_service.runs.async_answers import answer_run_id
from wait_service.runs.inbox import Inbox, ResumeMessage, StartMessage, parse_message
from wait_service.runs.runner import RunnerService, build_announce

if TYPE_CHECKING:
    from service_events import Aws, FakeClock

    from wait_service.http.api import WaitApi


@pytest.fixture
def ledger(aws: Aws, clock: FakeClock) -> Ledger:
    return Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)


@pytest.fixture
def runner(aws: Aws, clock: FakeClock, ledger: Ledger) -> RunnerService:
    return RunnerService(
        build_graph(InMemorySaver()),
        build_announce(aws.settings, dynamodb=aws.dynamodb, sns=aws.sns, sqs=aws.sqs),
        ledger,
        reply_url=aws.settings.reply_url,
        default_ttl=3600,
        clock=clock,
        inbox=Inbox(aws.resources.inbox_url, aws.sqs),
        timers=build_timers(aws.settings, aws.scheduler, clock=clock),
    )


def inbox_messages(aws: Aws) -> list[dict[str, Any]]:
    """The inbox's messages, once the dispatcher has read the ledger's stream."""
    aws.dispatch()
    bodies: list[dict[str, Any]] = []
    while got := aws.sqs.receive_message(QueueUrl=aws.resources.inbox_url, MaxNumberOfMessages=10).get(
        "Messages", []
    ):
        for message in got:
            bodies.append(json.loads(message["Body"]))
            aws.sqs.delete_message(QueueUrl=aws.resources.inbox_url, ReceiptHandle=message["ReceiptHandle"])
    return bodies


def start(runner: RunnerService, thread_id: str = "t-1", **input: Any) -> str:
    outcome = runner.run(StartMessage(thread_id=thread_id, input={"audience": "all", **input}, run_id="01A"))
    assert outcome.status == ("interrupted" if input.get("confirm") else "done")
    return async_question_id(thread_id, "send_newsletter", {"audience": "all"})


def test_an_async_question_goes_out_through_the_deployment_and_the_run_ends(
    aws: Aws, runner: RunnerService, ledger: Ledger
) -> None:
    # When a run calls an async @wait that names no announcer
    question_id = start(runner)

    # Then the question is in the ledger like any other, delivered to every sink, timers armed
    question = ledger.get_question(question_id)
    assert question.status == "delivered"
    assert question.source == {
        "function": "send_newsletter",
        "module": "examples.async_agent",
        "mode": "async",
    }
    assert [s.get("detail") for s in question.lifecycle if s["stage"] == "delivered"] == [
        "dynamodb",
        "sns",
        "sqs",
    ]
    assert question.expires_at is not None  # the deployment's default ttl
    [envelope] = aws.outbox()
    assert envelope["reply_with"]["url"] == f"https://api.example/questions/{question_id}/reply"
    suffix = hashlib.sha256(question_id.encode()).hexdigest()[:40]
    assert f"expire-0-{suffix}" in aws.schedules()
    # And the thread is not parked on it
    thread = ledger.get_thread("t-1")
    assert (thread.run_status, thread.pending) == ("done", [])


@pytest.mark.parametrize(
    ("decide", "outcome"),
    [
        (
            lambda d, q: d.ledger.record_answer(q, {"action": "approve"}, answered_by="ann"),
            "sent to all (approved by ann)",
        ),
        (
            lambda d, q: d.ledger.record_answer(
                q, {"action": "approve", "args": {"audience": "vip"}}, answered_by="ann"
            ),
            "sent to vip (approved by ann)",
        ),
        (
            lambda d, q: d.ledger.record_revocation(q, "moot", revoked_by="bob"),
            "not sent: revoked: moot (bob)",
        ),
        (
            lambda d, q: d.ledger.record_expiry(q, {"action": "reject", "reason": "expired"}, rung=0),
            "not sent: expired (system:expiry)",
        ),
    ],
    ids=["approve", "approve-edited", "revoke", "expire"],
)
def test_every_decision_reaches_the_graph_as_a_new_runs_input(
    aws: Aws, runner: RunnerService, ledger: Ledger, decide: Any, outcome: str
) -> None:
    question_id = start(runner)
    decisions = Decisions(ledger)

    # When the question is decided (as reply, revoke, expiry do) and the ledger's stream is read
    assert decide(decisions, question_id) is None  # this decision won
    aws.dispatch()

    # Then the thread is queued for the answer's run, and the message is the ordinary resume
    key = {"dedupe_key": {"S": "thread:t-1"}}
    item = aws.dynamodb.get_item(TableName=aws.resources.ledger_table, Key=key)
    assert item["Item"]["run_status"]["S"] == "queued"
    assert item["Item"]["latest_run"]["S"] == answer_run_id(question_id)
    [message] = inbox_messages(aws)
    assert message == {"thread_id": "t-1", "question_id": question_id}

    # When the runner takes it: a new run whose input is the ledger's decision, never a resume
    result = runner.run(parse_message(json.dumps(message)))
    assert (result.status, result.resumed) == ("done", question_id)
    thread = ledger.get_thread("t-1")
    assert thread.run_status == "done"
    assert isinstance(thread.output, dict) and thread.output["outcome"] == outcome
    assert thread.output["agent_wait_answer"] is None
    question = ledger.get_question(question_id)
    assert question.resumed_at is not None or question.status == "resumed"
    # Decided and handed over: its timers are gone
    suffix = hashlib.sha256(question_id.encode()).hexdigest()[:40]
    assert not [name for name in aws.schedules() if name.endswith(suffix)]


def test_the_answers_run_input_carries_question_answer_and_responder(
    runner: RunnerService, ledger: Ledger
) -> None:
    question_id = start(runner)
    ledger.record_answer(question_id, {"action": "reject", "reason": "no"}, answered_by="ann")
    seen: list[Any] = []
    invoke = runner.graph.invoke

    def spy(input: Any, config: Any, **kwargs: Any) -> Any:
        seen.append(input)
        return invoke(input, config, **kwargs)

    runner.graph = type("Spy", (), {"invoke": staticmethod(spy), "get_state": runner.graph.get_state})()
    runner.run(ResumeMessage(thread_id="t-1", question_id=question_id))
    assert seen == [
        {
            "agent_wait_answer": {
                "question_id": question_id,
                "answer": {"action": "reject", "reason": "no"},
                "answered_by": "ann",
            }
        }
    ]


def test_a_duplicate_answer_message_runs_nothing_again(runner: RunnerService, ledger: Ledger) -> None:
    question_id = start(runner)
    ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
    message = ResumeMessage(thread_id="t-1", question_id=question_id)
    assert runner.run(message).status == "done"

    assert runner.run(message, receive_count=2).status == "refused"
    assert ledger.get_question(question_id).status == "resumed"


def test_an_async_answers_question_is_recorded_before_the_runs_end(
    runner: RunnerService, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer runs once: recorded `resumed` on its own write first, a redelivery never runs it again
    (a parked resume's question instead rides with the run's end, in one transaction)."""
    question_id = start(runner)
    ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")
    writes: list[str] = []
    for name in ("resumed_and_ended", "mark_resumed", "thread_done"):
        original = getattr(ledger, name)
        monkeypatch.setattr(
            ledger, name, lambda *a, _n=name, _o=original, **k: (writes.append(_n), _o(*a, **k))[1]
        )

    assert runner.run(ResumeMessage(thread_id="t-1", question_id=question_id)).status == "done"

    assert writes == ["mark_resumed", "thread_done"]


def test_an_unanswered_async_question_is_refused(runner: RunnerService) -> None:
    question_id = start(runner)
    assert runner.run(ResumeMessage(thread_id="t-1", question_id=question_id)).status == "refused"


def test_an_answer_for_a_parked_thread_waits_behind_its_question(
    aws: Aws, runner: RunnerService, ledger: Ledger, api: WaitApi
) -> None:
    # Given a thread that raised an async question and then parked on an interrupt-mode one
    question_id = start(runner, confirm=True)
    [parked_on] = ledger.get_thread("t-1").pending

    # When the async question is answered while the thread is parked
    asked = ledger.get_question(question_id)
    api.replies.reply(question_id, {"action": "approve"}, principal="ann", if_match=f'"{asked.digest}"')
    assert ledger.get_thread("t-1").run_status == "interrupted"  # not queued: the runner defers it
    [message] = inbox_messages(aws)
    outcome = runner.run(parse_message(json.dumps(message)))

    # Then its run is kept for after the thread's question, with the answer as its input
    assert (outcome.status, outcome.pending) == ("deferred", [parked_on])
    thread = ledger.get_thread("t-1")
    assert [run.run_id for run in thread.deferred] == [answer_run_id(question_id)]
    assert ledger.get_question(question_id).status == "resumed"
    # A redelivery keeps it once
    assert runner.run(parse_message(json.dumps(message)), receive_count=2).status == "refused"
    assert len(ledger.get_thread("t-1").deferred) == 1

    # When the parked question is answered, the deferred run follows and delivers the answer
    parked = ledger.get_question(parked_on)
    api.replies.reply(parked_on, {"action": "approve"}, principal="ann", if_match=f'"{parked.digest}"')
    statuses = []
    while messages := inbox_messages(aws):
        statuses += [runner.run(parse_message(json.dumps(m))).status for m in messages]
    assert statuses == ["done", "done"]
    thread = ledger.get_thread("t-1")
    assert isinstance(thread.output, dict) and thread.output["outcome"] == "sent to all (approved by ann)"
    assert (thread.run_status, thread.deferred) == ("done", [])


def test_an_answer_queued_behind_a_later_run_leaves_that_run_the_thread(
    runner: RunnerService, ledger: Ledger, aws: Aws, api: WaitApi
) -> None:
    """The answer's run ends while a later accepted run waits: the thread stays queued for it."""
    question_id = start(runner)
    asked = ledger.get_question(question_id)
    api.replies.reply(question_id, {"action": "approve"}, principal="ann", if_match=f'"{asked.digest}"')
    api.runs.start("t-1", {"audience": "staff"})
    first, second = inbox_messages(aws)

    assert runner.run(parse_message(json.dumps(first))).status == "done"
    assert ledger.get_thread("t-1").run_status == "queued"
    assert runner.run(parse_message(json.dumps(second))).status == "done"
    assert ledger.get_thread("t-1").run_status == "done"


def test_an_answer_recorded_while_parked_but_run_after_the_thread_moved_on_ends_done(
    aws: Aws, runner: RunnerService, ledger: Ledger, api: WaitApi
) -> None:
    """Answered while the thread was parked (so not queued), but its message comes after the
    parked question's resume: the answer's run must still end the thread ``done``."""
    api.runs.start("t-1", {"audience": "all", "confirm": True})  # names the run (latest_run)
    [started] = inbox_messages(aws)
    assert runner.run(parse_message(json.dumps(started))).status == "interrupted"
    question_id = async_question_id("t-1", "send_newsletter", {"audience": "all"})
    [parked_on] = ledger.get_thread("t-1").pending
    parked = ledger.get_question(parked_on)
    api.replies.reply(parked_on, {"action": "approve"}, principal="ann", if_match=f'"{parked.digest}"')
    asked = ledger.get_question(question_id)
    api.replies.reply(question_id, {"action": "approve"}, principal="ann", if_match=f'"{asked.digest}"')

    statuses = [runner.run(parse_message(json.dumps(m))).status for m in inbox_messages(aws)]

    assert statuses == ["done", "done"]
    thread = ledger.get_thread("t-1")
    assert thread.run_status == "done"
    assert isinstance(thread.output, dict) and thread.output["outcome"] == "sent to all (approved by ann)"


def test_an_async_question_too_large_for_the_ledger_fails_its_run_and_reaches_no_sink(
    aws: Aws, runner: RunnerService, ledger: Ledger
) -> None:
    from wait_service.observability import metrics

    metrics.clear_metrics()
    # Given a run whose async question carries a 420,000-character argument (its ledger item passes 400 KB)
    audience = "a" * 420_000

    # When the runner runs it
    outcome = runner.run(StartMessage(thread_id="t-big", input={"audience": audience}, run_id="01BIG"))

    # Then the message is consumed (no retry can change the refusal), and the run ends failed
    # naming the cause and the size, as it does for an interrupt-mode question ...
    assert outcome.status == "failed"
    thread = ledger.get_thread("t-big")
    assert thread.run_status == "failed"
    assert thread.error is not None
    assert "cannot be recorded in the ledger: too large (" in thread.error
    size = int(thread.error.split("too large (")[1].split(" bytes")[0].replace(",", ""))
    assert size > 400 * 1024
    # ... no sink heard of a question the api cannot open, and it is counted once
    assert ledger.find_question(async_question_id("t-big", "send_newsletter", {"audience": audience})) is None
    assert aws.outbox() == []
    assert aws.subscribed() == []
    assert sum(metrics.metric_set.get("QuestionsUnrecordable", {}).get("Value", [])) == 1
    metrics.clear_metrics()
