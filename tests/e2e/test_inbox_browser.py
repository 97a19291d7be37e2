"""The inbox page in headless Chromium against the local stack: a person answering from a browser.

Each test starts its own refund thread (40 to c-17) and answers its one question through the page,
then checks what the api and the thread say. Tabs that must not refresh on their own (the stale and
second-tab cases) open the page with ``?refresh=0``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from boto3.dynamodb.types import TypeSerializer
from browser_support import OUTPUT, launch, require_chromium, text_of, until
from e2e_support import LocalProcess, eventually, http
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from agent_wait_cli.client import ApiClient
from agent_wait_cli.inbox import InboxProxy

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from selenium.webdriver.remote.webdriver import WebDriver

pytestmark = pytest.mark.e2e

REFUND = {"customer": "c-17", "amount": 40}


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    require_chromium()
    driver = launch(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def page(browser: WebDriver) -> Iterator[WebDriver]:
    yield browser
    # Back to one tab, and no name remembered from the previous test.
    for handle in browser.window_handles[1:]:
        browser.switch_to.window(handle)
        browser.close()
    browser.switch_to.window(browser.window_handles[0])
    browser.execute_script("localStorage.clear()")


def parked(local: LocalProcess, amount: float = 40) -> tuple[str, str]:
    """A new refund thread waiting on its question: (thread id, question id)."""
    thread_id = f"t-inbox-{uuid.uuid4().hex[:8]}"
    body = {"input": REFUND | {"amount": amount}}
    assert http("POST", f"{local.api}/threads/{thread_id}/runs", body)[0] == 202

    def waiting() -> Any:
        thread = http("GET", f"{local.api}/threads/{thread_id}")[2]
        return thread if thread.get("status") == "interrupted" else None

    [question_id] = eventually(waiting, what="the question")["pending"]
    return thread_id, question_id


def finished(local: LocalProcess, thread_id: str) -> dict[str, Any]:
    def done() -> Any:
        thread = http("GET", f"{local.api}/threads/{thread_id}")[2]
        return thread if thread.get("status") in {"done", "failed"} else None

    result: dict[str, Any] = eventually(done, what=f"thread {thread_id} to finish")
    return result


def open_question(driver: WebDriver, local: LocalProcess, question_id: str, query: str = "") -> None:
    driver.get("about:blank")  # a new page load, not only a new #fragment on the page already open
    driver.get(f"{local.api}/inbox{query}#/questions/{question_id}")
    until(driver, lambda d: d.find_element(By.ID, "answer-form"), "the answer form")


def set_name(driver: WebDriver, name: str) -> None:
    field = until(driver, lambda d: d.find_element(By.ID, "principal"), "the name field")
    field.clear()
    field.send_keys(name, Keys.TAB)


def test_approve_by_clicking_ends_the_thread_done(local_stack: LocalProcess, page: WebDriver) -> None:
    thread_id, question_id = parked(local_stack)
    open_question(page, local_stack, question_id)
    set_name(page, "alice")
    page.find_element(By.ID, "approve").click()
    until(page, lambda d: "recorded" in text_of(d, "outcome-message"), "the recorded sentence")

    thread = finished(local_stack, thread_id)
    assert thread["status"] == "done"
    assert thread["output"]["refund"]["amount"] == 40
    question = http("GET", f"{local_stack.api}/questions/{question_id}")[2]
    assert question["answered_by"] == "alice"
    # The page sent the ETag it displayed, exactly.
    assert question["audit"]["if_match"] == f'"{question["digest"]}"'
    # Once answered the page shows the outcome and the audit record, and what ran.
    page.refresh()
    until(page, lambda d: text_of(d, "answer-text") == "approved", "the outcome")
    assert question["digest"] in text_of(page, "audit")
    assert "alice" in text_of(page, "outcome")
    # What ran: the receipt the resumed call left.
    until(
        page, lambda d: text_of(d, "receipt").startswith("yes, with customer = c-17, amount = 40"), "receipt"
    )


def test_an_edited_amount_is_the_amount_refunded(local_stack: LocalProcess, page: WebDriver) -> None:
    thread_id, question_id = parked(local_stack)
    open_question(page, local_stack, question_id)
    amount = page.find_element(By.ID, "arg-amount")
    # The form is generated from the arguments: the amount is a number field holding 40.
    assert (amount.get_attribute("type"), amount.get_attribute("value")) == ("number", "40")
    amount.clear()
    amount.send_keys("25")
    page.find_element(By.ID, "approve-edited").click()
    until(page, lambda d: "recorded" in text_of(d, "outcome-message"), "the recorded sentence")

    thread = finished(local_stack, thread_id)
    assert thread["output"]["refund"]["amount"] == 25
    audit = http("GET", f"{local_stack.api}/questions/{question_id}")[2]["audit"]
    assert audit["diff"] == [{"op": "replace", "path": "/amount", "value": 25}]


def test_an_answer_that_does_not_fit_is_shown_next_to_its_field(
    local_stack: LocalProcess, page: WebDriver
) -> None:
    _, question_id = parked(local_stack)
    open_question(page, local_stack, question_id)
    amount = page.find_element(By.ID, "arg-amount")
    amount.clear()
    amount.send_keys("1e200")  # finite in JavaScript, more than DynamoDB can store: the api says 422
    page.find_element(By.ID, "approve-edited").click()
    message = until(page, lambda d: text_of(d, "err-arg-amount"), "the message next to the amount")
    assert "{" not in message
    assert "does not fit" in text_of(page, "outcome-message")
    assert page.switch_to.active_element.get_attribute("id") == "arg-amount"
    status = http("GET", f"{local_stack.api}/questions/{question_id}")[2]["status"]
    assert status in {"raised", "delivered"}


def test_an_invalid_proposal_is_shown_refused_as_is_and_accepted_once_fixed(
    local_stack: LocalProcess, page: WebDriver
) -> None:
    # Given a proposal that breaks its own schema (amount at most 10 000)
    thread_id, question_id = parked(local_stack, amount=20000)
    open_question(page, local_stack, question_id)
    assert "args.amount: must be smaller than or equal to 10000" in text_of(page, "invalid-args")

    # Approving it as is is refused, next to the field
    page.find_element(By.ID, "approve").click()
    until(page, lambda d: text_of(d, "err-arg-amount"), "the message next to the amount")
    assert http("GET", f"{local_stack.api}/questions/{question_id}")[2]["status"] in {"raised", "delivered"}

    # An edit that fixes it is accepted, and is what runs
    amount = page.find_element(By.ID, "arg-amount")
    amount.clear()
    amount.send_keys("5000")
    page.find_element(By.ID, "approve-edited").click()
    until(page, lambda d: "recorded" in text_of(d, "outcome-message"), "the recorded sentence")
    assert finished(local_stack, thread_id)["output"]["refund"]["amount"] == 5000


def test_a_second_tab_answering_late_is_told_who_answered_first(
    local_stack: LocalProcess, page: WebDriver
) -> None:
    _, question_id = parked(local_stack)
    open_question(page, local_stack, question_id, "?refresh=0")
    first = page.current_window_handle
    page.switch_to.new_window("tab")
    open_question(page, local_stack, question_id, "?refresh=0")
    page.find_element(By.ID, "reason").send_keys("not this customer")
    second = page.current_window_handle

    page.switch_to.window(first)
    page.find_element(By.ID, "approve").click()
    until(page, lambda d: "recorded" in text_of(d, "outcome-message"), "the first answer")

    page.switch_to.window(second)
    page.find_element(By.ID, "reject").click()
    sentence = until(page, lambda d: text_of(d, "outcome-message"), "the 409 sentence")
    assert sentence == "Someone else answered first: approved. Your answer was not recorded."
    answer = http("GET", f"{local_stack.api}/questions/{question_id}")[2]["answer"]
    assert answer == {"action": "approve"}


def test_the_edit_form_follows_the_arguments_schema(local_stack: LocalProcess, page: WebDriver) -> None:
    _, question_id = parked(local_stack)
    schema = {
        "type": "object",
        "properties": {
            "customer": {"type": "string", "enum": ["c-17", "c-18"]},
            "amount": {"type": "integer", "minimum": 1, "maximum": 100, "description": "in euros"},
        },
    }
    ledger(local_stack).update_item(
        TableName=ledger_table(local_stack),
        Key={"dedupe_key": {"S": f"wait.created:{question_id}"}},
        UpdateExpression="SET question.args_schema = :s",
        ExpressionAttributeValues={":s": TypeSerializer().serialize(schema)},
    )
    open_question(page, local_stack, question_id, "?refresh=0")
    customer = page.find_element(By.ID, "arg-customer")
    assert customer.tag_name == "select"
    assert [o.text for o in customer.find_elements(By.TAG_NAME, "option")] == ["c-17", "c-18"]
    amount = page.find_element(By.ID, "arg-amount")
    assert (amount.get_attribute("step"), amount.get_attribute("max")) == ("1", "100")
    assert "in euros" in page.find_element(By.CSS_SELECTOR, "label[for=arg-amount]").text


def ledger(local: LocalProcess) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=local.info["moto"],
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def ledger_table(local: LocalProcess) -> str:
    [table] = [t for t in ledger(local).list_tables()["TableNames"] if "ledger" in t.lower()]
    return str(table)


def test_a_stale_page_is_told_the_question_changed(local_stack: LocalProcess, page: WebDriver) -> None:
    _, question_id = parked(local_stack)
    open_question(page, local_stack, question_id, "?refresh=0")
    shown = text_of(page, "shown-tag")
    # The question changes under the reader: its digest in the ledger is no longer the one shown.
    ledger(local_stack).update_item(
        TableName=ledger_table(local_stack),
        Key={"dedupe_key": {"S": f"wait.created:{question_id}"}},
        UpdateExpression="SET digest = :d",
        ExpressionAttributeValues={":d": {"S": "0" * 64}},
    )
    page.find_element(By.ID, "approve").click()
    sentence = until(page, lambda d: text_of(d, "outcome-message"), "the 412 sentence")
    assert sentence.startswith("This question changed after you opened it, so your answer was not recorded.")
    assert text_of(page, "shown-tag") == shown
    assert http("GET", f"{local_stack.api}/questions/{question_id}")[2]["answer"] is None


def test_keyboard_only_approval(local_stack: LocalProcess, page: WebDriver) -> None:
    thread_id, question_id = parked(local_stack)
    page.get(f"{local_stack.api}/inbox")
    link = f'a[data-id="{question_id}"]'
    until(page, lambda d: d.find_element(By.CSS_SELECTOR, link), "the question in the list")

    def tab_to(selector: str, limit: int = 80) -> None:
        body = page.find_element(By.TAG_NAME, "body")
        for _ in range(limit):
            if page.execute_script("return document.activeElement.matches(arguments[0])", selector):
                return
            (page.switch_to.active_element if page.switch_to.active_element else body).send_keys(Keys.TAB)
        raise AssertionError(f"Tab never reached {selector}")

    tab_to(link)
    page.switch_to.active_element.send_keys(Keys.ENTER)
    until(page, lambda d: d.find_element(By.ID, "approve"), "the answer form")
    tab_to("#approve")
    page.switch_to.active_element.send_keys(Keys.ENTER)
    until(page, lambda d: "recorded" in text_of(d, "outcome-message"), "the recorded sentence")
    assert finished(local_stack, thread_id)["status"] == "done"


def test_screenshots_at_desktop_and_phone_width(local_stack: LocalProcess, page: WebDriver) -> None:
    OUTPUT.mkdir(exist_ok=True)
    parked(local_stack, amount=12.5)
    _, question_id = parked(local_stack)
    for width, height in ((1280, 900), (375, 812)):
        page.set_window_size(width, height)
        open_question(page, local_stack, question_id)
        until(page, lambda d: len(d.find_elements(By.CSS_SELECTOR, "ul.questions li")) >= 2, "the list")
        assert page.execute_script("return window.innerWidth") == width
        # Nothing wider than the screen: no sideways scrolling.
        overflow = page.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{overflow}px wider than {width}"
        path: Path = OUTPUT / f"inbox-{width}.png"
        full = page.execute_script("return document.documentElement.scrollHeight")
        page.set_window_size(width, max(height, min(int(full) + 100, 2400)))
        page.execute_script("window.scrollTo(0, 0)")
        assert page.save_screenshot(str(path))
        assert path.stat().st_size > 10_000
    page.set_window_size(1280, 900)


def test_make_local_prints_the_inbox_url(local_stack: LocalProcess) -> None:
    assert f"inbox: {local_stack.api}/inbox" in local_stack.lines
    status, headers, _ = raw_get(f"{local_stack.api}/inbox")
    assert (status, headers["Content-Type"]) == (200, "text/html; charset=utf-8")


def test_agent_wait_inbox_serves_the_page_and_signs_its_calls(
    local_stack: LocalProcess, page: WebDriver
) -> None:
    # Against a loopback api the client does not sign; the principal stands in for the caller's ARN
    # that SigV4 gives the deployed api. The forwarding is the same.
    proxy = InboxProxy(ApiClient(local_stack.api, principal="bob"), principal="bob")
    proxy.start()
    try:
        thread_id, question_id = parked(local_stack)
        page.get("about:blank")
        page.get(f"{proxy.url}#/questions/{question_id}")
        until(page, lambda d: d.find_element(By.ID, "approve"), "the answer form")
        assert text_of(page, "signed-in") == "Answering as bob"
        page.find_element(By.ID, "approve").click()
        until(page, lambda d: "recorded" in text_of(d, "outcome-message"), "the recorded sentence")
        assert finished(local_stack, thread_id)["status"] == "done"
        assert http("GET", f"{local_stack.api}/questions/{question_id}")[2]["answered_by"] == "bob"
        # Another web page cannot use it to answer with the person's credentials.
        forged = {"Origin": "https://evil.example"}
        assert http("POST", f"{proxy.origin}/questions/{question_id}/reply", {"answer": {}}, forged)[0] == 403
        assert raw_get(f"{proxy.origin}/openapi.json")[0] == 404
    finally:
        proxy.stop()


def raw_get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers.items()), exc.read()


# -- what is shown is what runs: every kind of argument, shown and sent back as proposed ---------

LETTER = "Dear customer,\r\n\n\tYour refund is on its way.\n  Regards,  \n\tthe team\t"
ODD_ARGS: dict[str, Any] = {
    "customer": "c-17",
    "amount": 40,
    "letter": LETTER,
    "padded": "  two spaces each side  ",
    "big": 12345678901234567890123,
    "nested": {"steps": [1, {"none": None}, [True, False]], "name": "Zoë 👋 — ñ"},
    "enabled": True,
    "nothing": None,
    "greeting": "héllo 👋",
}


def propose(local: LocalProcess, question_id: str, args: dict[str, Any]) -> None:
    """Make the parked question propose ``args`` (no argument schema: the form follows the values)."""
    ledger(local).update_item(
        TableName=ledger_table(local),
        Key={"dedupe_key": {"S": f"wait.created:{question_id}"}},
        UpdateExpression="SET question.args = :a REMOVE question.args_schema",
        ExpressionAttributeValues={":a": TypeSerializer().serialize(as_dynamodb(args))},
    )


def as_dynamodb(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return Decimal(str(value))
    if isinstance(value, list):
        return [as_dynamodb(v) for v in value]
    return {k: as_dynamodb(v) for k, v in value.items()}


def cell_text(driver: WebDriver, name: str) -> str:
    """The exact text of the proposed-call table's cell for argument ``name`` (no whitespace folding)."""
    return str(
        driver.execute_script(
            "const row = [...document.querySelectorAll('#detail table.args tr')]"
            ".find((r) => r.querySelector('th').textContent === arguments[0]);"
            "return row.querySelector('td').textContent;",
            name,
        )
    )


def approve_with_amount(driver: WebDriver, amount: str) -> None:
    field = driver.find_element(By.ID, "arg-amount")
    field.clear()
    field.send_keys(amount)
    driver.find_element(By.ID, "approve-edited").click()
    until(driver, lambda d: "recorded" in text_of(d, "outcome-message"), "the recorded sentence")


def answered(local: LocalProcess, question_id: str) -> dict[str, Any]:
    question: dict[str, Any] = http("GET", f"{local.api}/questions/{question_id}")[2]
    return question


def test_a_multi_line_string_is_shown_and_kept_as_proposed(
    local_stack: LocalProcess, page: WebDriver
) -> None:
    # Given a proposal whose letter has line breaks (CRLF too), tabs and surrounding spaces
    _, question_id = parked(local_stack)
    propose(local_stack, question_id, ODD_ARGS)
    open_question(page, local_stack, question_id, "?refresh=0")

    # Then the page shows it as it is, and offers it in a text box, not a one-line input
    assert cell_text(page, "letter") == LETTER
    assert cell_text(page, "padded") == ODD_ARGS["padded"]
    white_space = page.execute_script(
        "return getComputedStyle(document.querySelector('#detail table.args td.text-value')).whiteSpace"
    )
    assert white_space == "pre-wrap"
    letter = page.find_element(By.ID, "arg-letter")
    assert letter.tag_name == "textarea"
    # A text box reads line breaks back as LF (HTML's rule); nothing else changes.
    assert letter.get_property("value") == LETTER.replace("\r\n", "\n")

    # When the approver changes only the amount
    approve_with_amount(page, "25")

    # Then only the amount was sent, and the audit records only that change
    question = answered(local_stack, question_id)
    assert question["answer"] == {"action": "approve", "args": {"amount": 25}}
    assert question["audit"]["diff"] == [{"op": "replace", "path": "/amount", "value": 25}]
    assert question["audit"]["authorized"]["args"]["letter"] == LETTER


def test_every_kind_of_value_left_alone_is_sent_back_as_proposed(
    local_stack: LocalProcess, page: WebDriver
) -> None:
    _, question_id = parked(local_stack)
    propose(local_stack, question_id, ODD_ARGS)
    open_question(page, local_stack, question_id, "?refresh=0")

    # A number a JavaScript double cannot hold is shown with all its digits, in the table and the form
    assert cell_text(page, "big") == "12345678901234567890123"
    assert page.find_element(By.ID, "arg-big").get_property("value") == "12345678901234567890123"
    assert cell_text(page, "greeting") == "héllo 👋"
    assert page.find_element(By.ID, "arg-enabled").is_selected()

    approve_with_amount(page, "25")

    question = answered(local_stack, question_id)
    assert question["answer"]["args"] == {"amount": 25}
    assert question["audit"]["diff"] == [{"op": "replace", "path": "/amount", "value": 25}]
    assert question["audit"]["authorized"]["args"] == ODD_ARGS | {"amount": 25}


def test_what_the_approver_changes_is_sent_as_typed(local_stack: LocalProcess, page: WebDriver) -> None:
    _, question_id = parked(local_stack)
    propose(local_stack, question_id, ODD_ARGS)
    open_question(page, local_stack, question_id, "?refresh=0")
    # Keep a copy of each body the page posts (DevTools' evaluate is not bound by the page's CSP).
    page.execute_script(
        "window.sent = []; const send = window.fetch;"
        "window.fetch = (url, init) => { if (init && init.method === 'POST') window.sent.push(init.body);"
        " return send(url, init); };"
    )

    # A line added to the letter, long digits, a nested value with unicode, a flag turned off, a null filled
    page.find_element(By.ID, "arg-letter").send_keys("\nP.S. thanks ")
    big = page.find_element(By.ID, "arg-big")
    big.clear()
    big.send_keys("98765432109876543210987.000000000001")
    nested = page.find_element(By.ID, "arg-nested")
    nested.clear()
    nested.send_keys('{"steps": [12345678901234567890.123456789, null], "name": "Zoë"}')
    page.find_element(By.ID, "arg-enabled").click()
    nothing = page.find_element(By.ID, "arg-nothing")
    nothing.clear()
    nothing.send_keys("[false]")
    page.find_element(By.ID, "approve-edited").click()
    until(page, lambda d: "recorded" in text_of(d, "outcome-message"), "the recorded sentence")

    # The page sent exactly the changed fields, digits as typed
    [body] = page.execute_script("return window.sent")
    sent = json.loads(body, parse_float=Decimal)
    assert sent == {
        "answer": {
            "action": "approve",
            "args": {
                "letter": LETTER.replace("\r\n", "\n") + "\nP.S. thanks ",
                "big": Decimal("98765432109876543210987.000000000001"),
                "nested": {"steps": [Decimal("12345678901234567890.123456789"), None], "name": "Zoë"},
                "enabled": False,
                "nothing": [False],
            },
        }
    }
    assert '"big":98765432109876543210987.000000000001' in body
    # and the audit records those changes and no other
    diff = answered(local_stack, question_id)["audit"]["diff"]
    assert {op["path"].split("/")[1] for op in diff} == {"big", "enabled", "letter", "nested", "nothing"}


def test_the_page_reads_and_writes_numbers_digit_for_digit(
    local_stack: LocalProcess, page: WebDriver
) -> None:
    page.get("about:blank")
    page.get(f"{local_stack.api}/inbox?refresh=0")
    until(page, lambda d: d.find_element(By.ID, "questions"), "the page")
    text = '{"a":12345678901234567890.123456789,"b":[1e400,-0,0.1,40],"c":{"d":null,"e":true,"f":"x"}}'
    assert page.execute_script("return jsonText(parseExact(arguments[0]))", text) == text
    # Plain numbers stay numbers: only digits a double would lose are kept aside.
    assert page.execute_script("return typeof parseExact('[40]')[0]") == "number"


def test_the_stats_view_draws_its_charts_in_the_page(local_stack: LocalProcess, page: WebDriver) -> None:
    # Given two questions decided: one approved as proposed, one with an edited amount
    answered = []
    for answer in ({"action": "approve"}, {"action": "approve", "args": {"amount": 25}}):
        thread_id, question_id = parked(local_stack)
        status, headers, _ = http("GET", f"{local_stack.api}/questions/{question_id}")
        reply = http(
            "POST",
            f"{local_stack.api}/questions/{question_id}/reply",
            {"answer": answer},
            {"If-Match": headers["ETag"], "X-Wait-Principal": "ann"},
        )
        assert (status, reply[0]) == (200, 202)
        answered.append(thread_id)
    for thread_id in answered:
        finished(local_stack, thread_id)

    def counted() -> Any:
        totals = http("GET", f"{local_stack.api}/stats")[2]["totals"]
        return totals if totals["edit"] >= 1 and totals["approve"] >= 1 else None

    eventually(counted, what="the answers counted")

    # When the Stats view is opened
    page.set_window_size(1280, 900)
    page.get("about:blank")
    page.get(f"{local_stack.api}/inbox#/stats")
    until(page, lambda d: d.find_element(By.ID, "stats-tiles"), "the stats tiles")

    # Then its charts are SVG drawn in the page, and nothing broke the page's CSP
    charts = page.find_elements(By.CSS_SELECTOR, "figure.chart svg")
    assert len(charts) >= 3
    assert page.find_elements(By.CSS_SELECTOR, "figure.chart svg rect")
    assert "amount" in page.find_element(By.ID, "stats").text
    assert not page.find_element(By.TAG_NAME, "main").is_displayed()
    overflow = page.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    elsewhere = page.execute_script(
        "return performance.getEntriesByType('resource')"
        ".filter((r) => !r.name.startsWith(location.origin)).length"
    )
    assert elsewhere == 0
    # The view's own style block is allowed by the CSP (by its hash), so its layout applies.
    assert (
        page.execute_script("return getComputedStyle(document.getElementById('stats-tiles')).display")
        == "grid"
    )
    OUTPUT.mkdir(exist_ok=True)
    full = page.execute_script("return document.documentElement.scrollHeight")
    page.set_window_size(1280, max(900, min(int(full) + 100, 2400)))
    path = OUTPUT / "stats.png"
    assert page.save_screenshot(str(path))
    assert path.stat().st_size > 10_000
    page.set_window_size(1280, 900)


def test_a_quorum_question_is_approved_by_two_names(local_stack: LocalProcess, page: WebDriver) -> None:
    # Given a parked refund whose question two people must approve
    thread_id, question_id = parked(local_stack)
    ledger(local_stack).update_item(
        TableName=ledger_table(local_stack),
        Key={"dedupe_key": {"S": f"wait.created:{question_id}"}},
        UpdateExpression="SET policy.approvals_required = :n",
        ExpressionAttributeValues={":n": {"N": "2"}},
    )
    open_question(page, local_stack, question_id, "?refresh=0")
    assert text_of(page, "quorum") == "0 of 2 approvals"

    # When alice approves, her vote is counted and the question still waits
    set_name(page, "alice")
    page.find_element(By.ID, "approve").click()
    until(page, lambda d: "vote was counted" in text_of(d, "outcome-message"), "the counted sentence")
    until(page, lambda d: text_of(d, "quorum") == "1 of 2 approvals · alice approved", "one vote shown")
    # a second click by the same name is refused, and says why
    page.find_element(By.ID, "approve").click()
    until(page, lambda d: "voted on this question already" in text_of(d, "outcome-message"), "the 409")

    # And when bob approves, the quorum decides and the thread runs on
    set_name(page, "bob")
    open_question(page, local_stack, question_id, "?refresh=0")
    page.find_element(By.ID, "approve").click()
    until(page, lambda d: "recorded" in text_of(d, "outcome-message"), "the recorded sentence")
    assert finished(local_stack, thread_id)["status"] == "done"
    question = http("GET", f"{local_stack.api}/questions/{question_id}")[2]
    assert question["quorum"]["summary"] == "2 of 2 approvals"
    assert [(v["principal"], v["vote"]) for v in question["quorum"]["votes"]] == [
        ("alice", "approve"),
        ("bob", "approve"),
    ]


def test_a_responder_delegates_and_extends_from_the_page(local_stack: LocalProcess, page: WebDriver) -> None:
    # Given a parked refund only alice may answer, which may be extended by an hour
    thread_id, question_id = parked(local_stack)
    ledger(local_stack).update_item(
        TableName=ledger_table(local_stack),
        Key={"dedupe_key": {"S": f"wait.created:{question_id}"}},
        UpdateExpression="SET policy.responders = :r, policy.max_extension = :m, expires_at = :e",
        ExpressionAttributeValues={
            ":r": {"L": [{"S": "alice"}]},
            ":m": {"N": "3600"},
            ":e": {"S": "2099-01-01T00:00:00.000000Z"},
        },
    )
    open_question(page, local_stack, question_id, "?refresh=0")
    set_name(page, "alice")

    # When she hands it to bob and gives it ten more minutes
    page.find_element(By.ID, "delegate-to").send_keys("bob")
    page.find_element(By.ID, "delegate-reason").send_keys("on leave")
    page.find_element(By.ID, "delegate").click()
    until(page, lambda d: "bob may now answer" in text_of(d, "handover-message"), "the delegation sentence")
    page.find_element(By.ID, "extend-by").send_keys("600")
    page.find_element(By.ID, "extend-reason").send_keys("finance is late")
    page.find_element(By.ID, "extend").click()
    until(page, lambda d: "expiry was moved" in text_of(d, "handover-message"), "the extension sentence")
    # and past the policy's maximum the page says why
    page.find_element(By.ID, "extend-by").send_keys("3600")
    page.find_element(By.ID, "extend-reason").send_keys("more")
    page.find_element(By.ID, "extend").click()
    until(page, lambda d: "max_extension" in text_of(d, "handover-message"), "the refusal")

    # Then the question says so, and bob may answer it
    question = http("GET", f"{local_stack.api}/questions/{question_id}")[2]
    assert question["delegates"] == ["bob"]
    assert question["expires_at"].startswith("2099-01-01T00:10:00")
    assert [s["stage"] for s in question["lifecycle"]][-2:] == ["delegated", "extended"]
    set_name(page, "bob")
    open_question(page, local_stack, question_id, "?refresh=0")
    page.find_element(By.ID, "approve").click()
    until(page, lambda d: "recorded" in text_of(d, "outcome-message"), "the recorded sentence")
    assert finished(local_stack, thread_id)["status"] == "done"
