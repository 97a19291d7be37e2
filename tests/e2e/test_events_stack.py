"""Resolution events on the local stack: a revoked question's events, ``tail --type``, event lines.

Every event the stack publishes is checked against its schema when the stack stops
(``LocalProcess.invalid_events``); this test also looks at what was read there.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from e2e_support import eventually, http, run_cli, start_local

pytestmark = pytest.mark.e2e


def test_a_revoked_question_publishes_its_events_once_and_tail_filters_by_type() -> None:
    local = start_local()
    stopped = False
    try:
        api = ["--api", local.api]
        thread_id = f"e2e-events-{uuid.uuid4().hex[:6]}"
        run_cli(
            "threads", "start", thread_id, "--input", '{"customer": "c-17", "amount": 40}', *api, check=True
        )

        def pending() -> str | None:
            status, _, body = http("GET", f"{local.api}/threads/{thread_id}")
            return body["pending"][0] if status == 200 and body.get("pending") else None

        question_id = eventually(pending, what="the question")
        # Given a question revoked (a second revocation is refused and records nothing)
        run_cli("revoke", question_id, "--reason", "duplicate request", *api, check=True)
        assert run_cli("revoke", question_id, "--reason", "again", *api).returncode == 1

        def ended() -> dict[str, Any] | None:
            status, _, body = http("GET", f"{local.api}/threads/{thread_id}")
            return body if status == 200 and body.get("status") in {"done", "failed"} else None

        eventually(ended, what="the run to end")

        def printed() -> list[str] | None:
            types = [
                line.split(" type=", 1)[1].split(" ", 1)[0]
                for line in list(local.lines)
                if f" thread={thread_id} " in line and line[10:25].strip() == "event"
            ]
            return types if "thread.done" in types else None

        # Then the stack printed one line per event, and tail --type shows only the revocation
        assert sorted(eventually(printed, what="the event lines")) == [
            "thread.done",
            "wait.resumed",
            "wait.revoked",
        ]
        outbox = local.info["outbox queue"]
        tail = run_cli("tail", "--queue-url", outbox, "--once", "--json", "--type", "wait.revoked")
        assert tail.returncode == 0, tail.stderr
        [revoked] = [json.loads(line) for line in tail.stdout.splitlines()]
        assert (revoked["type"], revoked["question_id"], revoked["reason"]) == (
            "wait.revoked",
            question_id,
            "duplicate request",
        )
        assert revoked["dedupe_key"] == f"wait.revoked:{question_id}"
        bad = run_cli("tail", "--queue-url", outbox, "--once", "--type", "wait.answerd")
        assert bad.returncode == 2
        assert len(bad.stderr.strip().splitlines()) == 1 and "wait.answerd" in bad.stderr

        # When the stack stops, every event it published to the topic is checked against its schema
        assert local.stop() == 0
        stopped = True
    finally:
        if not stopped:
            local.stop()
    mine = [e for e in local.events if e.get("thread_id") == thread_id]
    assert sorted(e["type"] for e in mine) == ["thread.done", "wait.created", "wait.resumed", "wait.revoked"]
    [resumed] = [e for e in mine if e["type"] == "wait.resumed"]
    assert resumed["status"] == "revoked"
