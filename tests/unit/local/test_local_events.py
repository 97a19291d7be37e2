"""Event lines from what the poller and the gateway see (fake ledger readers, no network)."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from typing import Any

from agent_wait_cli.local.events import EventLog, compact, describe_question
from agent_wait_cli.local.gateway import Exchange, HttpRequest, HttpResponse
from wait_service.runs.sqs_events import BatchResult


def _message(body: dict[str, Any], receive_count: str = "1") -> Any:
    return {
        "MessageId": "m",
        "Body": json.dumps(body),
        "Attributes": {"ApproximateReceiveCount": receive_count},
    }


class Ledger:
    def __init__(self) -> None:
        self.threads: dict[str, dict[str, Any]] = {}
        self.questions: dict[str, dict[str, Any]] = {}


def _log(ledger: Ledger) -> tuple[EventLog, list[str]]:
    lines: list[str] = []
    log = EventLog(
        lines.append,
        ledger.threads.get,
        ledger.questions.get,
        now=lambda: datetime(2026, 11, 30, 10, 0, 5, tzinfo=UTC),
    )
    return log, lines


def test_start_then_question_raised_once() -> None:
    ledger = Ledger()
    ledger.threads["t-1"] = {"run_status": "interrupted", "pending": ["q-1"]}
    ledger.questions["q-1"] = {
        "thread_id": "t-1",
        "question": {"function": "issue_refund", "args": {"amount": 40}},
    }
    log, lines = _log(ledger)
    start = _message({"thread_id": "t-1", "input": {"amount": 40}})

    log.received([start])
    log.batch_done(BatchResult([start], succeeded=[start["MessageId"]]))
    # The same pending question after a second batch: no second line.
    log.batch_done(BatchResult([start], succeeded=[start["MessageId"]]))

    assert lines == [
        '10:00:05  run started      thread=t-1 input={"amount": 40}',
        "10:00:05  question raised  thread=t-1 question=q-1 asks=issue_refund(amount=40)",
    ]


def test_resume_then_done() -> None:
    ledger = Ledger()
    ledger.threads["t-1"] = {"run_status": "done", "output": {"refund": 40}}
    log, lines = _log(ledger)
    resume = _message({"thread_id": "t-1", "question_id": "q-1", "answer": {"action": "approve"}})

    log.received([resume])
    log.batch_done(BatchResult([resume], succeeded=[resume["MessageId"]]))

    assert [line.split()[1:3] for line in lines] == [
        ["resuming", "thread=t-1"],
        ["resumed", "thread=t-1"],
        ["run", "done"],
    ]
    assert lines[-1].endswith('output={"refund": 40}')


def test_failed_message_is_a_retrying_line_with_its_receive_count() -> None:
    log, lines = _log(Ledger())
    message = _message({"thread_id": "t-9", "input": {}}, receive_count="3")

    log.batch_done(BatchResult([message], failed=[message["MessageId"]], error=RuntimeError("boom")))

    assert lines == ['10:00:05  retrying         thread=t-9 receive=3 error="RuntimeError: boom"']


def test_failed_run_is_reported() -> None:
    ledger = Ledger()
    ledger.threads["t-1"] = {"run_status": "failed", "error": "ValueError: bad input"}
    log, lines = _log(ledger)
    message = _message({"thread_id": "t-1", "input": {}})

    log.batch_done(BatchResult([message], succeeded=[message["MessageId"]]))

    assert lines == ['10:00:05  run failed       thread=t-1 error="ValueError: bad input"']


def test_only_a_recorded_reply_is_an_answered_line() -> None:
    ledger = Ledger()
    ledger.questions["q-1"] = {"thread_id": "t-1"}
    log, lines = _log(ledger)
    body = json.dumps({"answer": {"action": "approve"}}).encode()

    def exchange(status: int, method: str = "POST", target: str = "/questions/q-1/reply") -> Exchange:
        return Exchange(HttpRequest(method, target, [], body=body), HttpResponse(status), "alice")

    log.exchange(exchange(202))
    log.exchange(exchange(200))  # the same answer again: nothing new happened
    log.exchange(exchange(409))
    log.exchange(exchange(202, method="GET"))
    log.exchange(exchange(202, target="/threads/t-1/runs"))

    assert lines == [
        '10:00:05  answered         thread=t-1 question=q-1 by=alice answer={"action": "approve"}'
    ]


def test_a_resume_received_while_its_reply_is_answered_prints_after_the_answer() -> None:
    # The api sends the resume before it answers the reply: the poller can receive it first.
    ledger = Ledger()
    ledger.questions["q-1"] = {"thread_id": "t-1"}
    log, lines = _log(ledger)
    body = json.dumps({"answer": {"action": "approve"}}).encode()
    reply = Exchange(HttpRequest("POST", "/questions/q-1/reply", [], body=body), HttpResponse(202), "alice")

    log.reply_started("POST", "/questions/q-1/reply")
    log.reply_started("GET", "/questions/q-2")  # not a reply: nothing waits on it
    poller = threading.Thread(
        target=log.received, args=([_message({"thread_id": "t-1", "question_id": "q-1"})],)
    )
    poller.start()
    deadline = time.monotonic() + 10
    while not log._replied._waiters and poller.is_alive() and time.monotonic() < deadline:  # type: ignore[attr-defined]
        time.sleep(0.001)
    assert poller.is_alive() and lines == []  # the resume waits for its reply's line
    log.exchange(reply)
    poller.join(10)

    assert [line.split()[1] for line in lines] == ["answered", "resuming"]
    # A resume whose reply is over (or was never seen here) prints at once; the same resume again
    # (a replay the runner refuses) prints nothing.
    log.received([_message({"thread_id": "t-1", "question_id": "q-3"})])
    log.received([_message({"thread_id": "t-2", "question_id": "q-2"})])
    log.received([_message({"thread_id": "t-1", "question_id": "q-1"})])
    assert len(lines) == 4


def test_a_failed_reply_releases_its_resume_too() -> None:
    log, lines = _log(Ledger())
    log.reply_started("POST", "/questions/q-1/reply")
    crashed = Exchange(HttpRequest("POST", "/questions/q-1/reply", [], body=b"{}"), HttpResponse(502), None)
    log.exchange(crashed)
    log.received([_message({"thread_id": "t-1", "question_id": "q-1"})])
    assert [line.split()[1] for line in lines] == ["resuming"]


def test_describe_and_compact() -> None:
    assert describe_question({"function": "f", "args": {"a": "x"}}) == "f(a='x')"
    assert describe_question({"free": "form"}) == '{"free": "form"}'
    assert len(compact("y" * 500)) == 160


def test_ledger_numbers_print_as_json_numbers() -> None:
    from decimal import Decimal

    from agent_wait_cli.local.events import plain

    item = plain({"question": {"function": "f", "args": {"amount": Decimal("40"), "rate": Decimal("0.5")}}})

    assert describe_question(item["question"]) == "f(amount=40, rate=0.5)"


def test_runner_lines_name_the_runner_function_and_the_last_failure_is_dead_lettered() -> None:
    # Given an event log of a stack whose inbox dead-letters after 3 receives
    ledger = Ledger()
    lines: list[str] = []
    log = EventLog(
        lines.append,
        ledger.threads.get,
        ledger.questions.get,
        now=lambda: datetime(2026, 11, 30, 10, 0, 5, tzinfo=UTC),
        runner="agent-wait-runner",
        max_receive_count=3,
    )
    start = _message({"thread_id": "t-1", "input": {}}, receive_count="1")
    last = _message({"thread_id": "t-1", "input": {}}, receive_count="3")
    ledger.threads["t-1"] = {"run_status": "failed", "error": "TimeoutError: the ledger did not answer"}

    # When a run is received, fails once, then fails its last receive with a multi-line error
    log.received([start])
    log.batch_done(BatchResult([start], failed=[start["MessageId"]]))
    log.batch_done(BatchResult([last], failed=[last["MessageId"]], error=RuntimeError("line one\nline two")))

    # Then one line each: the retry, the DLQ move and the failed run, all naming the runner
    assert lines == [
        "10:00:05  run started      thread=t-1 input={} function=agent-wait-runner",
        '10:00:05  retrying         thread=t-1 receive=1 error="reported failed" function=agent-wait-runner',
        '10:00:05  dead-lettered    thread=t-1 receive=3 error="RuntimeError: line one\\nline two" '
        "function=agent-wait-runner",
        '10:00:05  run failed       thread=t-1 error="TimeoutError: the ledger did not answer" '
        "function=agent-wait-runner",
    ]


def test_a_field_with_line_breaks_stays_on_one_line() -> None:
    lines: list[str] = []
    log = EventLog(lines.append, lambda _: None, lambda _: None, now=lambda: datetime(2026, 1, 1, tzinfo=UTC))

    log.emit("run failed", thread="t\n1", error="a\r\nb")

    assert lines == ["00:00:00  run failed       thread=t\\n1 error=a\\r\\nb"]


def test_a_batch_whose_every_record_failed_shows_the_record_error() -> None:
    from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

    lines: list[str] = []
    log = EventLog(lines.append, lambda _: None, lambda _: None, now=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    cause = TimeoutError("checkpoint write timed out")
    error = BatchProcessingError("All records failed processing.", [(TimeoutError, cause, None)])
    message = _message({"thread_id": "t-1", "input": {}})

    log.batch_done(BatchResult([message], failed=[message["MessageId"]], error=error))

    assert lines == [
        '00:00:00  retrying         thread=t-1 receive=1 error="TimeoutError: checkpoint write timed out"'
    ]


def test_a_replayed_resume_the_runner_refuses_prints_nothing_again() -> None:
    # Given a resume that ran, and its thread done
    ledger = Ledger()
    ledger.threads["t-1"] = {
        "run_status": "done",
        "output": {"refund": 40},
        "updated_at": "2026-11-30T10:00:05Z",
    }
    log, lines = _log(ledger)
    resume = _message({"thread_id": "t-1", "question_id": "q-1"})
    log.received([resume])
    log.batch_done(BatchResult([resume], succeeded=[resume["MessageId"]]))
    printed = list(lines)

    # When the same resume is replayed, twice, and the runner refuses it (the thread item is unchanged)
    for _ in range(2):
        log.received([resume])
        log.batch_done(BatchResult([resume], succeeded=[resume["MessageId"]]))

    # Then each event was printed once
    assert [line.split()[1] for line in printed] == ["resuming", "resumed", "run"]
    assert lines == printed


def test_a_new_run_done_on_the_same_thread_prints_again() -> None:
    ledger = Ledger()
    ledger.threads["t-1"] = {"run_status": "done", "output": {"n": 1}, "updated_at": "2026-11-30T10:00:05Z"}
    log, lines = _log(ledger)
    start = _message({"thread_id": "t-1", "input": {}})
    log.batch_done(BatchResult([start], succeeded=[start["MessageId"]]))
    ledger.threads["t-1"] = {"run_status": "done", "output": {"n": 2}, "updated_at": "2026-11-30T10:00:09Z"}
    log.batch_done(BatchResult([start], succeeded=[start["MessageId"]]))

    assert [line.split("output=")[1] for line in lines] == ['{"n": 1}', '{"n": 2}']


def test_a_poison_message_nested_200000_deep_does_not_stop_the_event_lines() -> None:
    log, lines = _log(Ledger())
    deep = {"MessageId": "p", "Body": "[" * 200_000 + "]" * 200_000, "Attributes": {}}

    log.received([deep])
    log.batch_done(BatchResult([deep], succeeded=["p"]))

    assert lines == ["10:00:05  poison           bytes=400000"]


def test_the_dispatchers_published_events_are_one_line_each() -> None:
    lines: list[str] = []
    log = EventLog(lines.append, lambda _: None, lambda _: None, now=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    question = {
        "dedupe_key": {"S": "wait.created:q-1"},
        "question_id": {"S": "q-1"},
        "thread_id": {"S": "t-1"},
    }
    answered = {
        "eventName": "MODIFY",
        "dynamodb": {
            "SequenceNumber": "7",
            "Keys": {"dedupe_key": {"S": "wait.created:q-1"}},
            "OldImage": question | {"status": {"S": "delivered"}},
            "NewImage": question | {"status": {"S": "answered"}, "answered_by": {"S": "ann"}},
        },
    }
    delivered = answered | {
        "dynamodb": answered["dynamodb"] | {"NewImage": question | {"status": {"S": "delivered"}}}
    }

    log.published([answered, delivered, {"eventName": "bogus"}], function="agent-wait-dispatcher")

    assert lines == [
        "00:00:00  event            type=wait.answered thread=t-1 question=q-1 dedupe_key=wait.answered:q-1"
        " function=agent-wait-dispatcher"
    ]
