"""``make demo``: the sample refund agent on the local stack, end to end, in one process.

Starts the local stack (moto on 127.0.0.1, the real api and runner handlers) on free ports and
runs the refund agent three times: approve, approve with edited arguments, reject. For each it
shows the envelope as a topic subscriber sees it, the outbox message, the ledger item, the HTTP
reply with its status code and the thread's final output. Then it answers an answered question
differently (409) and replies with a wrong ``If-Match`` (412).

Every step is checked: the demo exits 1 if any step does not produce what it should, so it is
also a smoke test of the whole system.

Examples
--------
$ python -m examples.demo
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from agent_wait_cli.client import ApiClient, ApiError, Response
from agent_wait_cli.local.events import ledger_readers
from agent_wait_cli.local.stack import LocalStack, StackConfig

if TYPE_CHECKING:
    from collections.abc import Callable

PROJECT = Path(__file__).resolve().parents[1]
INPUT = {"customer": "c-17", "amount": 40}
PRINCIPAL = "demo:alice"
# The first run imports LangGraph in the runner (seconds on a cold machine); later steps are fast.
DEADLINE_SECONDS = 90.0


@dataclass
class Demo:
    """Drives the stack and keeps score of the checks."""

    stack: LocalStack
    out: TextIO = sys.stdout
    failures: list[str] = field(default_factory=list)
    shown: dict[str, Any] = field(default_factory=dict)
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self.api = ApiClient(self.stack.api_url, principal=PRINCIPAL)
        self.sqs = self.stack.client("sqs")
        _, self._question_item = ledger_readers(
            self.stack.client("dynamodb"), self.stack.resources.ledger_table
        )
        self._step = 0

    # -- output ---------------------------------------------------------------------------------

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def header(self, title: str) -> None:
        self._step += 1
        line = f"== {self._step}. {title} "
        self.say()
        self.say(line + "=" * max(4, 78 - len(line)))

    def show(self, label: str, value: Any) -> None:
        text = (
            value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)
        )
        self.say(f"-- {label}:")
        for line in text.splitlines():
            self.say(f"   {line}")

    def show_changes(self, label: str, value: Any) -> None:
        """Show ``value`` in full the first time ``label`` is shown; afterwards only what changed.

        Each thread's envelope and ledger item look alike but for ids, digests and times: printing
        them again in full would bury the few lines that differ.
        """
        previous = self.shown.get(label)
        self.shown[label] = value
        if not isinstance(previous, dict) or not isinstance(value, dict):
            self.show(label, value)
            return
        changed = {key: item for key, item in value.items() if previous.get(key) != item}
        removed = sorted(key for key in previous if key not in value)
        if removed:
            changed["(no longer present)"] = removed
        self.show(f"{label}: only what differs from the one shown above", changed or "(nothing)")

    def check(self, ok: bool, what: str) -> bool:
        self.say(f"   [{'ok' if ok else 'FAIL'}] {what}")
        if not ok:
            self.failures.append(f"step {self._step}: {what}")
        return ok

    # -- api ------------------------------------------------------------------------------------

    def call(
        self, method: str, path: str, *, body: Any = None, headers: dict[str, str] | None = None
    ) -> Response:
        """One HTTP call; an error status is a response here, not an exception."""
        try:
            return self.api.request(method, path, body=body, headers=headers)
        except ApiError as exc:
            return Response(exc.status, exc.headers, exc.body)

    def http(
        self, method: str, path: str, *, body: Any = None, headers: dict[str, str] | None = None
    ) -> Response:
        response = self.call(method, path, body=body, headers=headers)
        shown_headers = f"  If-Match: {headers['If-Match']}" if headers and "If-Match" in headers else ""
        self.say(f"-- {method} {path}{shown_headers}" + (f"  {json.dumps(body)}" if body is not None else ""))
        self.say(f"   -> {response.status} {json.dumps(response.body, ensure_ascii=False)}")
        return response

    def wait_thread(self, thread_id: str, statuses: set[str]) -> dict[str, Any]:
        deadline = self.clock() + DEADLINE_SECONDS
        thread: dict[str, Any] = {}
        while self.clock() < deadline:
            response = self.call("GET", f"/threads/{thread_id}")
            if response.status == 200 and isinstance(response.body, dict):
                thread = response.body
                if thread.get("status") in statuses | {"failed"}:
                    return thread
            self.sleep(0.1)
        return thread

    def receive_for(self, queue_url: str, thread_id: str) -> dict[str, Any] | None:
        """The next message on ``queue_url`` for ``thread_id`` (deleted once read)."""
        deadline = self.clock() + DEADLINE_SECONDS
        while self.clock() < deadline:
            messages = self.sqs.receive_message(
                QueueUrl=queue_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=0,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            found = None
            for message in messages:
                self.sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
                if json.loads(message["Body"]).get("thread_id") == thread_id and found is None:
                    found = message
            if found is not None:
                return dict(found)
            self.sleep(0.1)
        return None

    def ledger_item(self, question_id: str) -> dict[str, Any]:
        shown = dict(sorted((self._question_item(question_id) or {}).items()))
        if isinstance(shown.get("envelope"), str):
            # The envelope as first published; shown in full above, so only its size here.
            shown["envelope"] = f"<the envelope JSON, {len(shown['envelope'])} characters>"
        return shown

    # -- scenarios ------------------------------------------------------------------------------

    def park(self, thread_id: str, *, verbose: bool = True) -> dict[str, Any] | None:
        """Start a run on ``thread_id`` and show the question it raises, wherever it travels."""
        started = self.http("POST", f"/threads/{thread_id}/runs", body={"input": INPUT})
        if not self.check(started.status == 202, "the run is accepted (202 queued)"):
            return None
        thread = self.wait_thread(thread_id, {"interrupted"})
        if not self.check(thread.get("status") == "interrupted", "the thread parks on a question"):
            self.show("thread", thread)
            return None
        pending = thread.get("pending") or []
        if not self.check(len(pending) == 1, "exactly one question is pending"):
            return None

        message = self.receive_for(self.stack.resources.subscriber_url, thread_id)
        envelope = json.loads(message["Body"]) if message else {}
        if verbose:
            self.show_changes("envelope, as a subscriber of the wait-created topic sees it", envelope)
        self.check(
            envelope.get("question_id") == pending[0] and envelope.get("type") == "wait.created",
            "the topic delivered the envelope of the pending question",
        )
        outbox = self.receive_for(self.stack.resources.outbox_url, thread_id)
        attributes = (outbox or {}).get("Attributes", {})
        outbox_body = json.loads(outbox["Body"]) if outbox else None
        same = outbox_body == envelope
        if verbose:
            self.show_changes(
                "outbox.fifo message",
                {
                    "MessageGroupId": attributes.get("MessageGroupId"),
                    "MessageDeduplicationId": attributes.get("MessageDeduplicationId"),
                    "Body": "<the same envelope as above>" if same else outbox_body,
                },
            )
        self.check(same, "the outbox carries the same envelope")
        self.check(
            attributes.get("MessageDeduplicationId") == envelope.get("dedupe_key")
            and attributes.get("MessageGroupId") == thread_id,
            "the outbox message is deduplicated by dedupe_key and grouped by thread",
        )
        item = self.ledger_item(pending[0])
        if verbose:
            self.show_changes("ledger item", item)
        self.check(
            item.get("status") in {"raised", "delivered"}, "the ledger holds the question, not yet answered"
        )
        question = self.call("GET", f"/questions/{pending[0]}")
        self.check(
            question.header("ETag") == f'"{envelope.get("digest")}"',
            "GET /questions/{id} sends the digest as ETag",
        )
        return {"question_id": pending[0], "etag": question.header("ETag"), "envelope": envelope}

    def answer(
        self, thread_id: str, answer: Any, expect: Callable[[dict[str, Any]], bool], what: str
    ) -> str | None:
        """Run a thread to its question, answer it, and check the final output."""
        parked = self.park(thread_id)
        if parked is None:
            return None
        qid = parked["question_id"]
        reply = self.http(
            "POST", f"/questions/{qid}/reply", body={"answer": answer}, headers={"If-Match": parked["etag"]}
        )
        self.check(reply.status == 202, "the reply is recorded (202)")
        thread = self.wait_thread(thread_id, {"done"})
        self.show("thread's final output", thread.get("output"))
        self.check(thread.get("status") == "done", "the thread resumes and finishes")
        self.check(expect(thread.get("output") or {}), what)
        item = self.ledger_item(qid)
        self.check(
            item.get("status") == "resumed" and item.get("answered_by") == PRINCIPAL,
            f"the ledger says resumed, answered by {PRINCIPAL}",
        )
        return qid

    def run(self) -> int:
        self.say(f"agent-wait demo: local stack at {self.stack.api_url} (moto at {self.stack.moto.endpoint})")
        self.say(f"sample agent: examples.refund_agent, input {json.dumps(INPUT)}")

        self.header("approve: the refund runs as proposed")
        approved = self.answer(
            "demo-approve",
            {"action": "approve"},
            lambda out: (out.get("refund") or {}).get("amount") == 40,
            "the output holds a refund of 40",
        )

        self.header("edit: approve with amount 25 instead of 40")
        self.answer(
            "demo-edit",
            {"action": "approve", "args": {"amount": 25}},
            lambda out: (out.get("refund") or {}).get("amount") == 25,
            "the output holds a refund of 25",
        )

        self.header("reject: the refund never runs")
        self.answer(
            "demo-reject",
            {"action": "reject", "reason": "outside the refund window"},
            lambda out: not out.get("refund") and bool(out.get("rejection")),
            "the output holds the rejection and no refund",
        )

        self.header("a different answer after the first: 409, the first answer stands")
        if approved is None:
            self.check(False, "no answered question to answer again")
        else:
            question = self.call("GET", f"/questions/{approved}")
            conflict = self.http(
                "POST",
                f"/questions/{approved}/reply",
                body={"answer": {"action": "reject"}},
                headers={"If-Match": question.header("ETag") or ""},
            )
            self.check(conflict.status == 409, "a different answer is refused with 409")

        self.header("a reply bound to another question: 412")
        parked = self.park("demo-stale", verbose=False)
        if parked is not None:
            # The same proposal as the first thread's, on another thread: the digest binds the
            # question id too, so the first question's ETag does not approve this one.
            other = self.call("GET", f"/questions/{approved}").header("ETag") if approved else None
            self.check(
                bool(other) and other != parked["etag"],
                "two identical proposals on two threads show two ETags",
            )
            stale = self.http(
                "POST",
                f"/questions/{parked['question_id']}/reply",
                body={"answer": {"action": "approve"}},
                headers={"If-Match": other or '"' + "0" * 64 + '"'},
            )
            self.check(stale.status == 412, "a reply with another question's ETag is refused with 412")
            item = self.ledger_item(parked["question_id"])
            self.check(item.get("status") in {"raised", "delivered"}, "the question is still unanswered")

        self.say()
        if self.failures:
            self.say(f"demo FAILED: {len(self.failures)} check(s) did not hold:")
            for failure in self.failures:
                self.say(f"  - {failure}")
            return 1
        self.say("demo passed: approve, edit, reject, 409 and 412 all behaved as specified.")
        return 0


def main() -> int:
    # Metrics are disabled locally; Powertools still warns that there were none to publish.
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    with LocalStack(StackConfig(project=PROJECT, port=0, moto_port=0)) as stack:
        return Demo(stack).run()


if __name__ == "__main__":
    sys.exit(main())
