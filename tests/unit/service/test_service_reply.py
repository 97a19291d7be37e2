"""``POST /questions/{question_id}/reply``: every status code, through the api handler."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from service_events import body_of, reply_event

from agent_wait import Policy, approval, decision, free_text
from agent_wait.errors import QuestionClosedError
from wait_service.ledger import QuestionRecord

if TYPE_CHECKING:
    from collections.abc import Callable

    from service_events import Aws, FakeClock

    from wait_service.http.api import WaitApi

    Call = Callable[[dict[str, Any]], dict[str, Any]]

APPROVE: dict[str, Any] = {"action": "approve"}


def quoted(digest: str) -> str:
    return f'"{digest}"'


def resume_messages(aws: Aws) -> list[dict[str, Any]]:
    return [m for m in aws.inbox_messages() if "question_id" in m]


def stored_item(aws: Aws, question_id: str) -> dict[str, Any]:
    """The question's item as DynamoDB holds it, every attribute."""
    item: dict[str, Any] = aws.dynamodb.get_item(
        TableName=aws.resources.ledger_table, Key={"dedupe_key": {"S": f"wait.created:{question_id}"}}
    )["Item"]
    return item


def stored(aws: Aws, question_id: str) -> dict[str, Any]:
    from wait_service.ledger import from_item

    return from_item(stored_item(aws, question_id))


def test_first_answer_is_recorded_and_resume_enqueued(aws: Aws, call: Call) -> None:
    # Given a delivered approval question
    envelope = aws.raise_question("t-1", "q-1")

    # When the responder approves it, echoing the digest
    response = call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))

    # Then it is recorded with the responder, and exactly one resume message is enqueued
    assert response["statusCode"] == 202
    assert body_of(response) == {"question_id": "q-1", "status": "answered"}
    item = stored(aws, "q-1")
    assert item["status"] == "answered"
    assert item["answer"] == APPROVE
    assert item["answered_by"] == "arn:aws:iam::123456789012:user/ann"
    # (the item stores the stages after the raise, which is read back from created_at)
    assert [s["stage"] for s in item["lifecycle"]] == ["answered"]
    lifecycle = QuestionRecord.from_item(stored_item(aws, "q-1")).lifecycle
    assert [s["stage"] for s in lifecycle] == ["raised", "answered"]
    assert lifecycle[-1]["actor"] == "arn:aws:iam::123456789012:user/ann"
    messages = aws.inbox_messages()
    assert len(messages) == 1
    # The message names the question only: the runner reads the answer from the ledger
    assert {k: v for k, v in messages[0].items() if k != "_attributes"} == {
        "thread_id": "t-1",
        "question_id": "q-1",
    }
    assert messages[0]["_attributes"]["MessageGroupId"] == "t-1"
    assert messages[0]["_attributes"]["MessageDeduplicationId"] == "resume:q-1"


def test_reason_is_recorded(aws: Aws, call: Call) -> None:
    envelope = aws.raise_question()
    body = json.dumps({"answer": {"action": "reject", "reason": "fraud"}, "reason": "card was stolen"})

    response = call(reply_event("q-1", body=body, if_match=quoted(envelope.digest)))

    assert response["statusCode"] == 202
    assert stored(aws, "q-1")["reason"] == "card was stolen"


def test_identical_answer_again_is_200_and_enqueues_nothing_more(aws: Aws, call: Call) -> None:
    envelope = aws.raise_question()
    first = call(
        reply_event("q-1", {"action": "approve", "args": {"amount": 25.0}}, if_match=quoted(envelope.digest))
    )

    # The same answer (25 and 25.0 are the same JSON number) sent again
    again = call(
        reply_event("q-1", {"action": "approve", "args": {"amount": 25}}, if_match=quoted(envelope.digest))
    )

    assert (first["statusCode"], again["statusCode"]) == (202, 200)
    assert body_of(again) == {"question_id": "q-1", "status": "answered"}
    assert len(resume_messages(aws)) == 1


def test_different_answer_after_the_first_is_409_with_the_standing_answer(aws: Aws, call: Call) -> None:
    envelope = aws.raise_question()
    call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))

    response = call(reply_event("q-1", {"action": "reject"}, if_match=quoted(envelope.digest)))

    assert response["statusCode"] == 409
    assert body_of(response) == {
        "error": "answer_conflict",
        "message": "question q-1 was already answered: the first answer stands",
        "question_id": "q-1",
        "standing_answer": APPROVE,
    }
    assert stored(aws, "q-1")["answer"] == APPROVE
    assert len(resume_messages(aws)) == 1


def test_unknown_question_is_404(aws: Aws, call: Call) -> None:
    response = call(reply_event("nope", APPROVE, if_match='"x"'))

    assert response["statusCode"] == 404
    assert body_of(response)["error"] == "question_not_found"
    assert body_of(response)["question_id"] == "nope"


def test_expired_question_is_410_and_marked_expired(aws: Aws, call: Call, clock: FakeClock) -> None:
    # Given a question with a one-hour ttl, raised at the clock's start
    envelope = aws.raise_question(policy=approval(ttl=3600), now=clock.now)
    clock.advance(3600)

    response = call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))

    # Then the late reply is 410 with the standing answer: the expiry, applied now, decided it
    # (the timer had not fired yet) and the thread is resumed with it, once
    assert response["statusCode"] == 410
    assert body_of(response)["error"] == "question_closed"
    assert body_of(response)["status"] == "expired"
    assert body_of(response)["standing_answer"] == {"action": "reject", "reason": "expired"}
    item = stored(aws, "q-1")
    assert item["status"] == "expired"
    assert item["answered_by"] == "system:expiry"
    assert item["lifecycle"][-1]["stage"] == "expired"
    assert "expires_ttl" in item
    assert [{k: m[k] for k in ("thread_id", "question_id")} for m in resume_messages(aws)] == [
        {"thread_id": "t-1", "question_id": "q-1"}
    ]


def test_answer_just_before_expiry_is_accepted(aws: Aws, call: Call, clock: FakeClock) -> None:
    envelope = aws.raise_question(policy=approval(ttl=3600), now=clock.now)
    clock.advance(3599)

    assert call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))["statusCode"] == 202


@pytest.mark.parametrize("status", ["expired", "revoked"])
def test_closed_question_is_410(aws: Aws, call: Call, status: str) -> None:
    envelope = aws.raise_question()
    aws.dynamodb.update_item(
        TableName=aws.resources.ledger_table,
        Key={"dedupe_key": {"S": "wait.created:q-1"}},
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": status}},
    )

    response = call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))

    assert response["statusCode"] == 410
    assert body_of(response)["status"] == status


@pytest.mark.parametrize("if_match", ['"stale"', "stale", 'W/"stale"'])
def test_if_match_other_than_the_digest_is_412(aws: Aws, call: Call, if_match: str) -> None:
    aws.raise_question()

    response = call(reply_event("q-1", APPROVE, if_match=if_match))

    assert response["statusCode"] == 412
    assert body_of(response)["error"] == "precondition_failed"
    assert stored(aws, "q-1")["status"] == "raised"


def test_strict_binding_if_match_is_the_strong_etag_exactly(aws: Aws, call: Call) -> None:
    # Seed 003: an approval is bound to "the exact proposal": only the ETag GET returned binds it
    envelope = aws.raise_question(policy=approval(bind=True))

    response = call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))

    assert response["statusCode"] == 202


@pytest.mark.parametrize(
    "form", ["*", 'W/"{d}"', "{d}", '"other", "{d}"', '"{d}", "{d}"', 'w/"{d}"', '"{d}"x'], ids=repr
)
def test_strict_binding_refuses_any_other_if_match_with_412_and_records_nothing(
    aws: Aws, call: Call, form: str
) -> None:
    # Given a binding question
    envelope = aws.raise_question(policy=approval(bind=True))

    # When the reply's If-Match names the digest in any form but the strong ETag itself
    response = call(reply_event("q-1", APPROVE, if_match=form.format(d=envelope.digest)))

    # Then it is refused before anything is recorded or enqueued
    assert response["statusCode"] == 412
    assert body_of(response)["error"] == "precondition_failed"
    assert stored(aws, "q-1")["status"] == "raised"
    assert resume_messages(aws) == []


@pytest.mark.parametrize("form", ["*", '"{d}"', '"other", "{d}"'])
def test_a_non_binding_question_takes_if_match_as_http_does(aws: Aws, call: Call, form: str) -> None:
    envelope = aws.raise_question(policy=free_text(), question="Where to ship?")

    response = call(reply_event("q-1", "Main St 1", if_match=form.format(d=envelope.digest)))

    assert response["statusCode"] == 202


def test_missing_if_match_on_a_binding_policy_is_428(aws: Aws, call: Call) -> None:
    aws.raise_question(policy=approval(bind=True))

    response = call(reply_event("q-1", APPROVE))

    assert response["statusCode"] == 428
    assert body_of(response)["error"] == "precondition_required"
    assert resume_messages(aws) == []


def test_missing_if_match_on_a_non_binding_policy_is_accepted(aws: Aws, call: Call) -> None:
    aws.raise_question(policy=free_text(), question="Where to ship?")

    response = call(reply_event("q-1", "Main St 1"))

    assert response["statusCode"] == 202
    assert stored(aws, "q-1")["answer"] == "Main St 1"


def test_body_over_256_kib_is_413(aws: Aws, call: Call) -> None:
    envelope = aws.raise_question(policy=free_text())
    body = json.dumps({"answer": "x" * (256 * 1024)})

    response = call(reply_event("q-1", body=body, if_match=quoted(envelope.digest)))

    assert response["statusCode"] == 413
    assert body_of(response)["error"] == "payload_too_large"
    assert stored(aws, "q-1")["status"] == "raised"


def test_body_at_the_limit_is_not_413(aws: Aws, call: Call) -> None:
    aws.raise_question(policy=free_text())
    overhead = len(json.dumps({"answer": ""}))
    body = json.dumps({"answer": "x" * (256 * 1024 - overhead)})
    assert len(body) == 256 * 1024

    assert call(reply_event("q-1", body=body))["statusCode"] == 202


@pytest.mark.parametrize("body", ["not json", "{", "approve"])
def test_body_that_is_not_json_is_400(aws: Aws, call: Call, body: str) -> None:
    envelope = aws.raise_question()

    response = call(reply_event("q-1", body=body, if_match=quoted(envelope.digest)))

    assert response["statusCode"] == 400
    assert body_of(response) == {
        "error": "invalid_request",
        "message": "the body is not JSON",
        "field": "body",
    }


def test_body_without_an_answer_is_400_naming_the_field(aws: Aws, call: Call) -> None:
    envelope = aws.raise_question()

    response = call(reply_event("q-1", body='{"reason": "no answer"}', if_match=quoted(envelope.digest)))

    assert response["statusCode"] == 400
    assert body_of(response)["field"] == "answer"


@pytest.mark.parametrize(
    ("policy", "answer", "field"),
    [
        (approval(), {"action": "maybe"}, "answer.action"),
        (approval(), {"action": "approve", "args": [1]}, "answer.args"),
        (approval(), "yes", "answer"),
        (decision(["refund", "replace"]), {"choice": "ignore"}, "answer.choice"),
        (free_text(), {"text": 3}, "answer.text"),
    ],
)
def test_answer_that_does_not_fit_the_policy_is_422_naming_the_field(
    aws: Aws, call: Call, policy: Policy, answer: Any, field: str
) -> None:
    envelope = aws.raise_question(policy=policy)

    response = call(reply_event("q-1", answer, if_match=quoted(envelope.digest)))

    assert response["statusCode"] == 422
    body = body_of(response)
    assert (body["error"], body["field"], body["question_id"]) == ("invalid_answer", field, "q-1")
    assert stored(aws, "q-1")["status"] == "raised"


def test_responder_outside_the_policy_is_403(aws: Aws, call: Call) -> None:
    envelope = aws.raise_question(policy=approval(responders=["arn:aws:iam::123456789012:user/bob"]))

    response = call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))

    assert response["statusCode"] == 403
    assert body_of(response)["principal"] == "arn:aws:iam::123456789012:user/ann"


def test_responder_in_the_policy_is_accepted(aws: Aws, call: Call) -> None:
    envelope = aws.raise_question(policy=approval(responders=["arn:aws:iam::123456789012:user/ann"]))

    assert call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))["statusCode"] == 202


@pytest.mark.parametrize(
    ("context_patch", "principal"),
    [
        ({"authorizer": {"claims": {"sub": "cognito-sub-1"}}}, "cognito-sub-1"),
        ({"authorizer": {"jwt": {"claims": {"sub": "jwt-sub-1"}}}}, "jwt-sub-1"),
        ({"authorizer": {"principalId": "key-7"}}, "key-7"),
    ],
)
def test_principal_from_jwt_or_authorizer(
    aws: Aws, call: Call, context_patch: dict[str, Any], principal: str
) -> None:
    envelope = aws.raise_question()
    event = reply_event(
        "q-1", APPROVE, if_match=quoted(envelope.digest), identity={"sourceIp": "203.0.113.7"}
    )
    event["requestContext"].update(context_patch)

    assert call(event)["statusCode"] == 202
    assert stored(aws, "q-1")["answered_by"] == principal


def test_no_principal_is_refused_unless_local(aws: Aws, call: Call) -> None:
    envelope = aws.raise_question()

    remote = call(
        reply_event("q-1", APPROVE, if_match=quoted(envelope.digest), identity={"sourceIp": "203.0.113.7"})
    )
    local = call(
        reply_event("q-1", APPROVE, if_match=quoted(envelope.digest), identity={"sourceIp": "127.0.0.1"})
    )

    assert remote["statusCode"] == 403
    assert body_of(remote)["error"] == "responder_not_allowed"
    # The local stack's gateway: anonymous may answer a policy that names no responders.
    assert local["statusCode"] == 202
    assert stored(aws, "q-1")["answered_by"] == "anonymous"


def sent_to_inbox(aws: Aws) -> list[dict[str, Any]]:
    """What is on the inbox now, before the dispatcher reads the ledger's stream."""
    return aws.sqs.receive_message(QueueUrl=aws.resources.inbox_url, MaxNumberOfMessages=10).get(
        "Messages", []
    )


def test_the_reply_sends_nothing_itself_the_stream_enqueues_its_resume(aws: Aws, call: Call) -> None:
    # Given a delivered question
    envelope = aws.raise_question()

    # When it is answered
    response = call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))

    # Then the api wrote the answer and answered: the inbox is empty until the dispatcher reads
    # the ledger's stream, which enqueues the resume
    assert response["statusCode"] == 202
    assert sent_to_inbox(aws) == []
    decided = stored_item(aws, "q-1")
    aws.dispatch()
    assert len(resume_messages(aws)) == 1
    # And writes nothing on the question: the decided item is as the reply left it, so the
    # runner's transaction recording the resume meets no write of the dispatcher's on it
    assert stored_item(aws, "q-1") == decided


def test_an_answer_whose_reply_died_after_the_write_is_resumed_with_no_retry(aws: Aws, call: Call) -> None:
    # Given an answer recorded by a reply that died right after its write (nothing after it ran)
    from wait_service.ledger import Ledger

    envelope = aws.raise_question()
    Ledger(aws.resources.ledger_table, aws.dynamodb).record_answer("q-1", APPROVE, answered_by="ann")

    # When the ledger's stream is read, with no client retrying
    # Then the resume is enqueued, once
    assert len(resume_messages(aws)) == 1

    # And a repeat of the same answer is idempotent (200): the resume is certain, and not sent again
    response = call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))
    assert response["statusCode"] == 200
    assert resume_messages(aws) == []


def test_a_repeat_answers_200_and_never_sends_a_resume_itself(aws: Aws, call: Call) -> None:
    # Given an answer just recorded whose resume the dispatcher has not enqueued yet
    from wait_service.ledger import Ledger

    envelope = aws.raise_question()
    Ledger(aws.resources.ledger_table, aws.dynamodb).record_answer("q-1", APPROVE, answered_by="ann")

    # When the same answer arrives again before the stream is read
    response = call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))

    # Then it is 200 and sends nothing: the recorded decision's one resume comes from the stream
    assert response["statusCode"] == 200
    assert sent_to_inbox(aws) == []
    assert len(resume_messages(aws)) == 1


def test_an_answer_is_counted_and_timed_once_by_the_dispatcher_not_by_the_reply(
    aws: Aws, api: WaitApi, clock: FakeClock
) -> None:
    from agent_wait_cli.local.streams import StreamReader
    from wait_service.metric_names import QUESTIONS_ANSWERED, QUESTIONS_EXPIRED, TIME_TO_ANSWER
    from wait_service.observability import metrics
    from wait_service.stream.dispatcher import build_ledger_stream

    metrics.clear_metrics()
    # Given a question raised 90 s ago and another that expired
    envelope = aws.raise_question("t-1", "q-1", now=clock())
    expiring = aws.raise_question("t-2", "q-2", policy=Policy(kind="approval", ttl=60), now=clock())
    clock.advance(90)

    # When the first is answered, a repeat arrives, and the expired one is answered
    try:
        for _ in range(2):
            api.replies.reply("q-1", APPROVE, principal="ann", if_match=quoted(envelope.digest))
        with pytest.raises(QuestionClosedError):
            api.replies.reply("q-2", APPROVE, principal="ann", if_match=quoted(expiring.digest))

        # Then the reply counts no answer (only the expiry it found), and the dispatcher, handed
        # the ledger's stream twice (a retried batch), counts one answer with the 90 s it waited
        assert QUESTIONS_ANSWERED not in metrics.metric_set
        assert metrics.metric_set[QUESTIONS_EXPIRED]["Value"] == [1.0]
        metrics.clear_metrics()
        aws.dispatch()
        again = build_ledger_stream(aws.settings, dynamodb=aws.dynamodb, sqs=aws.sqs, sns=aws.sns)
        handed = StreamReader(
            aws.streams,
            aws.resources.ledger_stream_arn,
            lambda event, _: [again.process(record) for record in event["Records"]],
        ).drain()
        assert handed >= 3
        assert metrics.metric_set[QUESTIONS_ANSWERED]["Value"] == [1.0]
        assert metrics.metric_set[TIME_TO_ANSWER]["Value"] == [90000.0]
    finally:
        metrics.clear_metrics()


def test_an_edit_naming_an_argument_the_question_lacks_is_422_and_never_enqueued(
    aws: Aws, call: Call
) -> None:
    """A typo in an edited argument is refused at reply time: recorded, it could never resume."""
    envelope = aws.raise_question("t-1", "q-1")

    response = call(
        reply_event("q-1", {"action": "approve", "args": {"amonut": 25}}, if_match=quoted(envelope.digest))
    )

    assert response["statusCode"] == 422
    assert body_of(response)["field"] == "answer.args.amonut"
    assert stored(aws, "q-1")["status"] == "raised"
    assert aws.inbox_messages() == []


def test_the_audit_record_shows_proposed_authorized_diff_and_the_tag_sent(aws: Aws, call: Call) -> None:
    """Seed 003: "an activity view needs to distinguish proposal from authorized replacement"."""
    from service_events import get_event

    envelope = aws.raise_question()
    call(reply_event("q-1", {"action": "approve", "args": {"amount": 25}}, if_match=quoted(envelope.digest)))

    audit = body_of(call(get_event("/questions/q-1", "/questions/{question_id}", {"question_id": "q-1"})))[
        "audit"
    ]

    assert audit["proposed"] == {"function": "issue_refund", "args": {"customer": "c-17", "amount": 40}}
    assert audit["authorized"] == {"function": "issue_refund", "args": {"customer": "c-17", "amount": 25}}
    assert audit["diff"] == [{"op": "replace", "path": "/amount", "value": 25}]
    assert audit["answered_by"] == "arn:aws:iam::123456789012:user/ann"
    assert audit["if_match"] == quoted(envelope.digest)
    assert audit["answered_at"] is not None
    assert audit["receipt"] is None  # nothing ran yet


@pytest.mark.parametrize(
    "answer", [{"action": "reject", "reason": "no receipt"}, None], ids=["rejected", "still-open"]
)
def test_the_audit_record_authorizes_nothing_but_an_approval(aws: Aws, call: Call, answer: Any) -> None:
    from service_events import get_event

    envelope = aws.raise_question()
    if answer is not None:
        call(reply_event("q-1", answer, if_match=quoted(envelope.digest)))

    audit = body_of(call(get_event("/questions/q-1", "/questions/{question_id}", {"question_id": "q-1"})))[
        "audit"
    ]

    assert audit["proposed"]["args"] == {"customer": "c-17", "amount": 40}
    assert (audit["authorized"], audit["diff"]) == (None, [])


def test_two_identical_proposals_have_two_etags_and_one_never_approves_the_other(
    aws: Aws, call: Call
) -> None:
    # Given the same call proposed on two threads
    first = aws.raise_question("t-1", "q-1")
    second = aws.raise_question("t-2", "q-2")

    # Then each question shows its own ETag
    assert first.question == second.question and first.policy == second.policy
    assert first.digest != second.digest

    # and the tag read on one question is refused on the other, with nothing recorded
    response = call(reply_event("q-2", APPROVE, if_match=quoted(first.digest)))
    assert response["statusCode"] == 412
    assert stored(aws, "q-2")["status"] == "raised"
    assert call(reply_event("q-2", APPROVE, if_match=quoted(second.digest)))["statusCode"] == 202


def test_a_reply_reads_the_question_without_its_history_and_still_records_it(aws: Aws, call: Call) -> None:
    # Given a delivered question (its history holds its raise)
    envelope = aws.raise_question("t-1", "q-1")
    reads: list[dict[str, Any]] = []

    def seen(params: dict[str, Any], **_: Any) -> None:
        reads.append(dict(params))

    # When it is answered (the client is shared with later tests: the hook goes with the test)
    aws.dynamodb.meta.events.register("provide-client-params.dynamodb.GetItem", seen)
    try:
        response = call(reply_event("q-1", APPROVE, if_match=quoted(envelope.digest)))
    finally:
        aws.dynamodb.meta.events.unregister("provide-client-params.dynamodb.GetItem", seen)

    # Then the reply read the question once, without its lifecycle or envelope...
    assert response["statusCode"] == 202
    (read,) = reads
    names = read.get("ExpressionAttributeNames", {})
    read_names = {names.get(part.strip(), part.strip()) for part in read["ProjectionExpression"].split(",")}
    assert "lifecycle" not in read_names and "envelope" not in read_names
    assert {"status", "policy", "digest", "question", "delegated_to", "votes"} <= read_names
    # ...and the history it did not read is whole: the answer's move was appended to it
    lifecycle = QuestionRecord.from_item(stored_item(aws, "q-1")).lifecycle
    assert [s["stage"] for s in lifecycle] == ["raised", "answered"]
