"""Delegation, extension and separation of duties, through the api handler (moto in process).

Seed 003 asks that an approval name "the responder" and hold "expiry and revocation" rules; a
compliance officer expects the person who asked for an action not to be the one who approves it,
and a team lead expects to hand a question to a colleague or give it more time, each step recorded.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, StateGraph
from langgraph.graph import START as START_NODE
from service_events import START, api_event, body_of, get_event, reply_event

from agent_wait import Policy, approval, digest_of
from agent_wait.langgraph import wait
from wait_service.ledger import Ledger, iso
from wait_service.lifecycle.timers import TimerEvent, Timers, schedule_name
from wait_service.lifecycle.unanswered import build_lifecycle
from wait_service.runs.inbox import parse_message
from wait_service.runs.runner import RunnerService, build_announce

if TYPE_CHECKING:
    from collections.abc import Callable

    import pytest
    from service_events import Aws, FakeClock

    Call = Callable[[dict[str, Any]], dict[str, Any]]

ANN = "arn:aws:iam::123456789012:user/ann"
BOB = "arn:aws:iam::123456789012:user/bob"
CAROL = "arn:aws:iam::123456789012:user/carol"
APPROVE: dict[str, Any] = {"action": "approve"}


def who(principal: str) -> dict[str, Any]:
    return {"accountId": "123456789012", "sourceIp": "203.0.113.7", "userArn": principal}


def post(question_id: str, action: str, body: Any, principal: str = ANN) -> dict[str, Any]:
    return api_event(
        "reply.json",
        path=f"/questions/{question_id}/{action}",
        resource=f"/questions/{{question_id}}/{action}",
        path_parameters={"question_id": question_id},
        body=body if isinstance(body, str) else json.dumps(body),
        identity=who(principal),
    )


def reply_as(principal: str, digest: str, answer: Any = APPROVE, question_id: str = "q-1") -> dict[str, Any]:
    return reply_event(question_id, answer, if_match=f'"{digest}"', identity=who(principal))


def stages(aws: Aws, question_id: str = "q-1") -> list[str]:
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb)
    return [s["stage"] for s in ledger.get_question(question_id).lifecycle]


# -- the policy fields leave existing digests alone ------------------------------------------


def test_new_policy_fields_enter_the_json_and_the_digest_only_when_set() -> None:
    call = {"function": "issue_refund", "args": {"amount": 40}}
    plain = Policy(kind="approval")

    # Then a policy that does not use them dumps as it always did (so its digest is unchanged)
    assert set(plain.model_dump(mode="json")) == {
        "kind", "prompt", "options", "ttl", "on_expiry", "reminders", "responders", "bind",
    }  # fmt: skip
    explicit_defaults = Policy(kind="approval", requester_cannot_approve=False, max_extension=None)
    assert digest_of(call, explicit_defaults, question_id="q") == digest_of(call, plain, question_id="q")
    # and a policy that sets one is a different policy, bound by the digest
    strict = approval(requester_cannot_approve=True)
    assert strict.model_dump(mode="json")["requester_cannot_approve"] is True
    assert digest_of(call, strict, question_id="q") != digest_of(call, plain, question_id="q")
    assert Policy.model_validate(strict.model_dump(mode="json")) == strict


# -- separation of duties ------------------------------------------------------------------


def raise_requested(aws: Aws, requested_by: str | None, policy: Policy, question_id: str = "q-1") -> str:
    """A question recorded as the runner records it for a run started by ``requested_by``."""
    from agent_wait import Question, build_envelope
    from agent_wait.aws import DynamoDbAnnounce

    envelope = build_envelope(
        "t-1",
        Question(
            question_id=question_id,
            question={"function": "issue_refund", "args": {"amount": 40}},
            policy=policy,
        ),
        now=START,
    )
    extra = {"requested_by": requested_by} if requested_by else None
    DynamoDbAnnounce(aws.resources.ledger_table, client=aws.dynamodb).record(envelope, extra=extra)
    return envelope.digest


def test_the_runs_starter_is_refused_403_requester_cannot_approve(aws: Aws, call: Call) -> None:
    digest = raise_requested(aws, ANN, approval(requester_cannot_approve=True))

    response = call(reply_as(ANN, digest))

    assert response["statusCode"] == 403
    body = body_of(response)
    assert (body["error"], body["principal"], body["question_id"]) == ("requester_cannot_approve", ANN, "q-1")
    assert stages(aws) == ["raised"]  # nothing recorded
    # Another principal may answer it
    assert call(reply_as(BOB, digest))["statusCode"] == 202


def test_without_the_rule_the_starter_may_answer(aws: Aws, call: Call) -> None:
    digest = raise_requested(aws, ANN, approval())

    assert call(reply_as(ANN, digest))["statusCode"] == 202


def test_a_new_session_name_does_not_make_the_starter_someone_else(aws: Aws, call: Call) -> None:
    # The session name of an assumed role is the caller's choice: a second session of the same
    # role (or the role itself) is the same person
    session = "arn:aws:sts::123456789012:assumed-role/Ops/"
    cases = [
        (session + "alice", session + "not-alice"),
        ("arn:aws:iam::123456789012:role/Ops", session + "x"),
    ]
    for n, (starter, answerer) in enumerate(cases):
        digest = raise_requested(aws, starter, approval(requester_cannot_approve=True), question_id=f"q-{n}")

        response = call(reply_as(answerer, digest, question_id=f"q-{n}"))

        assert body_of(response)["error"] == "requester_cannot_approve", (starter, answerer)
    # while another role's session is someone else
    other = "arn:aws:sts::123456789012:assumed-role/Approvers/alice"
    digest = raise_requested(aws, cases[0][0], approval(requester_cannot_approve=True), question_id="q-9")
    assert call(reply_as(other, digest, question_id="q-9"))["statusCode"] == 202


def test_a_principal_header_does_not_change_who_answers_on_the_api(aws: Aws, call: Call) -> None:
    # The deployed api reads the caller from API Gateway's request context, never from a header
    digest = raise_requested(aws, ANN, approval(requester_cannot_approve=True))
    event = reply_as(ANN, digest)
    event["headers"]["X-Wait-Principal"] = BOB
    event["multiValueHeaders"]["X-Wait-Principal"] = [BOB]

    assert body_of(call(event))["error"] == "requester_cannot_approve"


def test_an_unknown_starter_fails_closed(aws: Aws, call: Call) -> None:
    # A run started by a message written by hand: nobody can show the answerer did not start it
    digest = raise_requested(aws, None, approval(requester_cannot_approve=True))

    assert body_of(call(reply_as(BOB, digest)))["error"] == "requester_cannot_approve"


def test_the_starter_cannot_be_delegated_to(aws: Aws, call: Call) -> None:
    raise_requested(aws, CAROL, approval(requester_cannot_approve=True, responders=[ANN]))

    response = call(post("q-1", "delegate", {"to": CAROL, "reason": "she knows"}))

    assert response["statusCode"] == 422
    assert body_of(response)["field"] == "to"


# -- delegate --------------------------------------------------------------------------------


def test_a_responder_delegates_and_the_delegate_answers(aws: Aws, call: Call) -> None:
    envelope = aws.raise_question(policy=approval(responders=[ANN]))
    assert call(reply_as(BOB, envelope.digest))["statusCode"] == 403

    response = call(post("q-1", "delegate", {"to": BOB, "reason": "on leave"}))

    assert response["statusCode"] == 200
    view = body_of(response)
    assert view["delegates"] == [BOB]
    assert view["digest"] == envelope.digest  # what is asked is unchanged: tags already shown still bind
    delegated = view["lifecycle"][-1]
    assert (delegated["stage"], delegated["actor"]) == ("delegated", ANN)
    assert delegated["detail"]["to"] == BOB and delegated["detail"]["reason"] == "on leave"
    assert call(reply_as(BOB, envelope.digest))["statusCode"] == 202
    # The audit names the hand-over with the decision
    shown = get_event("/questions/q-1", "/questions/{question_id}", {"question_id": "q-1"})
    audit = body_of(call(shown))["audit"]
    assert audit["answered_by"] == BOB
    assert [(d["to"], d["by"], d["reason"]) for d in audit["delegations"]] == [(BOB, ANN, "on leave")]


DELEGATION_REFUSALS: list[tuple[Any, str, int, str]] = [
    ({"to": ANN, "reason": "me"}, ANN, 422, "invalid_delegation"),
    ({"to": "arn:aws:sts::123456789012:assumed-role/Ops/bob", "reason": "r"}, ANN, 422, "invalid_delegation"),
    ({"to": BOB, "reason": "again"}, ANN, 409, "already_responder"),
    ({"to": CAROL, "reason": "not mine"}, CAROL, 403, "responder_not_allowed"),
    ({"to": "", "reason": "r"}, ANN, 400, "invalid_request"),
    ({"to": "bob smith", "reason": "r"}, ANN, 400, "invalid_request"),
    ({"to": "x" * 1025, "reason": "r"}, ANN, 400, "invalid_request"),
    ({"to": BOB}, ANN, 400, "invalid_request"),
    ({"to": BOB, "reason": "r", "answer": APPROVE}, ANN, 400, "invalid_request"),
    ('{"to": "b", "to": "c", "reason": "r"}', ANN, 400, "invalid_request"),
    ("[]", ANN, 400, "invalid_request"),
]


def test_delegation_refusals(aws: Aws, call: Call) -> None:
    for n, (body, principal, status, error) in enumerate(DELEGATION_REFUSALS):
        question_id = f"q-{n}"
        aws.raise_question(question_id=question_id, policy=approval(responders=[ANN, BOB]))

        response = call(post(question_id, "delegate", body, principal))

        assert (response["statusCode"], body_of(response)["error"]) == (status, error), body
        assert stages(aws, question_id) == ["raised"]


def test_delegating_to_someone_delegated_before_is_409(aws: Aws, call: Call) -> None:
    aws.raise_question(policy=approval(responders=[ANN]))
    assert call(post("q-1", "delegate", {"to": BOB, "reason": "r"}))["statusCode"] == 200

    # Neither the delegator nor the delegate can hand it to the same person again
    for principal in (ANN, BOB):
        response = call(post("q-1", "delegate", {"to": BOB, "reason": "r"}, principal))
        assert (response["statusCode"], body_of(response)["error"]) in {
            (409, "already_responder"),
            (422, "invalid_delegation"),
        }
    # A delegate is a responder of the question: they may hand it on
    assert call(post("q-1", "delegate", {"to": CAROL, "reason": "r"}, BOB))["statusCode"] == 200
    assert stages(aws) == ["raised", "delegated", "delegated"]


def test_a_question_anyone_may_answer_is_not_delegated(aws: Aws, call: Call) -> None:
    aws.raise_question(policy=approval())

    response = call(post("q-1", "delegate", {"to": BOB, "reason": "r"}))

    assert (response["statusCode"], body_of(response)["error"]) == (409, "already_responder")


def test_a_decided_question_is_neither_delegated_nor_extended(aws: Aws, call: Call) -> None:
    envelope = aws.raise_question(policy=approval(responders=[ANN], ttl=60, max_extension=600))
    assert call(reply_as(ANN, envelope.digest))["statusCode"] == 202

    delegated = call(post("q-1", "delegate", {"to": BOB, "reason": "late"}))
    extended = call(post("q-1", "extend", {"by_seconds": 30, "reason": "late"}))

    for response in (delegated, extended):
        assert response["statusCode"] == 409
        assert body_of(response)["error"] == "question_decided"
        assert body_of(response)["status"] == "answered"
    assert stages(aws) == ["raised", "answered"]


# -- extend ----------------------------------------------------------------------------------


def test_a_responder_extends_within_max_extension(aws: Aws, call: Call, clock: FakeClock) -> None:
    aws.raise_question(policy=approval(responders=[ANN], ttl=60, max_extension=120))

    first = call(post("q-1", "extend", {"by_seconds": 60, "reason": "waiting on finance"}))
    until = (START + timedelta(seconds=180)).isoformat()
    second = call(post("q-1", "extend", {"until": until, "reason": "and legal"}))
    over = call(post("q-1", "extend", {"by_seconds": 1, "reason": "one more"}))

    assert first["statusCode"] == 200
    assert body_of(first)["expires_at"] == iso(START + timedelta(seconds=120))
    assert second["statusCode"] == 200
    assert body_of(second)["expires_at"] == iso(START + timedelta(seconds=180))
    assert over["statusCode"] == 422
    assert (body_of(over)["error"], body_of(over)["field"]) == ("invalid_extension", "by_seconds")
    assert "max_extension" in body_of(over)["message"]
    extended = [s for s in body_of(second)["lifecycle"] if s["stage"] == "extended"]
    assert [(s["actor"], s["detail"]["seconds"], s["detail"]["reason"]) for s in extended] == [
        (ANN, 60, "waiting on finance"),
        (ANN, 60, "and legal"),
    ]


P60 = approval(ttl=60, max_extension=60)
ONLY_ANN = approval(ttl=60, max_extension=60, responders=[ANN])
BAD, NO = "invalid_request", "invalid_extension"
EXTENSION_REFUSALS: list[tuple[Policy, dict[str, Any], str, int, str, str | None]] = [
    (approval(ttl=60), {"by_seconds": 10, "reason": "r"}, ANN, 422, NO, "by_seconds"),
    (approval(max_extension=60), {"by_seconds": 10, "reason": "r"}, ANN, 422, NO, "by_seconds"),
    (P60, {"by_seconds": 61, "reason": "r"}, ANN, 422, NO, "by_seconds"),
    (P60, {"until": "2026-11-30T10:00:30+00:00", "reason": "r"}, ANN, 422, NO, "until"),
    (P60, {"until": "2026-11-30T10:03:00Z", "reason": "r"}, ANN, 422, NO, "until"),
    (ONLY_ANN, {"by_seconds": 10, "reason": "r"}, BOB, 403, "responder_not_allowed", None),
    (P60, {"by_seconds": 10, "until": "2026-11-30T10:01:30Z", "reason": "r"}, ANN, 400, BAD, None),
    (P60, {"reason": "r"}, ANN, 400, BAD, None),
    (P60, {"until": "2026-11-30T10:01:30", "reason": "r"}, ANN, 400, BAD, "until"),
    (P60, {"by_seconds": 0, "reason": "r"}, ANN, 400, BAD, "by_seconds"),
    (P60, {"by_seconds": 10**12, "reason": "r"}, ANN, 400, BAD, "by_seconds"),
    (P60, {"by_seconds": 10}, ANN, 400, BAD, "reason"),
    (P60, {"by_seconds": "10s", "reason": "r"}, ANN, 400, BAD, "by_seconds"),
]  # fmt: skip


def test_extension_refusals(aws: Aws, call: Call) -> None:
    for n, (policy, body, principal, status, error, field) in enumerate(EXTENSION_REFUSALS):
        question_id = f"q-{n}"
        aws.raise_question(question_id=question_id, policy=policy)

        response = call(post(question_id, "extend", body, principal))

        assert (response["statusCode"], body_of(response)["error"]) == (status, error), (
            body,
            body_of(response),
        )
        if field is not None:
            assert body_of(response)["field"] == field, body
        assert stages(aws, question_id) == ["raised"]


def test_a_question_past_its_expiry_is_not_extended(aws: Aws, call: Call, clock: FakeClock) -> None:
    aws.raise_question(policy=approval(ttl=60, max_extension=600))
    clock.advance(61)

    response = call(post("q-1", "extend", {"by_seconds": 30, "reason": "too late"}))

    # Then the due expiry applies (as a reply would apply it) and the extension is refused
    assert (response["statusCode"], body_of(response)["error"]) == (409, "question_decided")
    assert stages(aws) == ["raised", "expired"]


def test_an_extension_rearms_the_one_live_timer(aws: Aws, call: Call, clock: FakeClock) -> None:
    # Given a question with a ttl, its one live schedule armed for its expiry
    envelope = aws.raise_question(policy=approval(ttl=60, max_extension=120))
    lifecycle = build_lifecycle(
        aws.settings, dynamodb=aws.dynamodb, sns=aws.sns, sqs=aws.sqs, scheduler=aws.scheduler, clock=clock
    )
    timers = lifecycle.timers
    assert isinstance(timers, Timers)
    timers.set(timers.for_envelope(envelope))
    assert list(aws.schedules()) == [schedule_name("q-1", "expire", 0)]

    # When a responder extends it by a minute
    assert call(post("q-1", "extend", {"by_seconds": 60, "reason": "r"}))["statusCode"] == 200

    # Then the old timer, firing at the old expiry, decides nothing and arms the moved expiry
    clock.advance(60)
    assert lifecycle.handle(TimerEvent(question_id="q-1", timer="expire", n=0)) == "stale"
    moved = aws.schedules()[schedule_name("q-1", "expire", 0, 1)]
    assert moved["input"] == {"question_id": "q-1", "timer": "expire", "n": 0, "extension": 1}
    assert moved["at"] == "at(2026-11-30T10:02:00)"
    assert stages(aws) == ["raised", "extended"]
    # and the moved timer, at the new expiry, expires it
    clock.advance(60)
    assert lifecycle.handle(TimerEvent.model_validate(moved["input"])) == "expired"
    assert stages(aws)[-1] == "expired"


def test_an_unextended_question_keeps_its_timer_input(aws: Aws, clock: FakeClock) -> None:
    envelope = aws.raise_question(policy=approval(ttl=60))
    timers = Timers(aws.resources.schedule_group, "arn:aws:lambda:us-east-1:123456789012:function:l",
                    "arn:aws:iam::123456789012:role/s", aws.scheduler, clock=clock)  # fmt: skip

    timers.set(timers.for_envelope(envelope))

    assert aws.schedules()[schedule_name("q-1", "expire", 0)]["input"] == {
        "question_id": "q-1",
        "timer": "expire",
        "n": 0,
    }


# -- the starter, from POST /threads/{id}/runs to every question its run raises ---------------


class Order(TypedDict, total=False):
    n: int
    done: list[int]


@wait(approval(requester_cannot_approve=True))
def pay(n: int) -> dict[str, int]:
    return {"paid": n}


@wait(approval(requester_cannot_approve=True))
def ship(n: int) -> dict[str, int]:
    return {"shipped": n}


def two_approvals(state: Order) -> Order:
    pay(n=state["n"])
    ship(n=state["n"])
    return {"done": [state["n"]]}


def order_graph() -> Any:
    graph: StateGraph[Order, None, Order, Order] = StateGraph(Order)
    graph.add_node("two_approvals", two_approvals)
    graph.add_edge(START_NODE, "two_approvals")
    graph.add_edge("two_approvals", END)
    return graph.compile(checkpointer=InMemorySaver())


def start_as(principal: str, thread_id: str, n: int) -> dict[str, Any]:
    return api_event(
        "start_run.json",
        path=f"/threads/{thread_id}/runs",
        resource="/threads/{thread_id}/runs",
        path_parameters={"thread_id": thread_id},
        body=json.dumps({"input": {"n": n}}),
        identity=who(principal),
    )


def drain(aws: Aws, runner: RunnerService) -> list[str]:
    """Run every message the ledger's stream puts on the inbox, as the event source mapping does."""
    outcomes: list[str] = []
    while True:
        aws.dispatch()
        got = aws.sqs.receive_message(QueueUrl=aws.resources.inbox_url, MaxNumberOfMessages=10).get(
            "Messages", []
        )
        if not got:
            return outcomes
        for message in got:
            outcome = runner.run(parse_message(message["Body"]), message_id=message["MessageId"])
            outcomes.append(outcome.status)
            aws.sqs.delete_message(QueueUrl=aws.resources.inbox_url, ReceiptHandle=message["ReceiptHandle"])


def test_the_starter_is_carried_to_every_question_of_the_run_and_no_further(
    aws: Aws, call: Call, clock: FakeClock
) -> None:
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)
    runner = RunnerService(
        order_graph(),
        build_announce(aws.settings, dynamodb=aws.dynamodb, sns=aws.sns, sqs=aws.sqs),
        ledger,
        clock=clock,
    )

    def answer(principal: str) -> tuple[int, str | None]:
        [question_id] = ledger.get_thread("t-1").pending
        digest = ledger.get_question(question_id).digest
        response = call(reply_as(principal, digest, question_id=question_id))
        return response["statusCode"], body_of(response).get("error") if response[
            "statusCode"
        ] >= 400 else None

    # Given ann starts a run that asks two approvals, one after the other
    assert call(start_as(ANN, "t-1", 1))["statusCode"] == 202
    assert drain(aws, runner) == ["interrupted"]

    # Then the first question records her and refuses her answer; bob's is taken
    assert ledger.get_question(ledger.get_thread("t-1").pending[0]).requested_by == ANN
    assert answer(ANN) == (403, "requester_cannot_approve")
    assert answer(BOB) == (202, None)
    # and the question the resume raises is still her run's
    assert drain(aws, runner) == ["interrupted"]
    assert ledger.get_question(ledger.get_thread("t-1").pending[0]).requested_by == ANN
    assert answer(ANN) == (403, "requester_cannot_approve")
    assert answer(BOB) == (202, None)
    assert drain(aws, runner) == ["done"]

    # When carol starts the thread's next run, its questions are hers: ann may answer them now
    assert call(start_as(CAROL, "t-1", 2))["statusCode"] == 202
    assert drain(aws, runner) == ["interrupted"]
    assert ledger.get_question(ledger.get_thread("t-1").pending[0]).requested_by == CAROL
    assert answer(CAROL) == (403, "requester_cannot_approve")
    assert answer(ANN) == (202, None)


# -- quorum --------------------------------------------------------------------------------------

TEAM = [ANN, BOB, CAROL]


def shown(call: Call, question_id: str = "q-1") -> dict[str, Any]:
    return dict(
        body_of(
            call(
                get_event(
                    f"/questions/{question_id}", "/questions/{question_id}", {"question_id": question_id}
                )
            )
        )
    )


def test_two_approvals_of_three_decide_and_each_principal_votes_once(aws: Aws, call: Call) -> None:
    envelope = aws.raise_question(policy=approval(responders=TEAM, approvals_required=2))

    first = call(reply_as(ANN, envelope.digest))
    again = call(reply_as(ANN, envelope.digest))
    unbound = call(reply_event("q-1", APPROVE, identity=who(BOB)))  # every vote binds the digest

    assert (first["statusCode"], body_of(first)["status"]) == (202, "voted")
    assert (again["statusCode"], body_of(again)["error"]) == (409, "already_voted")
    assert unbound["statusCode"] == 428
    view = shown(call)
    assert view["status"] == "delivered" or view["status"] == "raised"
    assert view["quorum"]["summary"] == "1 of 2 approvals"
    assert [v["principal"] for v in view["quorum"]["votes"]] == [ANN]
    assert aws.inbox_messages() == []  # no resume for a vote that does not decide

    second = call(reply_as(BOB, envelope.digest))
    late = call(reply_as(CAROL, envelope.digest))

    assert (second["statusCode"], body_of(second)["status"]) == (202, "answered")
    assert (late["statusCode"], body_of(late)["error"]) == (409, "answer_conflict")
    view = shown(call)
    assert (view["status"], view["answer"], view["answered_by"]) == ("answered", APPROVE, BOB)
    assert view["quorum"]["summary"] == "2 of 2 approvals"
    assert [(v["principal"], v["vote"], v["if_match"]) for v in view["quorum"]["votes"]] == [
        (ANN, "approve", f'"{envelope.digest}"'),
        (BOB, "approve", f'"{envelope.digest}"'),
    ]
    assert len([m for m in aws.inbox_messages() if m.get("question_id") == "q-1"]) == 1


def test_one_rejection_decides_unless_more_are_required(aws: Aws, call: Call) -> None:
    one = aws.raise_question(question_id="q-1", policy=approval(responders=TEAM, approvals_required=2))
    two = aws.raise_question(
        question_id="q-2", policy=approval(responders=TEAM, approvals_required=2, rejections_required=2)
    )
    reject = {"action": "reject", "reason": "too much"}

    assert body_of(call(reply_as(ANN, one.digest, APPROVE)))["status"] == "voted"
    assert body_of(call(reply_as(BOB, one.digest, reject)))["status"] == "answered"
    assert shown(call, "q-1")["answer"] == reject

    assert body_of(call(reply_as(BOB, two.digest, reject, question_id="q-2")))["status"] == "voted"
    assert body_of(call(reply_as(CAROL, two.digest, reject, question_id="q-2")))["status"] == "answered"
    view = shown(call, "q-2")
    assert (view["answer"], view["quorum"]["rejections"]) == (reject, 2)


def test_quorum_refusals(aws: Aws, call: Call) -> None:
    policy = approval(responders=TEAM, approvals_required=2, approvals_from=[ANN, BOB])
    envelope = aws.raise_question(policy=policy)

    edited = call(reply_as(ANN, envelope.digest, {"action": "approve", "args": {"amount": 25}}))
    outsider = call(reply_as(CAROL, envelope.digest))

    assert (edited["statusCode"], body_of(edited)["field"]) == (422, "answer.args")
    assert (outsider["statusCode"], body_of(outsider)["error"]) == (403, "responder_not_allowed")
    # carol's approval does not count, but she may reject
    assert body_of(call(reply_as(CAROL, envelope.digest, {"action": "reject"})))["status"] == "answered"


def test_a_second_session_of_the_same_role_is_the_same_voter(aws: Aws, call: Call) -> None:
    role = "arn:aws:iam::123456789012:role/Approvers"
    envelope = aws.raise_question(policy=approval(responders=[role], approvals_required=2))
    session = "arn:aws:sts::123456789012:assumed-role/Approvers/"

    assert call(reply_as(session + "alice", envelope.digest))["statusCode"] == 202
    response = call(reply_as(session + "alice-again", envelope.digest))

    assert (response["statusCode"], body_of(response)["error"]) == (409, "already_voted")


def test_a_quorum_policy_is_checked_when_declared() -> None:
    import pydantic

    for bad in (
        {"kind": "decision", "options": ["a", "b"], "approvals_required": 2},
        {"kind": "approval", "rejections_required": 2},
        {"kind": "approval", "approvals_from": ["ann"]},
        {"kind": "approval", "approvals_required": 0},
        {"kind": "approval", "approvals_required": 2, "approvals_from": []},
    ):
        try:
            Policy.model_validate(bad)
        except pydantic.ValidationError:
            continue
        raise AssertionError(f"accepted {bad}")


def test_hand_overs_and_extensions_are_bounded(aws: Aws, call: Call, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each is an entry on the question's item (DynamoDB holds 400 KB): a responder cannot grow it
    # forever. (The bound is 20; 3 here keeps the test short: the service and the write's condition
    # both read it.)
    import wait_service.answers.authority
    import wait_service.ledger.question_authority

    monkeypatch.setattr(wait_service.answers.authority, "MAX_HANDOVERS", 3)
    monkeypatch.setattr(wait_service.ledger.question_authority, "MAX_HANDOVERS", 3)
    aws.raise_question(policy=approval(responders=[ANN], ttl=600, max_extension=10_000))
    for n in range(3):
        assert call(post("q-1", "delegate", {"to": f"p-{n}", "reason": "r"}))["statusCode"] == 200
        assert call(post("q-1", "extend", {"by_seconds": 1, "reason": "r"}))["statusCode"] == 200

    delegated = call(post("q-1", "delegate", {"to": "p-3", "reason": "r"}))
    extended = call(post("q-1", "extend", {"by_seconds": 1, "reason": "r"}))

    assert (delegated["statusCode"], body_of(delegated)["field"]) == (422, "to")
    assert (extended["statusCode"], body_of(extended)["field"]) == (422, "by_seconds")
    assert len(stages(aws)) == 1 + 6
    # and the write itself holds the bound, whatever the service read
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb)
    assert ledger.record_delegation("q-1", "p-9", by=ANN, reason="r") is not None
