"""Every wait ends on its own, on the local stack: its clock fires the timers moto only stores.

The runs use ``examples.timed_refund_agent``, whose approval policy comes from the run input, and
short ttls; each step is awaited with ``eventually`` (the stack works on its own threads), never a
fixed sleep, and each window a person must act in is several seconds wide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import LocalProcess, eventually, http, run_cli, start_local

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.e2e

GRAPH = "examples.timed_refund_agent:build_graph"
LATE = {"action": "reject", "reason": "nobody answered in time"}


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalProcess]:
    local = start_local("--graph", GRAPH)
    try:
        yield local
    finally:
        code = local.stop()
        assert code == 0, "\n".join(local.lines)


def park(stack: LocalProcess, thread_id: str, policy: dict[str, Any]) -> dict[str, Any]:
    """Start a refund of 40 with ``policy`` and wait until the thread waits on its question."""
    status, _, _ = http(
        "POST",
        f"{stack.api}/threads/{thread_id}/runs",
        {"input": {"customer": "c-17", "amount": 40, "policy": policy}},
    )
    assert status == 202
    thread = eventually(lambda: waiting(stack, thread_id), what=f"{thread_id} to park")
    [question_id] = thread["pending"]
    return question(stack, question_id)


def waiting(stack: LocalProcess, thread_id: str) -> dict[str, Any] | None:
    status, _, thread = http("GET", f"{stack.api}/threads/{thread_id}")
    return thread if status == 200 and thread["status"] == "interrupted" else None


def question(stack: LocalProcess, question_id: str) -> dict[str, Any]:
    status, _, body = http("GET", f"{stack.api}/questions/{question_id}")
    assert status == 200
    return dict(body)


def finished(stack: LocalProcess, thread_id: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        _, _, thread = http("GET", f"{stack.api}/threads/{thread_id}")
        return thread if thread.get("status") == "done" else None

    return dict(eventually(done, timeout=60, what=f"{thread_id} to finish"))


def stages(q: dict[str, Any]) -> list[str]:
    return [entry["stage"] for entry in q["lifecycle"]]


def test_a_default_answer_applies_after_the_ttl(stack: LocalProcess) -> None:
    asked = park(stack, "t-default", {"ttl": 2, "on_expiry": {"action": "default", "answer": LATE}})

    thread = finished(stack, "t-default")

    q = question(stack, asked["question_id"])
    assert (q["status"], q["answer"], q["answered_by"]) == ("expired", LATE, "system:expiry")
    assert stages(q)[-2:] == ["expired", "resumed"]
    # The refund never ran: the default rejection was returned in its place
    assert (thread["output"]["refund"], thread["output"]["rejection"]) == (None, LATE)
    late = http(
        "POST",
        f"{stack.api}/questions/{q['question_id']}/reply",
        {"answer": {"action": "approve"}},
        {"If-Match": f'"{q["digest"]}"'},
    )
    assert (late[0], late[2]["standing_answer"]) == (410, LATE)


def test_a_question_without_on_expiry_expires_with_a_rejection(stack: LocalProcess) -> None:
    asked = park(stack, "t-plain", {"ttl": 2})

    thread = finished(stack, "t-plain")

    assert question(stack, asked["question_id"])["status"] == "expired"
    assert thread["output"]["rejection"] == {"action": "reject", "reason": "expired"}


def test_a_two_rung_ladder_answered_on_its_second_rung(stack: LocalProcess) -> None:
    # Given a ladder managers → directors with 4 s per rung
    asked = park(
        stack, "t-ladder", {"ttl": 4, "on_expiry": {"action": "escalate", "to": ["managers", "directors"]}}
    )
    question_id = asked["question_id"]

    # When it reaches the directors, who approve with the If-Match they were first sent
    on_second = eventually(
        lambda: (q := question(stack, question_id))["escalation"] == 2 and q, timeout=30, what="rung 2"
    )
    status, _, _ = http(
        "POST",
        f"{stack.api}/questions/{question_id}/reply",
        {"answer": {"action": "approve"}},
        {"If-Match": f'"{asked["digest"]}"'},
    )

    # Then the answer stands and the refund ran
    assert status == 202
    assert on_second["status"] == "escalated"
    thread = finished(stack, "t-ladder")
    assert thread["output"]["refund"]["amount"] == 40
    q = question(stack, question_id)
    details = [(e["stage"], e.get("detail")) for e in q["lifecycle"] if e["stage"] == "escalated"]
    assert details == [("escalated", "managers"), ("escalated", "directors")]
    assert q["status"] == "resumed"


def test_a_ladder_that_runs_out_applies_its_default(stack: LocalProcess) -> None:
    policy = {"ttl": 1, "on_expiry": {"action": "escalate", "to": ["managers", "directors"], "answer": LATE}}
    asked = park(stack, "t-runs-out", policy)

    thread = finished(stack, "t-runs-out")

    q = question(stack, asked["question_id"])
    assert (q["status"], q["escalation"], q["answer"]) == ("expired", 2, LATE)
    assert thread["output"]["rejection"] == LATE


def test_two_reminders_then_an_answer(stack: LocalProcess) -> None:
    asked = park(stack, "t-remind", {"ttl": 120, "reminders": [1, 2]})
    question_id = asked["question_id"]

    eventually(lambda: stages(question(stack, question_id)).count("reminded") == 2, what="two reminders")
    status, _, _ = http(
        "POST",
        f"{stack.api}/questions/{question_id}/reply",
        {"answer": {"action": "approve"}},
        {"If-Match": f'"{asked["digest"]}"'},
    )

    assert status == 202
    assert finished(stack, "t-remind")["output"]["refund"]["amount"] == 40
    reminded = [
        e.get("detail") for e in question(stack, question_id)["lifecycle"] if e["stage"] == "reminded"
    ]
    assert reminded == [1, 2]


def test_revoke_from_the_cli(stack: LocalProcess) -> None:
    asked = park(stack, "t-revoke", {"ttl": 120})

    revoked = run_cli("revoke", asked["question_id"], "--reason", "duplicate request", "--api", stack.api)

    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout.strip() == "200 revoked"
    thread = finished(stack, "t-revoke")
    assert thread["output"]["rejection"] == {"action": "reject", "reason": "revoked: duplicate request"}
    again = run_cli("revoke", asked["question_id"], "--reason", "again", "--api", stack.api)
    assert again.returncode != 0
    assert "410" in again.stderr
    shown = run_cli("questions", "show", asked["question_id"], "--api", stack.api, check=True)
    assert "revoked" in shown.stdout and "AFTER" in shown.stdout


def test_twenty_questions_expiring_in_the_same_second_each_resume_once(stack: LocalProcess) -> None:
    threads = [f"t-burst-{n}" for n in range(20)]
    for thread_id in threads:
        status, _, _ = http(
            "POST",
            f"{stack.api}/threads/{thread_id}/runs",
            {"input": {"customer": "c-17", "amount": 40, "policy": {"ttl": 3}}},
        )
        assert status == 202

    outputs = [finished(stack, thread_id) for thread_id in threads]

    assert all(t["output"]["rejection"] == {"action": "reject", "reason": "expired"} for t in outputs)
    for thread_id in threads:
        _, _, page = http("GET", f"{stack.api}/questions?thread_id={thread_id}")
        [q] = page["items"]
        assert q["status"] == "expired"
        assert stages(q).count("expired") == 1
        assert stages(q).count("resumed") == 1
