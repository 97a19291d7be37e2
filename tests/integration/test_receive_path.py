"""The receive path end to end on moto server, through real boto3 over HTTP.

The handlers are the deployed ones, loaded by file path and configured only through their
environment (``AWS_ENDPOINT_URL`` points boto3 at the moto server); the inbox is consumed the way
Lambda's event source mapping does it, with ``wait_service.runs.sqs_events``.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from wait_service.ledger import Ledger
from wait_service.runs.sqs_events import consume_batch

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

    from agent_wait_cli.local.moto_server import SerializedMotoServer
    from wait_service.resources import LocalResources

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "tests" / "events"
REFUND = {"customer": "c-17", "amount": 40}
REPLY_URL = "https://api.example/prod/questions/{question_id}/reply"


@dataclass
class Context:
    function_name: str = "agent-wait-it"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:agent-wait-it"
    aws_request_id: str = "it-request"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def load_handler(function: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"{function}_handler_it", ROOT / "functions" / function / "handler.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def event(
    template: str, path: str, resource: str, params: dict[str, str], body: Any = None
) -> dict[str, Any]:
    data = json.loads((EVENTS / template).read_text())
    data = copy.deepcopy(data)
    data.update(path=path, resource=resource, pathParameters=params)
    data["requestContext"].update(path="/prod" + path, resourcePath=resource)
    data["body"] = None if body is None else json.dumps(body)
    return data


def start_event(thread_id: str, input: Any) -> dict[str, Any]:
    return event(
        "start_run.json",
        f"/threads/{thread_id}/runs",
        "/threads/{thread_id}/runs",
        {"thread_id": thread_id},
        {"input": input},
    )


def reply_event(question_id: str, answer: Any, if_match: str) -> dict[str, Any]:
    data = event(
        "reply.json",
        f"/questions/{question_id}/reply",
        "/questions/{question_id}/reply",
        {"question_id": question_id},
        {"answer": answer},
    )
    data["headers"]["If-Match"] = if_match
    data["multiValueHeaders"]["If-Match"] = [if_match]
    return data


def thread_event(thread_id: str) -> dict[str, Any]:
    return event(
        "get_question.json", f"/threads/{thread_id}", "/threads/{thread_id}", {"thread_id": thread_id}
    )


def drain(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = []
    while got := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", []):
        for message in got:
            bodies.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    return bodies


@dataclass
class Stack:
    resources: LocalResources
    env: dict[str, str]
    api: ModuleType
    runner: ModuleType
    sqs: Any
    ledger: Ledger
    # Reads the ledger's stream through the dispatcher (the ``dispatch`` fixture).
    dispatch: Callable[..., int]

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        response: dict[str, Any] = self.api.handler(request, Context())
        return response

    def run_inbox(self) -> int:
        """Consume inbox batches until it is empty; returns how many messages ran.

        The dispatcher reads the ledger's stream first (and again after each batch): what the api
        and the runner recorded reaches the inbox that way.
        """
        ran = 0
        while (
            self.dispatch() >= 0
            and (
                batch := consume_batch(self.sqs, self.resources.inbox_url, self.runner.handler, Context())
            ).received
        ):
            assert batch.failed == [], batch.error
            ran += batch.received
        return ran


@pytest.fixture
def stack(
    resources: LocalResources,
    moto_server: SerializedMotoServer,
    aws_client: Any,
    monkeypatch: pytest.MonkeyPatch,
    dispatch: Callable[..., int],
) -> Stack:
    env = resources.env() | {"AWS_ENDPOINT_URL": moto_server.endpoint, "AGENT_WAIT_REPLY_URL": REPLY_URL}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Stack(
        resources=resources,
        env=env,
        api=load_handler("api"),
        runner=load_handler("runner"),
        sqs=aws_client("sqs"),
        ledger=Ledger(resources.ledger_table, aws_client("dynamodb")),
        dispatch=dispatch,
    )


def park(stack: Stack, thread_id: str) -> dict[str, Any]:
    """Start the refund agent on ``thread_id`` and run it until it asks; returns the envelope."""
    assert stack.call(start_event(thread_id, REFUND))["statusCode"] == 202
    assert stack.run_inbox() == 1
    [envelope] = drain(stack.sqs, stack.resources.outbox_url)
    return envelope


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"action": "approve"}, {"refund": {"refund_id": "rf-c-17-40", "customer": "c-17", "amount": 40}}),
        (
            {"action": "approve", "args": {"amount": 25}},
            {"refund": {"refund_id": "rf-c-17-25", "customer": "c-17", "amount": 25}},
        ),
        (
            {"action": "reject", "reason": "no receipt"},
            {"refund": None, "rejection": {"action": "reject", "reason": "no receipt"}},
        ),
    ],
    ids=["approve", "edit", "reject"],
)
def test_a_question_travels_the_whole_way(
    stack: Stack, answer: dict[str, Any], expected: dict[str, Any]
) -> None:
    # Given a run started over the api, consumed from the inbox, parked on its question
    envelope = park(stack, "t-flow")

    # Then the envelope reached the outbox, the topic's subscriber and the ledger
    [subscribed] = drain(stack.sqs, stack.resources.subscriber_url)
    assert subscribed == envelope
    assert (envelope["question"]["function"], envelope["question"]["args"]) == ("issue_refund", REFUND)
    assert envelope["question"]["args_schema"]["properties"]["amount"]["exclusiveMinimum"] == 0
    question_id = envelope["question_id"]
    assert envelope["reply_with"]["url"] == REPLY_URL.format(question_id=question_id)
    question = stack.ledger.get_question(question_id)
    assert (question.status, question.digest) == ("delivered", envelope["digest"])
    assert stack.ledger.get_thread("t-flow").pending == [question_id]

    # When the human answers with the envelope's reply_with.if_match and the runner consumes the resume
    reply = stack.call(reply_event(question_id, answer, envelope["reply_with"]["if_match"]))
    assert reply["statusCode"] == 202
    assert stack.run_inbox() == 1

    # Then the thread is done with the expected output, and the question resumed
    thread = json.loads(stack.call(thread_event("t-flow"))["body"])
    assert (thread["status"], thread["pending"]) == ("done", [])
    assert {key: thread["output"].get(key) for key in expected} == expected
    assert stack.ledger.get_question(question_id).status == "resumed"


def test_a_second_process_resumes_a_thread_parked_by_the_first(stack: Stack) -> None:
    """Seed 003: "restart safety of a real backend unresolved": park here, resume in a new process."""
    # Given a thread parked by this process and answered over the api
    envelope = park(stack, "t-restart")
    reply = stack.call(
        reply_event(
            envelope["question_id"],
            {"action": "approve", "args": {"amount": 25}},
            envelope["reply_with"]["if_match"],
        )
    )
    assert reply["statusCode"] == 202
    stack.dispatch()  # the ledger's stream enqueues the resume

    # When a fresh interpreter (a new Lambda instance) consumes the resume with the runner handler
    script = (
        "import importlib.util, json, sys\n"
        "import boto3\n"
        "from wait_service.runs.sqs_events import consume_batch\n"
        f"spec = importlib.util.spec_from_file_location('h', {str(ROOT / 'functions/runner/handler.py')!r})\n"
        "handler = importlib.util.module_from_spec(spec); spec.loader.exec_module(handler)\n"
        "class Context:\n"
        "    function_name = 'agent-wait-runner'; memory_limit_in_mb = 512; aws_request_id = 'second'\n"
        "    invoked_function_arn = 'arn:aws:lambda:us-east-1:123456789012:function:agent-wait-runner'\n"
        "    def get_remaining_time_in_millis(self): return 60000\n"
        f"inbox = {stack.resources.inbox_url!r}\n"
        "result = consume_batch(boto3.client('sqs'), inbox, handler.handler, Context())\n"
        "print('RESULT=' + json.dumps({'received': result.received, 'failed': result.failed}))\n"
    )
    env = os.environ | stack.env | {"PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'functions'}"}
    completed = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    [line] = [ln for ln in completed.stdout.splitlines() if ln.startswith("RESULT=")]

    # Then it resumed from the DynamoDB checkpoint and finished the refund
    assert json.loads(line.removeprefix("RESULT=")) == {"received": 1, "failed": []}
    thread = stack.ledger.get_thread("t-restart")
    assert thread.run_status == "done"
    assert isinstance(thread.output, dict)
    assert thread.output["refund"] == {"refund_id": "rf-c-17-25", "customer": "c-17", "amount": 25}
    assert stack.ledger.get_question(envelope["question_id"]).status == "resumed"

    # and the audit record, read over the api, is complete: proposed, authorized, diff, who, receipt
    question_id = envelope["question_id"]
    view = json.loads(
        stack.call(
            event(
                "get_question.json",
                f"/questions/{question_id}",
                "/questions/{question_id}",
                {"question_id": question_id},
            )
        )["body"]
    )
    audit = view["audit"]
    assert audit["proposed"] == {"function": "issue_refund", "args": REFUND}
    assert audit["authorized"] == {"function": "issue_refund", "args": REFUND | {"amount": 25}}
    assert audit["diff"] == [{"op": "replace", "path": "/amount", "value": 25}]
    assert audit["if_match"] == envelope["reply_with"]["if_match"]
    assert audit["answered_by"] and audit["answered_at"]
    receipt = audit["receipt"]
    assert (receipt["ran"], receipt["outcome"], receipt["args"]) == (
        True,
        "returned",
        REFUND | {"amount": 25},
    )


@pytest.mark.parametrize("kind", ["distinct", "identical"])
def test_twenty_concurrent_replies_make_one_answer_and_one_resume(stack: Stack, kind: str) -> None:
    # Given a parked question and twenty responders, each on its own api instance in its own
    # process, as on Lambda (instances never share a process, nor Powertools' request state)
    import multiprocessing

    from reply_worker import PRELOAD, reply_once

    envelope = park(stack, "t-race")
    question_id, if_match = envelope["question_id"], envelope["reply_with"]["if_match"]
    answers = [
        {"action": "approve", "args": {"amount": n + 1}} if kind == "distinct" else {"action": "approve"}
        for n in range(20)
    ]
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    barrier, queue = context.Barrier(len(answers)), context.Queue()
    handler = str(ROOT / "functions" / "api" / "handler.py")
    events = [json.dumps(reply_event(question_id, answer, if_match)) for answer in answers]

    # When all twenty reply at once
    workers = [
        context.Process(target=reply_once, args=(index, handler, stack.env, event, barrier, queue))
        for index, event in enumerate(events)
    ]
    for worker in workers:
        worker.start()
    try:
        by_index = {}
        for _ in workers:
            result = queue.get(timeout=240)
            by_index[result["index"]] = result
    finally:
        for worker in workers:
            worker.join(timeout=30)
            if worker.is_alive():
                worker.kill()
    results = [by_index[index] for index in range(len(events))]

    # Then exactly one reply recorded the answer, and exactly one resume was ever sent
    statuses = [result["status"] for result in results]
    assert statuses.count(202) == 1
    assert sorted(set(statuses) - {202}) == ([409] if kind == "distinct" else [200])
    winner = answers[statuses.index(202)]
    standing = stack.ledger.get_question(question_id)
    assert standing.answer == winner
    # No api instance sent anything: the one recorded decision's resume comes from the ledger's stream
    assert sum(result["sends"] for result in results) == 0
    stack.dispatch()
    resumes = drain(stack.sqs, stack.resources.inbox_url)
    # The message names the question; the runner reads the winner's answer from the ledger
    assert resumes == [{"thread_id": "t-race", "question_id": question_id}]
