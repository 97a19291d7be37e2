"""``agent-wait local`` driven over HTTP and through the CLI, as a person would."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
from e2e_support import ROOT, LocalProcess, eventually, http, run_cli, start_local

pytestmark = pytest.mark.e2e


def _thread_status(api: str, thread_id: str, *statuses: str) -> dict[str, Any] | None:
    status, _, body = http("GET", f"{api}/threads/{thread_id}")
    return body if status == 200 and body.get("status") in statuses else None


def test_http_start_question_answer_result(local_stack: LocalProcess) -> None:
    api = local_stack.api
    thread_id = f"e2e-http-{uuid.uuid4().hex[:6]}"

    status, _, body = http(
        "POST", f"{api}/threads/{thread_id}/runs", {"input": {"customer": "c-17", "amount": 40}}
    )
    assert (status, body["status"]) == (202, "queued")

    thread = eventually(lambda: _thread_status(api, thread_id, "interrupted", "failed"), what="the question")
    assert thread["status"] == "interrupted" and len(thread["pending"]) == 1
    question_id = thread["pending"][0]

    status, _, listed = http("GET", f"{api}/questions?thread_id={thread_id}")
    assert status == 200 and [item["question_id"] for item in listed["items"]] == [question_id]
    status, headers, question = http("GET", f"{api}/questions/{question_id}")
    assert question["question"]["function"] == "issue_refund"
    assert question["question"]["args"] == {"customer": "c-17", "amount": 40}
    assert "args_schema" in question["question"]
    assert headers["ETag"] == f'"{question["digest"]}"'

    status, _, reply = http(
        "POST",
        f"{api}/questions/{question_id}/reply",
        {"answer": {"action": "approve"}},
        {"If-Match": headers["ETag"], "X-Wait-Principal": "e2e:carol"},
    )
    assert (status, reply["status"]) == (202, "answered")

    done = eventually(lambda: _thread_status(api, thread_id, "done", "failed"), what="the result")
    assert done["status"] == "done"
    assert done["output"]["refund"]["amount"] == 40
    status, _, answered = http("GET", f"{api}/questions/{question_id}")
    assert answered["answered_by"] == "e2e:carol"

    # One printed line per event, in order, for this thread.
    names = eventually(lambda: _event_names(local_stack, thread_id, until="run done"), what="the event lines")
    assert [name for name in names if name != "event"] == [
        "run started",
        "question raised",
        "answered",
        "resuming",
        "resumed",
        "run done",
    ]
    # The dispatcher's line per resolution event it published: each once
    published = eventually(lambda: _published(local_stack, thread_id, "thread.done"), what="the event lines")
    assert sorted(published) == ["thread.done", "wait.answered", "wait.resumed"]
    # The runner's lines name its function, the dispatcher's its own; the api's ("answered") none.
    for line in local_stack.lines:
        if f" thread={thread_id} " in line:
            if line[10:25].strip() == "event":
                assert line.endswith(" function=agent-wait-dispatcher"), line
                continue
            assert line.endswith(" function=agent-wait-runner") == (" answered " not in line), line


def test_start_lines_say_state_is_in_memory_and_name_the_log_file(local_stack: LocalProcess) -> None:
    [log_line] = [line for line in local_stack.lines if line.startswith("log: ")]
    path = Path(log_line.removeprefix("log: ").split(" (", 1)[0])
    assert path.is_file()
    assert any(line.startswith("state: in memory") for line in local_stack.lines)


def test_poison_messages_never_block_their_group_and_no_event_prints_twice(local_stack: LocalProcess) -> None:
    api = local_stack.api
    thread_id = f"e2e-poison-{uuid.uuid4().hex[:6]}"
    moto = next(line.split(": ", 1)[1] for line in local_stack.lines if line.startswith("moto"))
    outbox = next(line.split(": ", 1)[1] for line in local_stack.lines if line.startswith("outbox queue"))
    inbox_url = outbox.replace("outbox.fifo", "inbox.fifo")
    sqs = boto3.client(
        "sqs", endpoint_url=moto, region_name="us-east-1", aws_access_key_id="l", aws_secret_access_key="l"
    )

    def send(body: str) -> None:
        sqs.send_message(
            QueueUrl=inbox_url,
            MessageBody=body,
            MessageGroupId=thread_id,
            MessageDeduplicationId=uuid.uuid4().hex,
        )

    # Given, ahead of a real start in the thread's FIFO group, a body nested 100,000 deep and a
    # forged start whose input the api refuses
    send("[" * 100_000 + "]" * 100_000)
    send(
        json.dumps({"thread_id": thread_id, "input": {"customer": "c-17", "amount": -5}, "run_id": "forged"})
    )
    status, _, _ = http(
        "POST", f"{api}/threads/{thread_id}/runs", {"input": {"customer": "c-17", "amount": 40}}
    )
    assert status == 202

    # Then the real start runs behind them, and the forged one never ran (one question, for 40)
    thread = eventually(
        lambda: _thread_status(api, thread_id, "interrupted", "failed"), what="the real start"
    )
    assert thread["status"] == "interrupted"
    _, _, listed = http("GET", f"{api}/questions?thread_id={thread_id}")
    assert [item["question"]["args"]["amount"] for item in listed["items"]] == [40]
    assert any("  poison  " in line for line in local_stack.lines)

    # When the answer's resume is replayed after the run is done, then a new run follows it
    [question_id] = thread["pending"]
    _, headers, _ = http("GET", f"{api}/questions/{question_id}")
    http(
        "POST",
        f"{api}/questions/{question_id}/reply",
        {"answer": {"action": "approve"}},
        {"If-Match": headers["ETag"], "X-Wait-Principal": "e2e:carol"},
    )
    result = eventually(lambda: _thread_status(api, thread_id, "done", "failed"), what="the result")
    assert result["status"] == "done", result
    # The stack prints `run done` once the runner's batch is over, from the thread's state then: a
    # new run queued before that would leave nothing to print. A person reads the line first.
    eventually(lambda: _event_names(local_stack, thread_id, until="run done"), what="the run done line")
    send(json.dumps({"thread_id": thread_id, "question_id": question_id}))
    status, _, body = http(
        "POST", f"{api}/threads/{thread_id}/runs", {"input": {"customer": "c-17", "amount": 41}}
    )
    assert status == 202, body

    # Then the replay printed nothing again: each event once, in order
    def names() -> list[str] | None:
        seen = _event_names(local_stack, thread_id, until="run done") or []
        return seen if seen.count("question raised") == 2 else None

    assert [name for name in eventually(names, what="the second question") if name != "event"] == [
        "run started",
        "run started",
        "question raised",
        "answered",
        "resuming",
        "resumed",
        "run done",
        "run started",
        "question raised",
    ]
    # and the dispatcher published each resolution event of the first run once
    published = eventually(lambda: _published(local_stack, thread_id, "thread.done"), what="the event lines")
    assert sorted(published) == ["thread.done", "wait.answered", "wait.resumed"]


def _event_names(local: LocalProcess, thread_id: str, until: str) -> list[str] | None:
    """Event names printed for ``thread_id`` (``HH:MM:SS  name  fields``) once ``until`` is among them."""
    names = [line[10:25].strip() for line in list(local.lines) if f" thread={thread_id} " in line + " "]
    return names if until in names else None


def _published(local: LocalProcess, thread_id: str, until: str) -> list[str] | None:
    """The types of the ``event`` lines printed for ``thread_id``, once ``until`` is among them."""
    types = [
        line.split(" type=", 1)[1].split(" ", 1)[0]
        for line in list(local.lines)
        if f" thread={thread_id} " in line and line[10:25].strip() == "event"
    ]
    return types if until in types else None


def test_cli_start_see_answer_result(local_stack: LocalProcess) -> None:
    api = ["--api", local_stack.api]
    thread_id = f"e2e-cli-{uuid.uuid4().hex[:6]}"

    started = run_cli(
        "threads", "start", thread_id, "--input", '{"customer": "c-17", "amount": 40}', *api, check=True
    )
    assert "202" in started.stdout and "queued" in started.stdout

    def listed() -> list[dict[str, Any]]:
        result = run_cli("questions", "list", "--thread", thread_id, "--json", *api, check=True)
        return json.loads(result.stdout)["items"]

    items = eventually(listed, what="the question in the list")
    question_id = items[0]["question_id"]

    table = run_cli("questions", "list", "--thread", thread_id, *api, check=True)
    assert question_id in table.stdout and "issue_refund" in table.stdout
    shown = run_cli("questions", "show", question_id, *api, check=True)
    assert "issue_refund(customer='c-17', amount=40)" in shown.stdout

    replied = run_cli(
        "reply", question_id, "--edit", '{"amount": 25}', "--principal", "e2e:dave", *api, check=True
    )
    assert "issue_refund(customer='c-17', amount=40)" in replied.stdout
    assert '"args": {"amount": 25}' in replied.stdout
    assert "202 answered" in replied.stdout

    def done() -> dict[str, Any] | None:
        thread = json.loads(run_cli("threads", "show", thread_id, "--json", *api, check=True).stdout)
        return thread if thread["status"] in {"done", "failed"} else None

    thread = eventually(done, what="the thread to finish")
    assert thread["status"] == "done" and thread["output"]["refund"]["amount"] == 25
    assert "done" in run_cli("threads", "show", thread_id, *api, check=True).stdout

    conflict = run_cli("reply", question_id, "--reject", *api)
    assert conflict.returncode == 1
    assert "409" in conflict.stderr

    tail = run_cli("tail", "--queue-url", local_stack.info["outbox queue"], "--once", "--json")
    assert tail.returncode == 0
    envelopes = [json.loads(line) for line in tail.stdout.splitlines()]
    assert question_id in {envelope.get("question_id") for envelope in envelopes}
    # The outbox carries how the question and the run ended too, each once
    ended = [e["type"] for e in envelopes if e["thread_id"] == thread_id and e["type"] != "wait.created"]
    assert sorted(ended) == ["thread.done", "wait.answered", "wait.resumed"]


def test_a_policy_set_with_the_cli_reaches_the_next_question(
    local_stack: LocalProcess, tmp_path: Path
) -> None:
    # The last test on this module's stack: the override stays for the stack's life.
    override = tmp_path / "refund.json"
    override.write_text('{"prompt": "Check the customer\'s refund history first"}', encoding="utf-8")
    moto = ["--endpoint-url", local_stack.info["moto"]]
    assert (
        "set issue_refund version 1"
        in run_cli("policies", "set", "issue_refund", "--file", str(override), *moto, check=True).stdout
    )

    thread_id = f"e2e-policy-{uuid.uuid4().hex[:6]}"
    http("POST", f"{local_stack.api}/threads/{thread_id}/runs", {"input": {"customer": "c-17", "amount": 40}})
    thread = eventually(
        lambda: _thread_status(local_stack.api, thread_id, "interrupted", "failed"), what="the question"
    )
    _, _, question = http("GET", f"{local_stack.api}/questions/{thread['pending'][0]}")
    assert question["policy_version"] == 1
    assert question["policy"]["prompt"] == "Check the customer's refund history first"


def test_cli_usage_and_connection_errors() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    unreachable = run_cli("threads", "show", "t", "--api", f"http://127.0.0.1:{closed_port}")
    usage = run_cli("reply", "q-1")

    assert unreachable.returncode == 3 and "cannot reach" in unreachable.stderr
    assert usage.returncode == 2


def test_sigterm_stops_the_stack_and_frees_the_port() -> None:
    local = start_local()
    port = int(local.api.rsplit(":", 1)[1])

    local.process.send_signal(signal.SIGTERM)
    code = local.process.wait(timeout=30)

    assert code == 0
    assert local.lines[-1] == "stopping"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))  # raises if anything still holds the port


def test_ctrl_c_stops_the_stack_too() -> None:
    local = start_local()

    local.process.send_signal(signal.SIGINT)

    assert local.process.wait(timeout=30) == 0


def test_demo_runs_end_to_end() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "examples.demo"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )

    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    out = result.stdout
    for line in (
        "approve: the refund runs as proposed",
        "edit: approve with amount 25 instead of 40",
        "reject: the refund never runs",
        "envelope, as a subscriber of the wait-created topic sees it",
        "outbox.fifo message",
        "ledger item",
        "thread's final output",
        "-> 202",
        "-> 409",
        "-> 412",
        "demo passed",
    ):
        assert line in out, f"{line!r} missing from the demo's output:\n{out[-4000:]}"
    assert "[FAIL]" not in out
    # Each envelope and ledger item is shown in full once; the later threads show what changed.
    assert out.count("-- ledger item:\n") == 1
    assert out.count("-- ledger item: only what differs from the one shown above") == 2


def test_with_hmac_keys_only_signed_requests_pass_and_the_key_id_answers() -> None:
    local = start_local("--hmac-key", "ops-key=s3cret")
    try:
        api = ["--api", local.api]
        signed = [*api, "--hmac-key", "ops-key=s3cret"]
        thread_id = f"e2e-hmac-{uuid.uuid4().hex[:6]}"

        status, _, body = http("GET", f"{local.api}/questions", headers={"X-Wait-Principal": "mallory"})
        assert (status, body["error"]) == (401, "unauthorized")
        wrong = run_cli("threads", "start", thread_id, *api, "--hmac-key", "ops-key=guess")
        assert wrong.returncode == 1 and "401" in wrong.stderr

        run_cli(
            "threads", "start", thread_id, "--input", '{"customer": "c-1", "amount": 5}', *signed, check=True
        )

        def pending() -> str | None:
            thread = json.loads(run_cli("threads", "show", thread_id, "--json", *signed).stdout or "{}")
            return (thread.get("pending") or [None])[0]

        question_id = eventually(pending, what="the question")
        run_cli("reply", question_id, "--approve", *signed, check=True)
        question = json.loads(run_cli("questions", "show", question_id, "--json", *signed, check=True).stdout)
        assert question["answered_by"] == "hmac:ops-key"

        # The same signed request twice: the second is refused as on the deployed /signed routes.
        import time

        from agent_wait.signing import signed_headers

        body = json.dumps({"input": {"customer": "c-1", "amount": 5}}).encode()
        target = f"/threads/{thread_id}-again/runs"
        headers = signed_headers("ops-key", "s3cret", "POST", target, body, now=time.time())
        first, again = (
            http("POST", local.api + target, json.loads(body), headers=dict(headers)) for _ in range(2)
        )
        assert first[0] == 202
        assert (again[0], again[2]["error"]) == (401, "replayed")
    finally:
        assert local.stop() == 0
