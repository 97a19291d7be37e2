"""``agent-wait audit query`` with DuckDB over an archive the real pipeline wrote: every saved report
equals a recount from the ledger.

Twenty questions are raised and decided every way a question ends (approved, approved with one or two
arguments edited, rejected, an edit question's new value, a free-text answer, expired with the
policy's default and without one, revoked; a few left open), over two days, by three people with
different delays, through the ledger's own writes. The ledger's stream (moto) is read twice, as a
retried batch would be, by the stream reader the local stack uses, into the archive's consumer.
Then each report runs through the CLI, and its rows must equal what the ledger's questions say,
counted here in Python.
"""

from __future__ import annotations

import io
import json
import math
import uuid
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from test_audit_archive import read_stream

from agent_wait import Policy, Question, approval, build_envelope
from agent_wait.aws import DynamoDbAnnounce
from agent_wait.policy import OnExpiry
from agent_wait.receipts import Receipt
from agent_wait_cli import main
from wait_service.answers.audit import audit_of
from wait_service.ledger import Ledger
from wait_service.ledger.questions import EXPIRY_ACTOR
from wait_service.stream.archive import ArchiveConsumer, JsonLinesSink
from wait_service.stream.archive_reports import REPORTS
from wait_service.stream.ledger_stream import LedgerStream

if TYPE_CHECKING:
    from wait_service.ledger import QuestionRecord
    from wait_service.resources import LocalResources

# The module builds its archive once: its tests stay on one worker.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("audit-query")]

QUESTIONS = 20

DAY_ONE = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
WAYS = (
    "approve",
    "edit-one",
    "reject",
    "edit-two",
    "expired-default",
    "respond",
    "edit-question",
    "expired",
    "revoked",
    "open",
)
PEOPLE = ("ann", "bob", "cy")
FUNCTIONS = {"issue_refund": ("customer", "amount"), "close_account": ("account", "why")}
DEFAULT: dict[str, Any] = {"action": "approve"}


class Clock:
    def __init__(self) -> None:
        self.now = DAY_ONE

    def __call__(self) -> datetime:
        return self.now


def _raise(resources: LocalResources, dynamodb: Any, n: int) -> tuple[str, str]:
    way = WAYS[n % len(WAYS)]
    function = sorted(FUNCTIONS)[n % 2]
    first, second = FUNCTIONS[function]
    question: Any = {"function": function, "args": {first: f"x-{n}", second: n}}
    policy: Policy = approval(ttl=3600)
    if way == "respond":
        question, policy = "Why was this refund asked for?", Policy(kind="text")
    elif way == "edit-question":
        question, policy = {"text": "Dear customer"}, Policy(kind="edit")
    elif way == "expired-default":
        policy = approval(ttl=3600, on_expiry=OnExpiry(action="default", answer=DEFAULT))
    question_id = f"q-{n:02d}-{resources.ledger_table}"
    raised = DAY_ONE + timedelta(days=n % 2, minutes=n)
    envelope = build_envelope(
        f"t-{n}", Question(question_id=question_id, question=question, policy=policy), now=raised
    )
    DynamoDbAnnounce(resources.ledger_table, client=dynamodb).deliver(envelope)
    return question_id, way


def _decide(ledger: Ledger, clock: Clock, question_id: str, way: str, n: int) -> None:
    question = ledger.get_question(question_id)
    assert question.created_at is not None
    # Each person answers after a delay of their own, varied per question.
    clock.now = _moment(question.created_at) + timedelta(seconds=7 + (n * 37) % 600, milliseconds=n)
    person = PEOPLE[n % 3]
    args = question.question.get("args") if isinstance(question.question, dict) else None
    if way == "approve":
        ledger.record_answer(question_id, {"action": "approve"}, answered_by=person)
    elif way == "edit-one":
        first = next(iter(args))
        ledger.record_answer(
            question_id, {"action": "approve", "args": {first: "edited"}}, answered_by=person
        )
    elif way == "edit-two":
        edits = {name: f"{value}-edited" for name, value in args.items()}
        ledger.record_answer(question_id, {"action": "approve", "args": edits}, answered_by=person)
    elif way == "reject":
        ledger.record_answer(
            question_id, {"action": "reject", "reason": "no"}, answered_by=person, reason="no"
        )
    elif way == "respond":
        ledger.record_answer(question_id, "a duplicate charge", answered_by=person)
    elif way == "edit-question":
        ledger.record_answer(question_id, {"action": "edit", "value": "Dear Ms Doe"}, answered_by=person)
    elif way == "expired-default":
        ledger.record_expiry(question_id, DEFAULT, rung=0)
    elif way == "expired":
        ledger.record_expiry(question_id, {"action": "reject", "reason": "expired"}, rung=0)
    elif way == "revoked":
        ledger.record_revocation(question_id, "withdrawn", revoked_by="carol")
        return
    # The thread resumes: one more archive record, with the receipt of what ran.
    decided = ledger.get_question(question_id)
    receipt = None
    if isinstance(decided.question, dict) and "function" in decided.question:
        ran = Receipt(question_id=question_id, ran=n % 4 != 0, args={}, outcome="returned", at=clock.now)
        receipt = ran.model_dump(mode="json", exclude={"question_id"})
    ledger.mark_resumed(decided, receipt=receipt)


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# -- the recount: what each report must say, from the ledger's questions ------------------------


def outcome(question: QuestionRecord) -> str:
    if question.answered_by == EXPIRY_ACTOR:
        return "expired"
    if any(stage.get("stage") == "revoked" for stage in question.lifecycle):
        return "revoked"
    answer = question.answer if isinstance(question.answer, dict) else {}
    action = answer.get("action")
    if action == "edit" or (action == "approve" and audit_of(question)["diff"]):
        return "edit"
    return str(action) if action in ("approve", "reject") else "respond"


def function_of(question: QuestionRecord) -> str | None:
    return question.question.get("function") if isinstance(question.question, dict) else None


def seconds(question: QuestionRecord) -> float:
    assert question.answered_at and question.created_at
    return (_moment(question.answered_at) - _moment(question.created_at)).total_seconds()


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(math.ceil(len(ordered) * q) - 1, 0)]


def expected_reports(decided: list[QuestionRecord]) -> dict[str, list[dict[str, Any]]]:
    per_day = Counter((q.answered_at[:10], q.policy["kind"], outcome(q)) for q in decided if q.answered_at)
    by_function = sorted(
        (q for q in decided if function_of(q)), key=lambda q: (function_of(q), q.answered_at, q.question_id)
    )
    people: dict[str, list[QuestionRecord]] = defaultdict(list)
    for q in decided:
        if outcome(q) not in ("expired", "revoked"):
            people[str(q.answered_by)].append(q)
    edits: Counter[tuple[str, str]] = Counter()
    editors: dict[tuple[str | None, str], set[str]] = defaultdict(set)
    for q in decided:
        if outcome(q) == "edit":
            for op in audit_of(q)["diff"]:
                edits[(function_of(q), op["path"])] += 1
                editors[(function_of(q), op["path"])].add(str(q.answered_by))

    def responder(name: str, answered: list[QuestionRecord]) -> dict[str, Any]:
        kinds = Counter(outcome(q) for q in answered)
        times = [seconds(q) for q in answered]
        return {
            "answered_by": name,
            "decisions": len(answered),
            "approved": kinds["approve"],
            "edited": kinds["edit"],
            "rejected": kinds["reject"],
            "responded": kinds["respond"],
            "approve_pct": round(100 * kinds["approve"] / len(answered), 1),
            "p50_seconds": round(nearest_rank(times, 0.5), 3),
            "p90_seconds": round(nearest_rank(times, 0.9), 3),
            "max_seconds": round(max(times), 3),
        }

    def ran(q: QuestionRecord) -> str | None:
        return None if q.receipt is None else json.dumps(q.receipt["ran"])

    expired = sorted(
        (q for q in decided if outcome(q) == "expired"), key=lambda q: (q.answered_at, q.question_id)
    )
    return {
        "decisions-per-day": [
            {"day": day, "kind": kind, "outcome": result, "decisions": count}
            for (day, kind, result), count in sorted(per_day.items())
        ],
        "approvals-by-function": [
            {
                "function_name": function_of(q),
                "question_id": q.question_id,
                "answered_by": q.answered_by,
                "outcome": outcome(q),
                "answered_at": q.answered_at,
                "authorized_args": (audit_of(q)["authorized"] or {}).get("args"),
                "ran": ran(q),
            }
            for q in by_function
        ],
        "responders": sorted(
            (responder(name, answered) for name, answered in people.items()),
            key=lambda row: (-row["decisions"], row["answered_by"]),
        ),
        "expired": [
            {
                "question_id": q.question_id,
                "function_name": function_of(q),
                "kind": q.policy["kind"],
                "created_at": q.created_at,
                "expires_at": q.expires_at,
                "expired_at": q.answered_at,
                # The policy's own default, read from the policy (not from the answer's shape).
                "default_applied": (q.policy.get("on_expiry") or {}).get("action") == "default",
                "answer": q.answer,
            }
            for q in expired
        ],
        "edited-fields": sorted(
            (
                {
                    "function_name": function,
                    "field": path,
                    "edits": count,
                    "editors": len(editors[(function, path)]),
                }
                for (function, path), count in edits.items()
            ),
            key=lambda row: (row["function_name"] or "", -row["edits"], row["field"]),
        ),
    }


def _query(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["audit", "query", *argv], out=out, err=err, environ={})
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def archive(moto_server: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The archive folder the pipeline wrote, and the ledger's decided questions (built once)."""
    import boto3

    from wait_service.resources import create_resources

    def client(service: str) -> Any:
        return boto3.client(service, endpoint_url=moto_server.endpoint, region_name="us-east-1")

    folder = tmp_path_factory.mktemp("audit-archive")
    dynamodb = client("dynamodb")
    resources = create_resources(
        dynamodb, client("sqs"), client("sns"), prefix=f"t{uuid.uuid4().hex[:8]}-", s3=client("s3")
    )
    clock = Clock()
    ledger = Ledger(resources.ledger_table, dynamodb, clock=clock)
    # The archive alone of the stream's consumers (test_audit_archive checks the dispatcher wires it)
    stream = LedgerStream([ArchiveConsumer(JsonLinesSink(folder))])
    ways = dict(_raise(resources, dynamodb, n) for n in range(QUESTIONS))
    for n, (question_id, way) in enumerate(ways.items()):
        if way != "open":
            _decide(ledger, clock, question_id, way, n)
    read_stream(resources, client, stream)
    read_stream(resources, client, stream)  # a retried batch: every record written twice
    decided = [ledger.get_question(q) for q, way in ways.items() if way != "open"]
    return {"folder": folder, "decided": decided, "ways": ways}


def test_every_saved_report_equals_a_recount_from_the_ledger(archive: dict[str, Any]) -> None:
    folder = str(archive["folder"])
    records = JsonLinesSink(archive["folder"]).read()
    # Given an archive with several records per question (resumes, the retried batch) over two days
    assert len(records) > 2 * len(archive["decided"])
    expected = expected_reports(archive["decided"])
    assert set(expected) == set(REPORTS)
    assert {row["outcome"] for row in expected["decisions-per-day"]} == {
        "approve",
        "edit",
        "reject",
        "respond",
        "expired",
        "revoked",
    }
    assert len({row["day"] for row in expected["decisions-per-day"]}) == 2

    for name in sorted(REPORTS):
        # When the report runs through the CLI over the local archive
        code, out, err = _query("--report", name, "--archive-dir", folder, "--json")
        # Then its rows are the recount's, in its order
        assert code == 0, err
        rows = json.loads(out)["rows"]
        if name == "approvals-by-function":
            for row in rows:
                row["authorized_args"] = (
                    json.loads(row["authorized_args"]) if row["authorized_args"] else None
                )
        if name == "expired":
            for row in rows:
                row["answer"] = json.loads(row["answer"])
        assert rows == expected[name], name
        assert rows, name
        assert err.strip().endswith(f"(duckdb: {archive['folder'].resolve()})")


def test_ad_hoc_sql_reads_the_table_by_its_glue_names_with_trinos_functions(archive: dict[str, Any]) -> None:
    folder = str(archive["folder"])
    # The README's query shape: the Glue database's qualified name, the date partition, json_extract.
    code, out, _ = _query(
        """SELECT question_id, json_extract_scalar(answer, '$.action') AS action
           FROM agent_wait.audit WHERE "date" >= '2026-01-01' AND status = 'expired'
           ORDER BY question_id""",
        "--archive-dir",
        folder,
        "--json",
    )
    assert code == 0
    expired = sorted(q.question_id for q in archive["decided"] if q.answered_by == EXPIRY_ACTOR)
    # Both writes of each expired question's record (the retried batch), newest or not: raw rows.
    assert sorted({row["question_id"] for row in json.loads(out)["rows"]}) == expired
    # Another stack's database name
    code, out, _ = _query(
        "SELECT count(*) AS n FROM aw_prod.audit", "--archive-dir", folder, "--stack", "aw-prod"
    )
    assert code == 0 and out.split() == ["n", str(len(JsonLinesSink(archive["folder"]).read()))]
