"""``agent-wait audit query``: DuckDB's hostile cases over an archive written by the archive's own
sink, and the Athena path against moto (start, poll, stop, results) and botocore's Stubber.

moto runs no SQL: it answers a query with results queued beforehand, moves an execution through
QUEUED, RUNNING and SUCCEEDED (its state manager sets how many polls each state lasts) and cancels
one on StopQueryExecution, but it never fails a query and never pages results. Failed queries and
paging are checked with Stubber, which validates each request and response against Athena's own
service model; whether the statements parse on Athena's engine only a deployed stack can tell.
"""

from __future__ import annotations

import io
import json
import shlex
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from moto.athena.models import QueryResults, athena_backends
from moto.core import DEFAULT_ACCOUNT_ID
from moto.moto_api import state_manager

from agent_wait_cli import main
from agent_wait_cli.audit_query import AthenaArchive, QueryError, run_audit
from agent_wait_cli.client import CliError
from agent_wait_cli.commands import build_parser
from wait_service.ledger import QuestionRecord
from wait_service.stream.archive import JsonLinesSink, archive_record
from wait_service.stream.archive_reports import REPORTS


def _question(question_id: str, **fields: Any) -> QuestionRecord:
    values: dict[str, Any] = {
        "question_id": question_id,
        "thread_id": "t",
        "status": "answered",
        "digest": "d",
        "question": {"function": "issue_refund", "args": {"amount": 40}},
        "policy": {"kind": "approval"},
        "source": None,
        "created_at": "2026-12-01T09:00:00.000Z",
        "expires_at": None,
        "updated_at": None,
        "lifecycle": [],
        "answer": {"action": "approve"},
        "answered_by": "ann",
        "answered_at": "2026-12-01T09:01:00.000Z",
    }
    return QuestionRecord(**(values | fields))


def _archive(folder: Path, count: int = 2) -> Path:
    records = [
        archive_record(
            _question(f"q-{n}"), sequence_number=str(n + 1), archived_at="2026-12-01T09:02:00.000Z"
        )
        for n in range(count)
    ]
    JsonLinesSink(folder).write(records)
    return folder


def _run(*argv: str, environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["audit", *argv], out=out, err=err, environ=environ or {})
    return code, out.getvalue(), err.getvalue()


# -- local (DuckDB) ------------------------------------------------------------------------------


def test_a_query_prints_a_table_and_the_row_count_on_stderr(tmp_path: Path) -> None:
    folder = _archive(tmp_path)
    code, out, err = _run(
        "query", "SELECT question_id, answered_by FROM audit ORDER BY 1", "--archive-dir", str(folder)
    )
    assert code == 0
    assert out.splitlines() == ["question_id  answered_by", "q-0          ann", "q-1          ann"]
    assert err == f"2 rows (duckdb: {folder.resolve()})\n"


def test_sql_that_fails_is_one_line_naming_the_engine(tmp_path: Path) -> None:
    folder = _archive(tmp_path)
    for sql in ("SELEC 1", "SELECT nope FROM audit", "SELECT * FROM questions"):
        code, out, err = _run("query", sql, "--archive-dir", str(folder))
        assert code == 1, sql
        assert out == ""
        assert err.startswith("agent-wait: SQL error (duckdb): ") and err.count("\n") == 1, err


def test_a_query_that_returns_nothing_says_so_with_its_columns(tmp_path: Path) -> None:
    folder = _archive(tmp_path)
    sql = "SELECT question_id, status FROM audit WHERE status = 'revoked'"
    code, out, err = _run("query", sql, "--archive-dir", str(folder))
    assert (code, out) == (0, "no rows (columns: question_id, status)\n")
    assert err.startswith("0 rows (duckdb: ")
    code, out, _ = _run("query", sql, "--archive-dir", str(folder), "--json")
    assert json.loads(out) | {"source": None} == {
        "engine": "duckdb",
        "source": None,
        "columns": ["question_id", "status"],
        "rows": [],
    }
    # every saved report on an archive with nothing it counts: no rows, no error
    for name in REPORTS:
        if name not in ("decisions-per-day", "approvals-by-function", "responders"):
            code, out, _ = _run("query", "--report", name, "--archive-dir", str(folder))
            assert code == 0 and out.startswith("no rows (columns: "), name


def test_an_empty_archive_says_where_it_looked(tmp_path: Path) -> None:
    # A folder the local stack made before any question was decided
    code, out, err = _run("query", "SELECT 1", "--archive-dir", str(tmp_path))
    assert (code, out) == (2, "")
    assert err == (
        f"agent-wait: no audit archive yet: nothing matches {tmp_path}/audit/date=*/audit.jsonl "
        "(a record is written when a question is decided)\n"
    )
    code, _, err = _run("query", "SELECT 1", "--archive-dir", str(tmp_path / "gone"))
    assert (
        code == 2 and err == f"agent-wait: no audit archive: the folder {tmp_path / 'gone'} does not exist\n"
    )


def test_the_folder_comes_from_the_environment_or_the_newest_local_stack_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    # No folder at all: the error names the option, the variable and the pattern looked for
    code, _, err = _run("query", "SELECT 1")
    assert code == 2
    assert err == (
        "agent-wait: no audit archive: no --archive-dir, no $AGENT_WAIT_ARCHIVE_DIR, and no folder "
        f"{tmp_path}/agent-wait-audit-* from agent-wait local (it prints `audit archive: DIR`)\n"
    )
    # The local stack's folders: the newest one is read
    import os

    older = _archive(tmp_path / "agent-wait-audit-old", count=1)
    newer = _archive(tmp_path / "agent-wait-audit-new", count=3)
    os.utime(older, (1, 1))
    code, out, err = _run("query", "SELECT count(*) AS n FROM audit")
    assert (code, out.split()) == (0, ["n", "3"]) and str(newer) in err
    # $AGENT_WAIT_ARCHIVE_DIR wins over the guess
    code, out, _ = _run(
        "query", "SELECT count(*) AS n FROM audit", environ={"AGENT_WAIT_ARCHIVE_DIR": str(older)}
    )
    assert (code, out.split()) == (0, ["n", "1"])


def test_a_broken_line_in_the_archive_fails_the_query_in_one_line(tmp_path: Path) -> None:
    folder = _archive(tmp_path)
    [path] = list(folder.glob("audit/date=*/audit.jsonl"))
    path.write_text(path.read_text() + '{"question_id": "half\n')
    code, _, err = _run("query", "SELECT count(*) FROM audit", "--archive-dir", str(folder))
    assert code == 1 and err.startswith("agent-wait: SQL error (duckdb): ") and err.count("\n") == 1


def test_sql_or_a_report_but_not_both_nor_neither(tmp_path: Path) -> None:
    folder = str(_archive(tmp_path))
    code, _, err = _run("query", "SELECT 1", "--report", "expired", "--archive-dir", folder)
    assert (code, err) == (2, "agent-wait: give SQL or --report NAME, not both\n")
    code, _, err = _run("query", "--archive-dir", folder)
    assert code == 2 and err.startswith("agent-wait: give SQL, or --report NAME (approvals-by-function, ")
    with pytest.raises(SystemExit) as caught:
        build_parser({}).parse_args(["audit", "query", "--report", "nope"])
    assert caught.value.code == 2


def test_reports_lists_each_report_and_prints_its_sql() -> None:
    code, out, _ = _run("reports")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == sorted(REPORTS)
    code, out, _ = _run("reports", "--report", "responders")
    assert (code, out) == (0, REPORTS["responders"].sql)
    code, out, _ = _run("reports", "--json")
    assert {r["name"]: r["sql"] for r in json.loads(out)} == {n: r.sql for n, r in REPORTS.items()}


# -- deployed (Athena) ---------------------------------------------------------------------------


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        # The stack's workgroup, as deployed (moto refuses a query in a workgroup it does not know)
        boto3.client("athena", region_name="eu-west-1").create_work_group(
            Name="agent-wait-audit",
            Configuration={"ResultConfiguration": {"OutputLocation": "s3://results/results/"}},
        )
        yield athena_backends[DEFAULT_ACCOUNT_ID]["eu-west-1"]


def _columns(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"Name": name, "Label": name, "Type": kind, "Nullable": "UNKNOWN"} for name, kind in pairs]


def _row(*values: str | None) -> dict[str, Any]:
    return {"Data": [{} if value is None else {"VarCharValue": value} for value in values]}


def _api_args(*argv: str) -> Any:
    return build_parser({}).parse_args(["audit", "query", *argv, "--api", "--region", "eu-west-1"])


class Ticks:
    """A clock that moves one second per reading, and records each sleep asked for."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        self.now += 1
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def test_api_polls_with_progress_then_prints_typed_rows_without_the_header(aws: Any) -> None:
    # Given Athena's answer: the header row, then rows whose values are all text
    columns = _columns(
        ("answered_by", "varchar"), ("decisions", "bigint"), ("p50", "double"), ("fast", "boolean")
    )
    aws.query_results_queue.append(
        QueryResults(
            rows=[
                _row("answered_by", "decisions", "p50", "fast"),
                _row("ann", "3", "7.5", "true"),
                _row(None, "1", None, "false"),
            ],
            column_info=columns,
        )
    )
    # and a query that stays queued for two polls and running for two more
    state_manager.set_transition("athena::execution", {"progression": "manual", "times": 2})
    ticks = Ticks()
    out, err = io.StringIO(), io.StringIO()
    try:
        code = run_audit(
            _api_args("--report", "responders", "--json"), out, err, sleep=ticks.sleep, clock=ticks.clock
        )
    finally:
        state_manager.unset_transition("athena::execution")

    assert code == 0
    assert json.loads(out.getvalue()) == {
        "engine": "athena",
        "source": "agent_wait.audit (workgroup agent-wait-audit)",
        "columns": ["answered_by", "decisions", "p50", "fast"],
        "rows": [
            {"answered_by": "ann", "decisions": 3, "p50": 7.5, "fast": True},
            {"answered_by": None, "decisions": 1, "p50": None, "fast": False},
        ],
    }
    progress = err.getvalue().splitlines()
    states = [line.split()[1] for line in progress[:-1]]
    assert states == sorted(states, key=["queued", "running"].index) and {"queued", "running"} <= set(states)
    assert all(line.startswith("athena: ") and "(query " in line for line in progress[:-1])
    assert progress[-1] == "2 rows (athena: agent_wait.audit (workgroup agent-wait-audit))"
    # backing off between polls
    assert ticks.slept == [0.25 * 2**n for n in range(len(states))]
    # the saved report's SQL, in the stack's workgroup and database
    [execution] = aws.executions.values()
    assert execution.query == REPORTS["responders"].sql
    assert execution.context == {"Catalog": "AwsDataCatalog", "Database": "agent_wait"}
    assert execution.workgroup.name == "agent-wait-audit"


def test_api_stops_a_query_past_max_wait(aws: Any) -> None:
    state_manager.set_transition("athena::execution", {"progression": "manual", "times": 1000})
    ticks = Ticks()
    try:
        with pytest.raises(QueryError, match=r"still (queued|running) after 5 s: stopped") as caught:
            run_audit(
                _api_args(
                    "SELECT 1", "--max-wait", "5", "--workgroup", "agent-wait-audit", "--stack", "aw-prod"
                ),
                io.StringIO(),
                io.StringIO(),
                sleep=ticks.sleep,
                clock=ticks.clock,
            )
    finally:
        state_manager.unset_transition("athena::execution")
    [execution] = aws.executions.values()
    assert execution.status == "CANCELLED"
    assert execution.id in str(caught.value)
    assert execution.context["Database"] == "aw_prod"
    assert sum(ticks.slept) <= 5


def test_api_an_empty_result_prints_no_rows(aws: Any) -> None:
    aws.query_results_queue.append(QueryResults(rows=[_row("n")], column_info=_columns(("n", "bigint"))))
    out, err = io.StringIO(), io.StringIO()
    assert run_audit(_api_args("SELECT n FROM audit WHERE false"), out, err) == 0
    assert out.getvalue() == "no rows (columns: n)\n"


def _stubbed() -> tuple[Any, Stubber]:
    client = boto3.client("athena", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    return client, Stubber(client)


def _archive_of(client: Any) -> AthenaArchive:
    return AthenaArchive(client, workgroup="wg", database="db", sleep=lambda _: None, clock=Ticks().clock)


def _execution(state: str, reason: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"State": state}
    if reason:
        status["StateChangeReason"] = reason
    return {"QueryExecution": {"QueryExecutionId": "qe-1", "Status": status}}


def test_api_a_failed_query_is_one_line_with_athenas_reason() -> None:
    client, stub = _stubbed()
    stub.add_response(
        "start_query_execution",
        {"QueryExecutionId": "qe-1"},
        {
            "QueryString": "SELEC 1",
            "QueryExecutionContext": {"Catalog": "AwsDataCatalog", "Database": "db"},
            "WorkGroup": "wg",
        },
    )
    stub.add_response("get_query_execution", _execution("RUNNING"), {"QueryExecutionId": "qe-1"})
    reason = "line 1:1: mismatched input 'SELEC'.\nExpecting: 'SELECT'"
    stub.add_response("get_query_execution", _execution("FAILED", reason))
    with stub, pytest.raises(QueryError) as caught:
        _archive_of(client).query("SELEC 1")
    assert (
        str(caught.value)
        == "athena: query qe-1 failed: line 1:1: mismatched input 'SELEC'. Expecting: 'SELECT'"
    )
    stub.assert_no_pending_responses()


def test_api_a_refused_start_is_one_line_with_the_error_code() -> None:
    client, stub = _stubbed()
    stub.add_client_error(
        "start_query_execution", "InvalidRequestException", "WorkGroup agent-wait-audit is not found."
    )
    with stub, pytest.raises(QueryError) as caught:
        _archive_of(client).query("SELECT 1")
    assert str(caught.value) == (
        "athena refused the query: InvalidRequestException: WorkGroup agent-wait-audit is not found."
    )


def test_api_reads_every_page_and_drops_only_the_first_pages_header() -> None:
    client, stub = _stubbed()
    columns = {"ColumnInfo": _columns(("question_id", "varchar"), ("amount", "decimal"))}
    stub.add_response("start_query_execution", {"QueryExecutionId": "qe-1"})
    stub.add_response("get_query_execution", _execution("SUCCEEDED"))
    stub.add_response(
        "get_query_results",
        {
            "ResultSet": {
                "Rows": [_row("question_id", "amount"), _row("q-1", "40.10")],
                "ResultSetMetadata": columns,
            },
            "NextToken": "page-2",
        },
        {"QueryExecutionId": "qe-1", "MaxResults": 1000},
    )
    stub.add_response(
        "get_query_results",
        {"ResultSet": {"Rows": [_row("q-2", "0.10000000000000000001")], "ResultSetMetadata": columns}},
        {"QueryExecutionId": "qe-1", "MaxResults": 1000, "NextToken": "page-2"},
    )
    with stub:
        result = _archive_of(client).query("SELECT question_id, amount FROM audit")
    # decimals stay exact text
    assert result.rows == [["q-1", "40.10"], ["q-2", "0.10000000000000000001"]]
    stub.assert_no_pending_responses()


def test_api_needs_a_region(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    code, _, err = _run("query", "SELECT 1", "--api")
    assert (code, err) == (2, "agent-wait: cannot tell the stack's region; pass --region or set AWS_REGION\n")


# -- the page's commands -------------------------------------------------------------------------

DOC = Path(__file__).resolve().parents[3] / "docs" / "audit-query.md"


def test_every_command_on_the_docs_page_runs(tmp_path: Path, aws: Any) -> None:
    """docs/audit-query.md's commands: locally on an archive, with --api on moto's Athena."""
    block = DOC.read_text().split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [shlex.split(line.split("#", 1)[0]) for line in block.splitlines() if line.strip()]
    assert len(commands) == 5 and all(c[0] == ".venv/bin/agent-wait" for c in commands)
    folder = str(_archive(tmp_path))
    for command in commands:
        argv = command[1:]
        if "--api" not in argv and argv[:2] == ["audit", "query"]:
            argv += ["--archive-dir", folder]
        out, err = io.StringIO(), io.StringIO()
        assert main(argv, out=out, err=err, environ={}) == 0, (command, err.getvalue())
        assert out.getvalue(), command


def test_api_a_refused_read_of_the_results_is_one_line() -> None:
    client, stub = _stubbed()
    stub.add_response("start_query_execution", {"QueryExecutionId": "qe-1"})
    stub.add_response("get_query_execution", _execution("SUCCEEDED"))
    stub.add_client_error(
        "get_query_results", "AccessDeniedException", "Access denied when reading\nthe results"
    )
    out, err = io.StringIO(), io.StringIO()
    with stub, pytest.raises(CliError) as caught:
        run_audit(_api_args("SELECT 1"), out, err, athena=client, sleep=lambda _: None)
    assert str(caught.value) == "athena: AccessDeniedException: Access denied when reading the results"
    assert caught.value.exit_code == 1 and out.getvalue() == ""
