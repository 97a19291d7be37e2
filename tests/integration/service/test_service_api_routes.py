"""Runs, threads, question reads, listing with pagination and the OpenAPI document."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from service_events import ROOT, body_of, get_event, header, load_handler, reply_event, start_event

from wait_service.ledger import Ledger

if TYPE_CHECKING:
    from collections.abc import Callable

    from service_events import Aws, FakeClock, LambdaContext

    from wait_service.http.api import WaitApi

    Call = Callable[[dict[str, Any]], dict[str, Any]]


def ledger_of(aws: Aws, clock: FakeClock) -> Ledger:
    return Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)


# -- POST /threads/{thread_id}/runs ----------------------------------------------------------


def test_start_run_is_202_and_enqueues_a_start_message(aws: Aws, call: Call) -> None:
    response = call(start_event("t-9", {"customer": "c-17", "amount": 40}))

    assert response["statusCode"] == 202
    assert body_of(response) == {"thread_id": "t-9", "status": "queued"}
    [message] = aws.inbox_messages()
    assert (message["thread_id"], message["input"]) == ("t-9", {"customer": "c-17", "amount": 40})
    assert message["_attributes"]["MessageGroupId"] == "t-9"
    assert message["_attributes"]["MessageDeduplicationId"].startswith("run:t-9:")


def test_each_run_is_a_new_message(aws: Aws, call: Call) -> None:
    call(start_event("t-9", {"n": 1}))
    call(start_event("t-9", {"n": 2}))

    # FIFO order within the thread's group: the second run comes after the first
    assert [m["input"] for m in aws.inbox_messages()] == [{"n": 1}, {"n": 2}]


def test_start_run_on_a_waiting_thread_is_409_with_pending_ids(
    aws: Aws, call: Call, clock: FakeClock
) -> None:
    ledger = ledger_of(aws, clock)
    ledger.queue_thread("t-9")
    ledger.thread_interrupted("t-9", ["q-1", "q-2"])

    response = call(start_event("t-9", {"customer": "c-17", "amount": 40}))

    assert response["statusCode"] == 409
    body = body_of(response)
    assert (body["error"], body["pending"], body["thread_id"]) == ("thread_waiting", ["q-1", "q-2"], "t-9")
    assert aws.inbox_messages() == []


@pytest.mark.parametrize("state", ["running", "done", "failed"])
def test_start_run_on_a_thread_that_is_not_waiting_is_accepted(
    aws: Aws, call: Call, clock: FakeClock, state: str
) -> None:
    ledger = ledger_of(aws, clock)
    if state == "running":
        ledger.thread_running("t-9")
    elif state == "done":
        ledger.thread_done("t-9", "{}")
    else:
        ledger.thread_failed("t-9", "boom")

    assert call(start_event("t-9", {}))["statusCode"] == 202
    assert ledger.get_thread("t-9").run_status == "queued"


def test_start_run_body_not_json_is_400(call: Call) -> None:
    assert call(start_event("t-9", body="{nope"))["statusCode"] == 400


def test_start_run_unknown_field_is_400(call: Call) -> None:
    response = call(start_event("t-9", body='{"inputs": {}}'))

    assert response["statusCode"] == 400
    assert body_of(response)["field"] == "inputs"


# -- GET /threads/{thread_id} ----------------------------------------------------------------


def thread_event(thread_id: str) -> dict[str, Any]:
    return get_event(f"/threads/{thread_id}", "/threads/{thread_id}", {"thread_id": thread_id})


def test_get_thread_is_200_with_status_pending_and_output(aws: Aws, call: Call, clock: FakeClock) -> None:
    ledger = ledger_of(aws, clock)
    ledger.thread_running("t-1")
    ledger.thread_interrupted("t-1", ["q-1"])

    waiting = body_of(call(thread_event("t-1")))
    ledger.thread_done("t-1", json.dumps({"refund": {"amount": 40}}))
    done_response = call(thread_event("t-1"))

    assert waiting["status"] == "interrupted"
    assert waiting["pending"] == ["q-1"]
    assert done_response["statusCode"] == 200
    assert body_of(done_response) == {
        "thread_id": "t-1",
        "status": "done",
        "pending": [],
        "output": {"refund": {"amount": 40}},
        "error": None,
        "updated_at": "2026-11-30T10:00:00.000Z",
        "deferred_runs": 0,
        "attempt": None,
        "output_omitted": None,
    }


def test_get_unknown_thread_is_404(call: Call) -> None:
    response = call(thread_event("nope"))

    assert response["statusCode"] == 404
    assert body_of(response) == {
        "error": "thread_not_found",
        "message": "no thread nope",
        "thread_id": "nope",
    }


# -- GET /questions/{question_id} ------------------------------------------------------------


def question_event(question_id: str) -> dict[str, Any]:
    return get_event(f"/questions/{question_id}", "/questions/{question_id}", {"question_id": question_id})


def test_get_question_shows_policy_digest_etag_status_and_lifecycle(aws: Aws, call: Call) -> None:
    envelope = aws.raise_question("t-1", "q-1")
    call(reply_event("q-1", {"action": "approve"}, if_match=f'"{envelope.digest}"'))

    response = call(question_event("q-1"))

    assert response["statusCode"] == 200
    assert header(response, "ETag") == f'"{envelope.digest}"'
    body = body_of(response)
    assert body["digest"] == envelope.digest
    assert body["question"] == {"function": "issue_refund", "args": {"customer": "c-17", "amount": 40}}
    assert body["policy"] == envelope.policy.model_dump(mode="json")
    assert body["status"] == "answered"
    assert body["answer"] == {"action": "approve"}
    assert body["answered_by"] == "arn:aws:iam::123456789012:user/ann"
    assert [(s["stage"], s["actor"]) for s in body["lifecycle"]] == [
        ("raised", "agent"),
        ("answered", "arn:aws:iam::123456789012:user/ann"),
    ]
    assert all(s["at"] for s in body["lifecycle"])


def test_etag_of_get_question_is_accepted_as_if_match(aws: Aws, call: Call) -> None:
    aws.raise_question()
    etag = header(call(question_event("q-1")), "ETag")

    assert call(reply_event("q-1", {"action": "approve"}, headers={"if-match": etag}))["statusCode"] == 202


def test_get_unknown_question_is_404(call: Call) -> None:
    response = call(question_event("nope"))

    assert response["statusCode"] == 404
    assert body_of(response)["error"] == "question_not_found"


# -- GET /questions ----------------------------------------------------------------------------


def list_event(**query: str) -> dict[str, Any]:
    return get_event("/questions", "/questions", None, query=query or None)


def test_list_questions_by_status_and_thread_with_pagination(aws: Aws, call: Call, clock: FakeClock) -> None:
    # Given five questions on two threads, raised a minute apart; one answered
    for n in range(5):
        aws.raise_question(f"t-{n % 2}", f"q-{n}", now=clock.now.replace(minute=n))
    call(reply_event("q-4", {"action": "approve"}, if_match=f'"{aws.published[-1].digest}"'))

    # When listing raised questions two at a time
    pages, token = [], None
    while True:
        query = {"status": "raised", "limit": "2"} | ({"next": token} if token else {})
        page = body_of(call(list_event(**query)))
        pages.append([item["question_id"] for item in page["items"]])
        token = page["next"]
        if not token:
            break

    # Then every raised question comes exactly once, newest first
    assert [qid for page in pages for qid in page] == ["q-3", "q-2", "q-1", "q-0"]
    assert all(len(page) <= 2 for page in pages)
    by_thread = body_of(call(list_event(thread_id="t-0")))
    assert [item["question_id"] for item in by_thread["items"]] == ["q-4", "q-2", "q-0"]
    both = body_of(call(list_event(thread_id="t-0", status="answered")))
    assert [(item["question_id"], item["status"]) for item in both["items"]] == [("q-4", "answered")]
    everything = body_of(call(list_event(limit="100")))
    assert sorted(item["question_id"] for item in everything["items"]) == [f"q-{n}" for n in range(5)]
    assert everything["next"] is None


def test_list_pending_merges_raised_and_delivered_newest_first(
    aws: Aws, call: Call, clock: FakeClock
) -> None:
    """The CLI lists with `--status pending`: every question still waiting for an answer."""
    # Given seven questions a minute apart: odd ones delivered, q-6 answered
    ledger = ledger_of(aws, clock)
    for n in range(7):
        aws.raise_question(f"t-{n % 2}", f"q-{n}", now=clock.now.replace(minute=n))
        if n % 2:
            ledger.mark_delivered(f"q-{n}")
    call(reply_event("q-6", {"action": "approve"}, if_match=f'"{aws.published[-1].digest}"'))

    # When listing pending questions two at a time
    seen, token, pages = [], None, 0
    while True:
        query = {"status": "pending", "limit": "2"} | ({"next": token} if token else {})
        page = body_of(call(list_event(**query)))
        assert len(page["items"]) <= 2
        seen += [(item["question_id"], item["status"]) for item in page["items"]]
        token, pages = page["next"], pages + 1
        if not token:
            break

    # Then each waiting question comes once, newest first, whatever its partition
    assert [qid for qid, _ in seen] == ["q-5", "q-4", "q-3", "q-2", "q-1", "q-0"]
    assert {status for _, status in seen} == {"raised", "delivered"}
    assert pages == 3
    on_thread = body_of(call(list_event(status="pending", thread_id="t-0")))
    assert [item["question_id"] for item in on_thread["items"]] == ["q-4", "q-2", "q-0"]
    wrong = call(list_event(status="pending", next=page_token_of_other_listing(call)))
    assert wrong["statusCode"] == 400


def page_token_of_other_listing(call: Call) -> str:
    token = body_of(call(list_event(status="raised", limit="1")))["next"]
    assert token
    return str(token)


def test_list_never_shows_thread_items(aws: Aws, call: Call, clock: FakeClock) -> None:
    ledger_of(aws, clock).thread_interrupted("t-1", ["q-1"])
    aws.raise_question("t-1", "q-1")

    items = body_of(call(list_event()))["items"]

    assert [item["question_id"] for item in items] == ["q-1"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"next": "not-a-token"}, "next"),
        ({"limit": "0"}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"status": "sleeping"}, "status"),
        # Found by schemathesis (make stress): an empty thread id was a DynamoDB ValidationException, 500.
        ({"thread_id": ""}, "thread_id"),
    ],
)
def test_list_rejects_bad_query_parameters_with_400(call: Call, query: dict[str, str], field: str) -> None:
    response = call(list_event(**query))

    assert response["statusCode"] == 400
    assert body_of(response)["field"] == field


# -- GET /openapi.json, routing, wiring ------------------------------------------------------


def test_openapi_lists_every_route(call: Call) -> None:
    response = call(get_event("/openapi.json", "/openapi.json"))

    assert response["statusCode"] == 200
    spec = body_of(response)
    assert spec["openapi"].startswith("3.")
    assert set(spec["paths"]) == {
        "/threads/{thread_id}/runs",
        "/threads/{thread_id}",
        "/questions",
        "/questions/{question_id}",
        "/questions/{question_id}/reply",
        "/questions/{question_id}/revoke",
        "/stats",
        "/questions/{question_id}/delegate",
        "/questions/{question_id}/extend",
    }
    reply = spec["paths"]["/questions/{question_id}/reply"]["post"]
    assert {"200", "202", "400", "404", "409", "410", "412", "413", "422", "428"} <= set(reply["responses"])
    assert "ReplyRequest" in json.dumps(reply["requestBody"])


def test_unknown_route_is_404_in_the_error_shape(call: Call) -> None:
    response = call(get_event("/nowhere", "/nowhere"))

    assert response["statusCode"] == 404
    assert body_of(response)["error"] == "not_found"


def test_handler_entry_point_runs_the_decorator_stack(
    api: WaitApi, context: LambdaContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    handler = load_handler("api")
    monkeypatch.setattr(handler, "build_service", lambda: api)

    response = handler.handler(start_event("t-5", {"x": 1}), context)

    assert response["statusCode"] == 202
    assert handler.service() is api


def test_handler_builds_its_service_from_the_environment(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in aws.resources.env().items():
        monkeypatch.setenv(name, value)
    # The api sends no message (the ledger's stream does): the deployed api has no inbox URL.
    monkeypatch.delenv("AGENT_WAIT_INBOX_URL")
    handler = load_handler("api")

    service = handler.build_service()

    assert service.ledger.table_name == aws.resources.ledger_table
    assert service.replies.ledger is service.ledger


def test_api_does_not_import_langgraph() -> None:
    code = (
        "import importlib.util, sys\n"
        f"path = {str(ROOT / 'functions/api/handler.py')!r}\n"
        "spec = importlib.util.spec_from_file_location('api_handler', path)\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "import wait_service.http.api, wait_service.answers.replies, wait_service.runs.starts\n"
        "import wait_service.ledger\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('langgraph', 'langchain_core'))\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT}:{ROOT / 'functions'}", "PATH": "/usr/bin:/bin"},
        check=True,
    )

    assert result.stdout.strip() == ""


def test_events_from_the_local_gateway_reach_the_same_routes(aws: Aws, call: Call) -> None:
    from agent_wait_cli.local.gateway import HttpRequest, to_proxy_event

    envelope = aws.raise_question()
    body = json.dumps({"answer": {"action": "approve"}}).encode()
    request = HttpRequest(
        "POST",
        "/questions/q-1/reply",
        [("Content-Type", "application/json"), ("If-Match", f'"{envelope.digest}"')],
        body,
    )

    reply = call(to_proxy_event(request, principal="local:ann"))
    listed = call(to_proxy_event(HttpRequest("GET", "/questions?status=answered&limit=5", [])))

    assert reply["statusCode"] == 202
    assert [item["answered_by"] for item in body_of(listed)["items"]] == ["local:ann"]
