"""Per-rung authority: an escalation hands the question to the rung's responders, in the rung's channel.

Seed 002: "If Ttl expires with no interaction, Ved either applies a default response or forwards
to Routing.secondary per OnExpiry". A team lead expects "forwards" to mean the secondary may now
answer (and, when the rung says ``replace: true``, only they), that the rung's people are told
where they are (their Slack channel, their webhooks), and that a refusal says which rung's list
was checked. Through the api handler, the lifecycle handler and the ledger on in-process moto.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import pytest
from service_events import api_event, body_of, get_event, reply_event

from agent_wait import OnExpiry, Policy, approval, digest_of
from agent_wait.slack import SlackAnnounce
from wait_service.answers.policy_store import PolicyInvalidError, PolicyStore, check_override
from wait_service.http.errors_http import status_for
from wait_service.ledger import Ledger
from wait_service.lifecycle.timers import TimerEvent
from wait_service.lifecycle.unanswered import LifecycleService, build_lifecycle

if TYPE_CHECKING:
    from collections.abc import Callable

    from service_events import Aws, FakeClock

    from wait_service.http.api import WaitApi

    Call = Callable[[dict[str, Any]], dict[str, Any]]

ANN = "arn:aws:iam::123456789012:user/ann"  # the policy's own responder
BOB = "arn:aws:iam::123456789012:user/bob"  # nobody's
LEE = "arn:aws:iam::123456789012:user/lee"  # rung 1 (leads)
VIC = "arn:aws:iam::123456789012:user/vic"  # rung 2 (vp), replacing everyone before
APPROVE: dict[str, Any] = {"action": "approve"}
LEADS = {"route": "leads", "responders": [LEE], "slack_channel": "C0LEADS"}
VP = {"route": "vp", "responders": [VIC], "replace": True, "event_types": ["escalation.vp"]}


def ladder(*rungs: Any, **policy: Any) -> Policy:
    return approval(ttl=60, responders=[ANN], on_expiry=OnExpiry(action="escalate", to=list(rungs)), **policy)


def who(principal: str) -> dict[str, Any]:
    return {"accountId": "123456789012", "sourceIp": "203.0.113.7", "userArn": principal}


def reply_as(principal: str, digest: str, answer: Any = APPROVE) -> dict[str, Any]:
    return reply_event("q-1", answer, if_match=f'"{digest}"', identity=who(principal))


def post(action: str, body: Any, principal: str) -> dict[str, Any]:
    return api_event(
        "reply.json",
        path=f"/questions/q-1/{action}",
        resource=f"/questions/{{question_id}}/{action}",
        path_parameters={"question_id": "q-1"},
        body=json.dumps(body),
        identity=who(principal),
    )


def show(call: Call) -> dict[str, Any]:
    response = call(get_event("/questions/q-1", "/questions/{question_id}", {"question_id": "q-1"}))
    assert response["statusCode"] == 200
    return dict(body_of(response))


def resumes(aws: Aws) -> list[str]:
    return [m["question_id"] for m in aws.inbox_messages() if "question_id" in m]


@pytest.fixture
def lifecycle(aws: Aws, clock: FakeClock) -> LifecycleService:
    return build_lifecycle(
        aws.settings, dynamodb=aws.dynamodb, sns=aws.sns, sqs=aws.sqs, scheduler=aws.scheduler, clock=clock
    )


@pytest.fixture
def ledger(aws: Aws, clock: FakeClock) -> Ledger:
    return Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)


def escalate(lifecycle: LifecycleService, clock: FakeClock, rung: int) -> None:
    clock.advance(60)
    assert lifecycle.handle(TimerEvent(question_id="q-1", timer="expire", n=rung)) == "escalated"


# -- who may answer follows the rung ---------------------------------------------------------


def test_a_rung_responder_is_refused_before_the_escalation_and_answers_after(
    aws: Aws, call: Call, lifecycle: LifecycleService, clock: FakeClock
) -> None:
    envelope = aws.raise_question(policy=ladder(LEADS), now=clock.now)

    # Before the escalation the lead is nobody's responder: 403 naming rung 0 (the policy's own)
    early = call(reply_as(LEE, envelope.digest))
    assert early["statusCode"] == 403
    assert body_of(early) | {"message": "-"} == {
        "error": "responder_not_allowed",
        "message": "-",
        "question_id": "q-1",
        "principal": LEE,
        "rung": 0,
    }
    assert show(call)["responders"] == [ANN] and show(call)["route"] is None

    # When the ttl runs out, the question moves to the leads' rung
    escalate(lifecycle, clock, 0)
    view = show(call)
    assert (view["escalation"], view["route"], view["responders"]) == (1, "leads", [ANN, LEE])

    # Then the lead answers with the tag they were shown, and the thread resumes once
    assert call(reply_as(LEE, envelope.digest))["statusCode"] == 202
    assert show(call)["answered_by"] == LEE
    assert resumes(aws) == ["q-1"]


def test_earlier_responders_keep_answering_unless_the_rung_replaces_them(
    aws: Aws, call: Call, lifecycle: LifecycleService, clock: FakeClock
) -> None:
    envelope = aws.raise_question(policy=ladder(LEADS, VP), now=clock.now)
    # Ann hands the question to Bob on rung 0
    assert call(post("delegate", {"to": BOB, "reason": "on call"}, ANN))["statusCode"] == 200

    # On rung 1 the policy's responder, the lead and the delegate may all act
    escalate(lifecycle, clock, 0)
    assert show(call)["delegates"] == [BOB]
    for principal in (ANN, LEE, BOB):
        extended = call(post("extend", {"by_seconds": 1, "reason": "checking"}, principal))
        assert extended["statusCode"] == 422  # a responder: only the policy's max_extension refuses it

    # On rung 2 (replace: true) only the VP may: everyone before is refused, naming rung 2
    escalate(lifecycle, clock, 1)
    view = show(call)
    assert (view["route"], view["responders"], view["delegates"]) == ("vp", [VIC], [])
    for principal in (ANN, LEE, BOB):
        refused = call(reply_as(principal, envelope.digest))
        assert refused["statusCode"] == 403
        body = body_of(refused)
        assert (body["principal"], body["rung"], body["route"]) == (principal, 2, "vp")
        assert "escalation rung 2" in body["message"]
    assert resumes(aws) == []
    assert call(reply_as(VIC, envelope.digest))["statusCode"] == 202
    assert resumes(aws) == ["q-1"]


def test_delegate_and_revoke_follow_the_current_rung(
    aws: Aws, call: Call, lifecycle: LifecycleService, clock: FakeClock
) -> None:
    aws.raise_question(policy=ladder(LEADS, VP), now=clock.now)
    # The lead is no responder yet: may not hand the question on
    early = call(post("delegate", {"to": BOB, "reason": "mine now"}, LEE))
    assert (early["statusCode"], body_of(early)["rung"]) == (403, 0)

    escalate(lifecycle, clock, 0)
    assert call(post("delegate", {"to": BOB, "reason": "mine now"}, LEE))["statusCode"] == 200

    escalate(lifecycle, clock, 1)
    # A delegation made before the replacing rung no longer counts; the VP's own does
    assert call(post("revoke", {"reason": "stale"}, BOB))["statusCode"] == 403
    handed = call(post("delegate", {"to": BOB, "reason": "you decide"}, VIC))
    assert handed["statusCode"] == 200
    assert body_of(handed)["delegates"] == [BOB]
    assert call(post("revoke", {"reason": "duplicate"}, BOB))["statusCode"] == 200


def test_a_quorums_approvals_from_takes_in_the_rungs_responders(
    aws: Aws, call: Call, lifecycle: LifecycleService, clock: FakeClock
) -> None:
    # Given a two-approval quorum counting only Ann's and Bob's approvals, escalating to the leads
    policy = approval(
        ttl=60,
        responders=[ANN, BOB],
        approvals_required=2,
        approvals_from=[ANN, BOB],
        on_expiry=OnExpiry(action="escalate", to=[LEADS]),
    )
    envelope = aws.raise_question(policy=policy, now=clock.now)
    assert call(reply_as(ANN, envelope.digest))["statusCode"] == 202  # 1 of 2

    escalate(lifecycle, clock, 0)
    decided = call(reply_as(LEE, envelope.digest))

    assert decided["statusCode"] == 202 and body_of(decided)["status"] == "answered"
    assert show(call)["quorum"]["summary"] == "2 of 2 approvals"
    assert resumes(aws) == ["q-1"]


# -- an escalation and an answer at once -------------------------------------------------------


def test_an_answer_checked_on_a_rung_the_question_left_is_checked_again(
    aws: Aws, call: Call, lifecycle: LifecycleService, clock: FakeClock, ledger: Ledger
) -> None:
    # Given Ann's answer, checked on rung 0, and the escalation to a replacing rung landing
    # between that check and the answer's write
    aws.raise_question(policy=ladder(VP), now=clock.now)
    digest = ledger.get_question("q-1").digest
    write = Ledger.record_answer
    moved: list[str] = []

    def escalation_first(self: Ledger, *args: Any, **kwargs: Any) -> Any:
        if not moved:
            moved.append("escalated")
            escalate(lifecycle, clock, 0)
        return write(self, *args, **kwargs)

    Ledger.record_answer = escalation_first  # type: ignore[method-assign]
    try:
        refused = call(reply_as(ANN, digest))
    finally:
        Ledger.record_answer = write  # type: ignore[method-assign]

    # Then the answer is refused on the rung it would have landed on, and nothing was recorded
    assert moved == ["escalated"]
    assert refused["statusCode"] == 403
    assert (body_of(refused)["rung"], body_of(refused)["route"]) == (1, "vp")
    question = ledger.get_question("q-1")
    assert (question.status, question.escalation, question.answer) == ("escalated", 1, None)
    assert resumes(aws) == []


def race(call: Call, lifecycle: LifecycleService, question_id: str, digest: str) -> dict[str, Any]:
    """The VP's answer and the escalation to the VP's rung, started at the same moment."""
    start = threading.Barrier(2)
    outcome: dict[str, Any] = {}

    def answer() -> None:
        start.wait(timeout=10)
        outcome["reply"] = call(reply_event(question_id, APPROVE, if_match=f'"{digest}"', identity=who(VIC)))

    def escalation() -> None:
        start.wait(timeout=10)
        outcome["timer"] = lifecycle.handle(TimerEvent(question_id=question_id, timer="expire", n=0))

    threads = [threading.Thread(target=answer), threading.Thread(target=escalation)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return outcome


def test_an_escalation_racing_a_rung_responders_answer_has_one_consistent_outcome(
    aws: Aws, call: Call, lifecycle: LifecycleService, clock: FakeClock, ledger: Ledger
) -> None:
    for attempt in range(5):
        question_id = f"q-{attempt}"
        envelope = aws.raise_question(question_id=question_id, policy=ladder(VP), now=clock.now)
        clock.advance(60)

        outcome = race(call, lifecycle, question_id, envelope.digest)

        question = ledger.get_question(question_id)
        status = outcome["reply"]["statusCode"]
        assert outcome["timer"] == "escalated" and question.escalation == 1
        if status == 202:
            # read after the escalation: the VP's answer stands
            assert (question.status, question.answered_by) == ("answered", VIC)
        else:
            # read before: refused on rung 0, nothing recorded, the question waits on rung 1
            assert status == 403 and body_of(outcome["reply"])["rung"] == 0
            assert (question.status, question.answer) == ("escalated", None)
    # one resume for each question the VP answered, none for the others
    answered = [q for q in (ledger.get_question(f"q-{n}") for n in range(5)) if q.status == "answered"]
    assert sorted(resumes(aws)) == sorted(q.question_id for q in answered)


# -- where the escalation is announced --------------------------------------------------------


def test_the_escalation_is_posted_in_the_rungs_slack_channel(
    aws: Aws, call: Call, clock: FakeClock, ledger: Ledger
) -> None:
    posted: list[dict[str, Any]] = []

    def slack(method: str, body: Any) -> dict[str, Any]:
        posted.append(dict(body))
        return {"ok": True, "channel": body["channel"], "ts": f"{len(posted)}.0"}

    chat = SlackAnnounce("C0ORIG", "xoxb-test", call=slack)
    lifecycle = LifecycleService(ledger, _Quiet(), None, chat=chat, clock=clock)
    envelope = aws.raise_question(policy=ladder("managers", LEADS), now=clock.now)
    assert chat.announce(envelope)  # the question's own message, in the deployment's channel

    # Rung 1 names no channel: only the question's thread hears of it
    escalate(lifecycle, clock, 0)
    assert [(p["channel"], "thread_ts" in p) for p in posted] == [("C0ORIG", False), ("C0ORIG", True)]

    # Rung 2 names the leads' channel: the question, with its buttons, is posted there
    escalate(lifecycle, clock, 1)
    rung_message = posted[2]
    assert rung_message["channel"] == "C0LEADS" and "thread_ts" not in rung_message
    assert rung_message["blocks"][0]["text"]["text"].startswith("Escalated to leads (rung 2)")
    buttons = rung_message["blocks"][-1]["elements"]
    assert json.loads(buttons[0]["value"]) == {"q": "q-1", "d": envelope.digest}
    assert posted[3]["thread_ts"] == "1.0" and "<#C0LEADS>" in posted[3]["text"]

    # A retried timer (the escalation recorded, the step after it failed) posts nothing twice
    assert lifecycle.on_ttl(ledger.get_question("q-1"), 1) == "escalated"
    assert [p["channel"] for p in posted if "thread_ts" not in p] == ["C0ORIG", "C0LEADS"]


def test_a_failed_post_in_the_rungs_channel_fails_the_timer_so_it_fires_again(
    aws: Aws, clock: FakeClock, ledger: Ledger
) -> None:
    from agent_wait.errors import AnnounceError, SlackApiError

    def down(method: str, body: Any) -> dict[str, Any]:
        if body["channel"] == "C0LEADS":
            raise SlackApiError("Slack chat.postMessage failed: channel_not_found", slack_error="x")
        return {"ok": True, "channel": body["channel"], "ts": "1.0"}

    chat = SlackAnnounce("C0ORIG", "xoxb-test", call=down)
    lifecycle = LifecycleService(ledger, _Quiet(), None, chat=chat, clock=clock)
    envelope = aws.raise_question(policy=ladder(LEADS), now=clock.now)
    chat.announce(envelope)

    clock.advance(60)
    with pytest.raises(AnnounceError, match="C0LEADS"):
        lifecycle.handle(TimerEvent(question_id="q-1", timer="expire", n=0))
    # The escalation itself is recorded once; the retried timer announces it again
    assert ledger.get_question("q-1").escalation == 1


def test_the_rungs_event_types_go_with_its_escalation_event(
    aws: Aws, lifecycle: LifecycleService, clock: FakeClock
) -> None:
    aws.raise_question(policy=ladder("managers", VP), now=clock.now)

    escalate(lifecycle, clock, 0)
    escalate(lifecycle, clock, 1)

    [(first, plain), (second, tagged)] = aws.subscribed()
    # A rung without event types: wait.escalated, as always
    assert (first["route"], plain["type"], "event_types" in first) == ("managers", "wait.escalated", False)
    # The VP's rung: published as wait.escalated and as its own type (an SNS String.Array)
    assert (second["route"], second["event_types"]) == ("vp", ["escalation.vp"])
    assert json.loads(tagged["type"]) == ["wait.escalated", "escalation.vp"]
    assert [e["type"] for e in aws.outbox()] == ["wait.escalated", "wait.escalated"]


def test_a_slack_click_follows_the_rung_and_a_refusal_names_it(
    api: WaitApi, aws: Aws, call: Call, lifecycle: LifecycleService, clock: FakeClock
) -> None:
    from test_service_slack import NOW, SIGNING_SECRET, FakeSlackClient, click, interaction

    from agent_wait.slack import APPROVE_ACTION
    from wait_service.channels.slack import SlackInteractions

    slack = FakeSlackClient()
    api.slack = SlackInteractions(api.replies, lambda: SIGNING_SECRET, slack, clock=lambda: NOW)  # type: ignore[arg-type]
    leads = {"route": "leads", "responders": ["slack:T1:U5"], "replace": True}
    policy = approval(ttl=60, responders=["slack:T1:U9"], on_expiry=OnExpiry(action="escalate", to=[leads]))
    envelope = aws.raise_question(policy=policy, now=clock.now)

    # The lead's click before the escalation is refused to them alone
    call(interaction(click(envelope, APPROVE_ACTION, user="U5")))
    assert slack.responses[-1][1]["text"] == (
        "Not recorded: you are not one of the people who may answer this question."
    )

    # After it, the first approver's click is refused naming the rung, and the lead's answers
    escalate(lifecycle, clock, 0)
    call(interaction(click(envelope, APPROVE_ACTION, user="U9")))
    assert slack.responses[-1][1]["text"] == (
        "Not recorded: you are not one of the people who may answer this question on its "
        "escalation rung 1 (leads)."
    )
    call(interaction(click(envelope, APPROVE_ACTION, user="U5")))
    assert api.ledger.get_question("q-1").answered_by == "slack:T1:U5"
    assert resumes(aws) == ["q-1"]


class _Quiet:
    """The topic and outbox announcer, standing aside: these tests watch Slack."""

    def announce(self, envelope: Any) -> bool:
        return True


# -- the policy: validated and bound like every other field ---------------------------------------


@pytest.mark.parametrize(
    ("rung", "field"),
    [
        ({"route": "leads", "responders": []}, "policy.on_expiry.to.0.responders"),
        ({"route": "leads", "replace": True}, "policy.on_expiry.to.0.replace"),
        ({"route": "leads", "responders": [""]}, "policy.on_expiry.to.0.responders"),
        ({"route": "leads", "slack_channel": "leads channel"}, "policy.on_expiry.to.0.slack_channel"),
        ({"route": "leads", "event_types": ["wait.answered"]}, "policy.on_expiry.to.0.event_types"),
        ({"route": "leads", "event_types": ["Not A Type"]}, "policy.on_expiry.to.0.event_types"),
        ({"route": "leads", "event_types": []}, "policy.on_expiry.to.0.event_types"),
        ({"route": "", "responders": [LEE]}, "policy.on_expiry.to.0.route"),
        ({"responders": [LEE]}, "policy.on_expiry.to.0.route"),
        ({"route": "leads", "responder": [LEE]}, "policy.on_expiry.to.0.responder"),
        ({"route": "leads", "replace": "yes"}, "policy.on_expiry.to.0.replace"),
    ],
)
def test_an_invalid_rung_is_refused_naming_its_field(rung: Any, field: str) -> None:
    with pytest.raises(PolicyInvalidError) as refused:
        check_override({"on_expiry": {"action": "escalate", "to": [rung]}})
    assert (refused.value.field, status_for(refused.value)) == (field, 422)
    assert refused.value.message.startswith(field)


def test_a_policy_set_with_rungs_writes_them_and_an_invalid_one_writes_nothing(aws: Aws) -> None:
    assert aws.resources.policy_table is not None
    store = PolicyStore(aws.resources.policy_table, aws.dynamodb)
    with pytest.raises(PolicyInvalidError):
        bad = {"on_expiry": {"action": "escalate", "to": [{"route": "x", "replace": True}]}}
        store.set("issue_refund", bad, set_by="ann", set_at="2026-12-01T10:00:00Z")
    assert store.current("issue_refund") is None

    override = {"ttl": 60, "on_expiry": {"action": "escalate", "to": ["managers", VP]}}
    store.set("issue_refund", override, set_by="ann", set_at="2026-12-01T10:00:00Z")
    current = store.current("issue_refund")
    assert current is not None and current.policy["on_expiry"]["to"] == ["managers", VP]


def test_the_rungs_fields_are_bound_by_the_digest_and_a_plain_ladder_keeps_its_json() -> None:
    call = {"function": "issue_refund", "args": {"amount": 40}}
    plain = approval(ttl=60, on_expiry=OnExpiry(action="escalate", to=["managers"]))
    # A ladder of plain routes is written as it always was, so its questions keep their digests
    written = plain.model_dump(mode="json")["on_expiry"]
    assert written == {"action": "escalate", "answer": None, "to": ["managers"]}
    as_object = approval(ttl=60, on_expiry=OnExpiry(action="escalate", to=[{"route": "managers"}]))
    assert digest_of(call, as_object, question_id="q") == digest_of(call, plain, question_id="q")
    # Naming a rung's responders, replace, channel or event types is a different policy
    digests = {
        digest_of(call, approval(ttl=60, on_expiry=OnExpiry(action="escalate", to=[rung])), question_id="q")
        for rung in (
            "managers",
            {"route": "managers", "responders": [LEE]},
            {"route": "managers", "responders": [LEE], "replace": True},
            {"route": "managers", "slack_channel": "C0LEADS"},
            {"route": "managers", "event_types": ["escalation.managers"]},
        )
    }
    assert len(digests) == 5
    policy = ladder(LEADS, VP)
    assert Policy.model_validate(policy.model_dump(mode="json")) == policy


def test_the_documented_ladder_is_a_valid_policy_with_the_authority_it_describes() -> None:
    from tests.doc_sections import fenced_after
    from wait_service.answers.authority import authority_at

    _, code = fenced_after("<!-- rung-ladder -->")
    scope: dict[str, Any] = {}
    exec(compile(code, "authority.md", "exec"), scope)
    policy: Policy = scope["policy"]

    account = "arn:aws:iam::123456789012"
    approvers, leads, vic = f"{account}:role/Approvers", f"{account}:role/FinanceLeads", f"{account}:user/vic"
    assert [authority_at(policy, n).responders for n in range(4)] == [
        (approvers,), (approvers,), (approvers, leads), (vic,),
    ]  # fmt: skip
    # and it is an override the policy store takes as it is
    ladder_only = policy.model_dump(mode="json", include={"on_expiry"})
    assert check_override(ladder_only) == ladder_only
