"""``agent-wait audit query``: SQL over the audit archive, with DuckDB locally and Athena deployed.

Both engines expose the archive as the table ``audit`` (and ``<database>.audit``, the stack's Glue
database), with the Glue table's columns and its ``date`` partition, so one statement runs on
either: :mod:`wait_service.stream.archive_reports` holds the saved reports, and DuckDB gets macros for the
Trino functions it names differently.

- Locally (the default) DuckDB reads ``<folder>/audit/date=*/audit.jsonl``, the files the local
  stack's archive consumer writes; the folder is ``--archive-dir``, ``$AGENT_WAIT_ARCHIVE_DIR``, or
  else the newest folder ``agent-wait local`` made in the temp folder.
- With ``--api`` the statement goes to Athena in the stack's workgroup and Glue database, signed
  with your AWS credentials (the stack's ``<stack>-operator`` policy grants what it needs): start,
  poll with backoff until done or ``--max-wait`` (then the query is stopped), then every page of
  its results.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from agent_wait_cli import render
from agent_wait_cli.client import ApiConnectionError, CliError, UsageError
from wait_service.stream.archive import ARCHIVE_COLUMNS, ARCHIVE_PREFIX, LOCAL_FILE, PARTITION_KEY
from wait_service.stream.archive_reports import DUCKDB_MACROS, REPORTS, TABLE, database_name, workgroup_name

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

ARCHIVE_DIR_ENV = "AGENT_WAIT_ARCHIVE_DIR"
# `agent-wait local` makes its archive folder in the temp folder with this prefix unless told one.
LOCAL_FOLDER_PREFIX = "agent-wait-audit-"
DEFAULT_MAX_WAIT = 300.0
# Athena's first poll comes soon (small queries take about a second); later ones back off to this.
FIRST_POLL = 0.25
LONGEST_POLL = 5.0
# GetQueryResults returns at most 1,000 rows a page.
PAGE_SIZE = 1000
_INTEGERS = frozenset({"tinyint", "smallint", "integer", "int", "bigint"})
_FLOATS = frozenset({"double", "float", "real"})


class QueryError(CliError):
    """The engine refused or failed the statement (its own message, one line)."""

    exit_code = 1


class NoArchiveError(UsageError):
    """There is no archive where the command looked."""


@dataclass(frozen=True)
class Result:
    """What a statement returned: column names, rows of plain JSON values, and where it ran."""

    columns: list[str]
    rows: list[list[Any]]
    engine: str
    source: str

    def as_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "source": self.source,
            "columns": self.columns,
            "rows": [dict(zip(self.columns, row, strict=True)) for row in self.rows],
        }


def _plain(value: Any) -> Any:
    """A value JSON and the table print the same way from either engine (decimals as exact text)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


# -- local: DuckDB over the JSON Lines ---------------------------------------------------------


def archive_files(folder: Path) -> list[Path]:
    """The local archive's files under ``folder``, oldest day first."""
    return sorted(folder.glob(f"{ARCHIVE_PREFIX}/{PARTITION_KEY}=*/{LOCAL_FILE}"))


def find_archive(explicit: str | None, temp_root: Path | None = None) -> Path:
    """The local archive's folder: ``explicit`` (the option or ``$AGENT_WAIT_ARCHIVE_DIR``), else the
    newest folder the local stack made in the temp folder."""
    if explicit:
        return Path(explicit).expanduser().resolve()
    root = Path(temp_root or tempfile.gettempdir())
    made = [p for p in root.glob(f"{LOCAL_FOLDER_PREFIX}*") if p.is_dir()]
    if not made:
        raise NoArchiveError(
            f"no audit archive: no --archive-dir, no ${ARCHIVE_DIR_ENV}, and no folder "
            f"{root / (LOCAL_FOLDER_PREFIX + '*')} from agent-wait local (it prints `audit archive: DIR`)"
        )
    return max(made, key=lambda p: p.stat().st_mtime)


class DuckDbArchive:
    """The local archive as DuckDB's view ``audit`` (and ``<database>.audit``)."""

    engine = "duckdb"

    def __init__(self, folder: Path, *, database: str) -> None:
        self.folder = folder
        self.database = database

    @property
    def source(self) -> str:
        return str(self.folder)

    def query(self, sql: str) -> Result:
        try:
            import duckdb
        except ImportError:
            raise UsageError(
                "the local archive is queried with DuckDB: pip install 'agent-wait[local]'"
            ) from None
        if not self.folder.is_dir():
            raise NoArchiveError(f"no audit archive: the folder {self.folder} does not exist")
        files = archive_files(self.folder)
        if not files:
            raise NoArchiveError(
                f"no audit archive yet: nothing matches "
                f"{self.folder / ARCHIVE_PREFIX / (PARTITION_KEY + '=*') / LOCAL_FILE} "
                "(a record is written when a question is decided)"
            )
        connection = duckdb.connect(":memory:")
        try:
            for macro in DUCKDB_MACROS:
                connection.execute(macro)
            # The Glue table's columns, every one a string; `date` comes from the folder, a string too.
            columns = ", ".join(f"'{name}': 'VARCHAR'" for name, _ in ARCHIVE_COLUMNS)
            paths = ", ".join("'" + str(path).replace("'", "''") + "'" for path in files)
            connection.execute(
                f"CREATE VIEW {TABLE} AS SELECT * FROM read_json([{paths}], format = 'newline_delimited', "
                f"columns = {{{columns}}}, hive_partitioning = true, "
                f"hive_types = {{'{PARTITION_KEY}': 'VARCHAR'}})"
            )
            connection.execute(f'CREATE SCHEMA "{self.database}"')
            connection.execute(f'CREATE VIEW "{self.database}".{TABLE} AS SELECT * FROM main.{TABLE}')
            try:
                cursor = connection.execute(sql)
                names = [d[0] for d in cursor.description or ()]
                rows = [[_plain(v) for v in row] for row in cursor.fetchall()] if names else []
            except duckdb.Error as exc:
                raise QueryError(f"SQL error (duckdb): {_one_line(str(exc))}") from None
        finally:
            connection.close()
        return Result(names, rows, self.engine, self.source)


# -- deployed: Athena --------------------------------------------------------------------------


class AthenaArchive:
    """The deployed archive through Athena: the stack's workgroup and Glue database."""

    engine = "athena"

    def __init__(
        self,
        client: Any,
        *,
        workgroup: str,
        database: str,
        max_wait: float = DEFAULT_MAX_WAIT,
        progress: Callable[[str], None] = lambda line: None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.workgroup = workgroup
        self.database = database
        self.max_wait = max_wait
        self.progress = progress
        self.sleep = sleep
        self.clock = clock

    @property
    def source(self) -> str:
        return f"{self.database}.{TABLE} (workgroup {self.workgroup})"

    def query(self, sql: str) -> Result:
        from botocore.exceptions import ClientError

        try:
            started = self.client.start_query_execution(
                QueryString=sql,
                QueryExecutionContext={"Catalog": "AwsDataCatalog", "Database": self.database},
                WorkGroup=self.workgroup,
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise QueryError(
                f"athena refused the query: {error.get('Code')}: {_one_line(error.get('Message', ''))}"
            ) from None
        query_id = started["QueryExecutionId"]
        self._wait(query_id)
        return self._results(query_id)

    def _wait(self, query_id: str) -> None:
        begun = self.clock()
        deadline = begun + self.max_wait
        delay = FIRST_POLL
        while True:
            execution = self.client.get_query_execution(QueryExecutionId=query_id)["QueryExecution"]
            status = execution.get("Status", {})
            state = status.get("State")
            if state == "SUCCEEDED":
                return
            if state in ("FAILED", "CANCELLED"):
                reason = _one_line(status.get("StateChangeReason") or "no reason given")
                raise QueryError(f"athena: query {query_id} {state.lower()}: {reason}")
            now = self.clock()
            if now >= deadline:
                self.client.stop_query_execution(QueryExecutionId=query_id)
                raise QueryError(
                    f"athena: query {query_id} still {str(state).lower()} after {self.max_wait:g} s: "
                    "stopped (raise --max-wait, or narrow the query by its date partition)"
                )
            scanned = execution.get("Statistics", {}).get("DataScannedInBytes")
            self.progress(
                f"athena: {str(state).lower()} {now - begun:.0f} s"
                + (f", {scanned / 1_000_000:.1f} MB scanned" if scanned else "")
                + f" (query {query_id})"
            )
            self.sleep(min(delay, max(deadline - now, 0.0)))
            delay = min(delay * 2, LONGEST_POLL)

    def _results(self, query_id: str) -> Result:
        columns: list[str] = []
        kinds: list[str] = []
        rows: list[list[Any]] = []
        paginator = self.client.get_paginator("get_query_results")
        first = True
        for page in paginator.paginate(QueryExecutionId=query_id, PaginationConfig={"PageSize": PAGE_SIZE}):
            result_set = page.get("ResultSet", {})
            if not columns:
                info = result_set.get("ResultSetMetadata", {}).get("ColumnInfo", [])
                columns = [c["Name"] for c in info]
                kinds = [str(c.get("Type", "varchar")).lower() for c in info]
            page_rows = [
                [cell.get("VarCharValue") for cell in row.get("Data", [])]
                for row in result_set.get("Rows", [])
            ]
            # A SELECT's first page starts with the column labels as a row.
            if first and page_rows and page_rows[0] == columns:
                page_rows = page_rows[1:]
            first = False
            rows.extend(
                [_typed(value, kind) for value, kind in zip(row, kinds, strict=False)] for row in page_rows
            )
        return Result(columns, rows, self.engine, self.source)


def _typed(value: str | None, kind: str) -> Any:
    """Athena returns every value as text: numbers and booleans back to JSON's (decimals stay text)."""
    if value is None:
        return None
    if kind in _INTEGERS:
        return int(value)
    if kind in _FLOATS:
        return float(value)
    if kind == "boolean":
        return value == "true"
    return value


def athena_archive(args: argparse.Namespace, err: TextIO, client: Any = None, **kwargs: Any) -> AthenaArchive:
    """The stack's Athena archive, its client built from your AWS configuration unless given."""
    if client is None:
        try:
            import boto3
        except ImportError:
            raise UsageError("--api needs boto3: pip install 'agent-wait[aws]'") from None
        session = boto3.session.Session(region_name=args.region)
        if session.region_name is None:
            raise UsageError("cannot tell the stack's region; pass --region or set AWS_REGION")
        client = session.client("athena")

    def progress(line: str) -> None:
        err.write(line + "\n")
        err.flush()

    return AthenaArchive(
        client,
        workgroup=args.workgroup or workgroup_name(args.stack),
        database=database_name(args.stack),
        max_wait=args.max_wait,
        progress=progress,
        **kwargs,
    )


# -- the command -------------------------------------------------------------------------------


def statement(args: argparse.Namespace) -> str:
    """The SQL to run: the positional SQL, or the saved report ``--report`` names."""
    if args.report and args.sql:
        raise UsageError("give SQL or --report NAME, not both")
    if args.report:
        return REPORTS[args.report].sql
    if not args.sql or not args.sql.strip():
        raise UsageError(f"give SQL, or --report NAME ({', '.join(sorted(REPORTS))})")
    return str(args.sql)


def run_audit(
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
    *,
    athena: Any = None,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> int:
    """``audit query`` and ``audit reports``; errors become one-line :class:`CliError`."""
    if args.action == "reports":
        return _reports(args, out)
    sql = statement(args)
    if args.athena:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            EndpointConnectionError,
            NoCredentialsError,
        )

        extra = {k: v for k, v in (("sleep", sleep), ("clock", clock)) if v is not None}
        engine: DuckDbArchive | AthenaArchive = athena_archive(args, err, athena, **extra)
        try:
            result = engine.query(sql)
        except NoCredentialsError:
            raise UsageError(
                "no AWS credentials for --api (set a profile, SSO or environment credentials)"
            ) from None
        except EndpointConnectionError as exc:
            raise ApiConnectionError(f"cannot reach Athena: {exc}") from None
        except BotoCoreError as exc:
            raise CliError(f"athena: {_one_line(str(exc))}") from None
        except ClientError as exc:
            # A refused poll or read (throttled, or the caller may not read the results' bucket)
            error = exc.response.get("Error", {})
            raise CliError(f"athena: {error.get('Code')}: {_one_line(error.get('Message', ''))}") from None
    else:
        engine = DuckDbArchive(find_archive(args.archive_dir), database=database_name(args.stack))
        result = engine.query(sql)
    _print(result, args, out, err)
    return 0


def _print(result: Result, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    if args.json:
        out.write(json.dumps(result.as_json(), ensure_ascii=False, default=str) + "\n")
    elif not result.rows:
        out.write("no rows" + (f" (columns: {', '.join(result.columns)})" if result.columns else "") + "\n")
    else:
        out.write(render.table(result.columns, result.rows, max_width=80) + "\n")
    count = len(result.rows)
    err.write(f"{count} row{'s' if count != 1 else ''} ({result.engine}: {result.source})\n")
    out.flush()
    err.flush()


def _reports(args: argparse.Namespace, out: TextIO) -> int:
    chosen: Sequence[str] = [args.report] if args.report else sorted(REPORTS)
    if args.json:
        payload = [{"name": n, "description": REPORTS[n].description, "sql": REPORTS[n].sql} for n in chosen]
        out.write(json.dumps(payload, ensure_ascii=False) + "\n")
    elif args.report:
        out.write(REPORTS[args.report].sql)
    else:
        out.write(
            render.table(["REPORT", "ANSWERS"], [[n, REPORTS[n].description] for n in chosen], max_width=200)
            + "\n"
        )
    return 0
