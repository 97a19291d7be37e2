"""A LangChain v1 agent with HumanInTheLoopMiddleware on the local stack, answered through HTTP.

``examples.middleware_agent`` asks approval of each ``issue_refund`` call (approve, edit, reject)
in one batched interrupt; each call is one question with its own digest, and the thread resumes
once all are decided. Each step is awaited with ``eventually``, never a fixed sleep. The inbox page
(in headless Chromium) offers a request only the decisions it allows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from browser_support import launch, require_chromium, text_of, until
from e2e_support import LocalProcess, eventually, http, run_cli, start_local
from selenium.webdriver.common.by import By

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.e2e

GRAPH = "examples.middleware_agent:build_graph"


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalProcess]:
    local = start_local("--graph", GRAPH)
    try:
        yield local
    finally:
        code = local.stop()
        assert code == 0, "\n".join(local.lines)


def thread_in(stack: LocalProcess, thread_id: str, status: str) -> dict[str, Any] | None:
    _, _, thread = http("GET", f"{stack.api}/threads/{thread_id}")
    return thread if thread.get("status") in (status, "failed") else None


def reply(stack: LocalProcess, question_id: str, answer: dict[str, Any]) -> None:
    status, headers, _ = http("GET", f"{stack.api}/questions/{question_id}")
    assert status == 200
    status, _, body = http(
        "POST",
        f"{stack.api}/questions/{question_id}/reply",
        {"answer": answer},
        {"If-Match": headers["ETag"], "X-Wait-Principal": "e2e:carol"},
    )
    assert (status, body["status"]) == (202, "answered"), body


def test_a_batch_of_two_is_answered_through_http_and_the_receipts_show_what_ran(stack: LocalProcess) -> None:
    text = "refund 40 to c-a and refund 5 to c-b"
    status, _, _ = http(
        "POST",
        f"{stack.api}/threads/t-batch/runs",
        {"input": {"messages": [{"role": "user", "content": text}]}},
    )
    assert status == 202
    parked = eventually(lambda: thread_in(stack, "t-batch", "interrupted"), what="the batch to park")
    assert parked["status"] == "interrupted"
    first, second = parked["pending"]
    _, _, asked = http("GET", f"{stack.api}/questions/{first}")
    assert (asked["question"]["function"], asked["question"]["args"]) == (
        "issue_refund",
        {"customer": "c-a", "amount": 40},
    )
    assert asked["question"]["allowed_decisions"] == ["approve", "edit", "reject"]

    # A decision the request does not allow is refused at once
    _, headers, _ = http("GET", f"{stack.api}/questions/{first}")
    status, _, refused = http(
        "POST",
        f"{stack.api}/questions/{first}/reply",
        {"answer": {"action": "respond", "message": "hi"}},
        {"If-Match": headers["ETag"]},
    )
    assert status == 422, refused

    # One answer: the thread keeps waiting on the other
    reply(stack, second, {"action": "reject", "reason": "not this one"})
    eventually(
        lambda: (t := thread_in(stack, "t-batch", "interrupted")) and t["pending"] == [first] and t,
        what="the thread to wait on the rest",
    )

    reply(stack, first, {"action": "approve", "args": {"amount": 25}})
    done = eventually(lambda: thread_in(stack, "t-batch", "done"), timeout=60, what="the thread to finish")

    assert done["status"] == "done", done
    last = done["output"]["messages"][-1]["content"]
    assert "refunded 25 to c-a" in last and "not this one" in last
    _, _, edited = http("GET", f"{stack.api}/questions/{first}")
    assert (edited["audit"]["receipt"]["ran"], edited["audit"]["receipt"]["args"]) == (
        True,
        {"customer": "c-a", "amount": 25},
    )
    _, _, rejected = http("GET", f"{stack.api}/questions/{second}")
    assert rejected["audit"]["receipt"]["ran"] is False
    assert [edited["status"], rejected["status"]] == ["resumed", "resumed"]


def test_a_single_request_is_answered_from_the_cli(stack: LocalProcess) -> None:
    api = ["--api", stack.api]
    body = {"input": {"messages": [{"role": "user", "content": "refund 7 to c-cli"}]}}
    status, _, _ = http("POST", f"{stack.api}/threads/t-cli/runs", body)
    assert status == 202
    [question_id] = eventually(lambda: thread_in(stack, "t-cli", "interrupted"), what="the question")[
        "pending"
    ]

    # The CLI shows the decisions the request allows; one it does not allow is refused by the api
    refused = run_cli("reply", question_id, "--respond", "use store credit", *api)
    assert refused.returncode == 1
    assert "allowed   approve, edit, reject" in refused.stdout
    assert "422 invalid_answer" in refused.stderr and "'respond' is not allowed" in refused.stderr

    replied = run_cli("reply", question_id, "--reject", "--reason", "ask finance", *api, check=True)
    assert "202 answered" in replied.stdout

    done = eventually(lambda: thread_in(stack, "t-cli", "done"), timeout=60, what="the thread to finish")
    assert done["status"] == "done", done
    assert "ask finance" in done["output"]["messages"][-1]["content"]


def test_the_inbox_page_offers_the_allowed_decisions_and_an_edit_runs_the_tool_edited(
    stack: LocalProcess, tmp_path_factory: pytest.TempPathFactory
) -> None:
    require_chromium()
    body = {"input": {"messages": [{"role": "user", "content": "refund 40 to c-page"}]}}
    assert http("POST", f"{stack.api}/threads/t-page/runs", body)[0] == 202
    [question_id] = eventually(lambda: thread_in(stack, "t-page", "interrupted"), what="the question")[
        "pending"
    ]

    page = launch(tmp_path_factory.mktemp("chromium-profile"))
    try:
        page.get(f"{stack.api}/inbox?refresh=0#/questions/{question_id}")
        until(page, lambda d: d.find_element(By.ID, "answer-form"), "the answer form")
        # Approve, edit and reject: what the request allows, and no respond form
        assert text_of(page, "allowed-decisions") == "Decisions allowed: approve, edit, reject"
        assert "A refund needs your approval" in text_of(page, "description")
        form = page.find_element(By.ID, "answer-form")
        shown = {b.get_attribute("id") for b in form.find_elements(By.TAG_NAME, "button")}
        assert shown == {"approve", "approve-edited", "reject"}

        amount = page.find_element(By.ID, "arg-amount")
        amount.clear()
        amount.send_keys("25")
        page.find_element(By.ID, "approve-edited").click()
        until(page, lambda d: "recorded" in text_of(d, "outcome-message"), "the recorded sentence")

        done = eventually(lambda: thread_in(stack, "t-page", "done"), timeout=60, what="the thread to finish")
        assert done["status"] == "done", done
        assert "refunded 25 to c-page" in done["output"]["messages"][-1]["content"]
        # The page's audit shows what the tool ran with: the edited amount
        page.refresh()
        until(page, lambda d: text_of(d, "receipt").startswith("yes, with "), "the receipt")
        assert "amount = 25" in text_of(page, "receipt") and "customer = c-page" in text_of(page, "receipt")
    finally:
        page.quit()
