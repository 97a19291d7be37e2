"""A HumanInTheLoopMiddleware request answered through the ``/signed`` routes (a shared secret).

The sample agent (``examples.middleware_agent``) asks approval of ``issue_refund`` with
``allowed_decisions = ["approve", "edit", "reject"]``. A system holding a shared secret reads the
question (its allowed decisions included) from ``GET /signed/questions/{id}``, answers it with
``POST /signed/questions/{id}/reply`` and may withdraw it with ``POST /signed/.../revoke``; the
thread resumes with the middleware's decision, and the audit and receipt show what the tool ran with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from service_events import api_event, body_of, header
from test_service_langchain_middleware import GRAPH, ask, last_message, ledger, runner
from test_service_signed import NOW, SECRET, key_arn, reply_path, secretsmanager, signed_api, signed_event

from agent_wait.signing import signed_headers
from examples.middleware_agent import REFUNDS
from wait_service.runs.inbox import ResumeMessage

if TYPE_CHECKING:
    from collections.abc import Callable

    from wait_service.http.api import WaitApi
    from wait_service.ledger import Ledger
    from wait_service.runs.runner import RunnerService

    Call = Callable[[dict[str, Any]], dict[str, Any]]

# The fixtures these tests share with the middleware's and the signed routes' tests.
__all__ = ["GRAPH", "key_arn", "ledger", "runner", "secretsmanager", "signed_api"]


def signed_get(question_id: str, at: int) -> dict[str, Any]:
    path = f"/signed/questions/{question_id}"
    return api_event(
        "get_question.json",
        path=path,
        resource="/signed/{proxy+}",
        method="GET",
        headers=signed_headers("ops", SECRET, "GET", path, b"", now=at),
        identity={"sourceIp": "198.51.100.7", "userArn": None, "user": None, "caller": None},
    )


def read(call: Call, question_id: str, *, at: int = NOW) -> tuple[str, dict[str, Any]]:
    # Each signature is used once: a second read signs at another second.
    response = call(signed_get(question_id, at))
    assert response["statusCode"] == 200, response["body"]
    etag = header(response, "ETag")
    assert etag is not None
    return etag, body_of(response)


def signed_reply(call: Call, question_id: str, body: dict[str, Any], etag: str) -> dict[str, Any]:
    return call(signed_event(reply_path(question_id), body, if_match=etag))


def test_a_signed_edit_resumes_with_the_middlewares_edit_and_the_audit_shows_what_ran(
    signed_api: WaitApi, runner: RunnerService, ledger: Ledger, call: Call
) -> None:
    [question_id] = ask(runner, "t-signed", "refund 40 to c-signed")

    # The signing system reads what it may decide
    etag, shown = read(call, question_id)
    assert shown["question"]["allowed_decisions"] == ["approve", "edit", "reject"]

    response = signed_reply(
        call, question_id, {"answer": {"action": "approve", "args": {"amount": 25}}}, etag
    )
    assert response["statusCode"] == 202, response["body"]

    outcome = runner.run(ResumeMessage(thread_id="t-signed", question_id=question_id))

    assert outcome.status == "done"
    assert REFUNDS.paid("c-signed") == [25]
    assert "refunded 25 to c-signed" in last_message(ledger, "t-signed")
    _, after = read(call, question_id, at=NOW + 1)
    audit = after["audit"]
    assert audit["answered_by"] == "hmac:ops"
    assert audit["proposed"] == {"function": "issue_refund", "args": {"customer": "c-signed", "amount": 40}}
    assert audit["authorized"] == {"function": "issue_refund", "args": {"customer": "c-signed", "amount": 25}}
    assert audit["diff"] == [{"op": "replace", "path": "/amount", "value": 25}]
    assert (audit["receipt"]["ran"], audit["receipt"]["args"], audit["receipt"]["outcome"]) == (
        True,
        {"customer": "c-signed", "amount": 25},
        "returned",
    )


def test_a_signed_decision_the_request_does_not_allow_is_a_422_naming_the_field(
    signed_api: WaitApi, runner: RunnerService, ledger: Ledger, call: Call
) -> None:
    [question_id] = ask(runner, "t-signed-no", "refund 40 to c-signed-no")
    etag, _ = read(call, question_id)

    response = signed_reply(call, question_id, {"answer": {"action": "respond", "message": "hi"}}, etag)

    assert response["statusCode"] == 422
    body = body_of(response)
    assert (body["error"], body["field"]) == ("invalid_answer", "answer.action")
    assert "'respond' is not allowed" in body["message"]
    assert ledger.get_question(question_id).is_open


def test_a_signed_revoke_resumes_with_a_reject_carrying_the_reason(
    signed_api: WaitApi, runner: RunnerService, ledger: Ledger, call: Call
) -> None:
    [question_id] = ask(runner, "t-signed-rev", "refund 40 to c-signed-rev")

    response = call(signed_event(f"/signed/questions/{question_id}/revoke", {"reason": "duplicate claim"}))
    assert response["statusCode"] in (200, 202), response["body"]

    outcome = runner.run(ResumeMessage(thread_id="t-signed-rev", question_id=question_id))

    assert outcome.status == "done"
    assert REFUNDS.paid("c-signed-rev") == []
    assert "duplicate claim" in last_message(ledger, "t-signed-rev")
    question = ledger.get_question(question_id)
    assert question.receipt is not None and question.receipt["ran"] is False
    assert question.answer == {"action": "reject", "reason": "revoked: duplicate claim"}
