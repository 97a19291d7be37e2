"""The audit archive's saved reports: SQL that runs unchanged on Athena (deployed) and DuckDB (locally).

Each report is written once here. The stack saves every one as an Athena named query in the
archive's workgroup (``infra.audit_query``); ``agent-wait audit query --report NAME`` runs the same
text, through Athena with ``--api`` or with DuckDB over the local archive's JSON Lines. The SQL
reads the table :data:`TABLE` unqualified (Athena runs it in the stack's Glue database, DuckDB
exposes the archive as a view of that name), and keeps to what Trino and DuckDB share; the few
Trino functions DuckDB names differently are DuckDB macros (:data:`DUCKDB_MACROS`), so an ad hoc
query written for Athena runs locally too.

A question has one archive record per change, so every report starts from the newest record of
each question (``latest``: the highest stream sequence number; sequence numbers have up to 40
digits, more than a ``decimal(38, 0)`` holds, so they are compared by length, then as text) and
reads its *outcome*: ``expired`` (the expiry decided it), ``revoked``, ``edit`` (an approval with
edited arguments, or an edit question's new value), ``approve``, ``reject``, or ``respond`` (any
other answer: a decision's choice, free text).

Examples
--------
>>> sorted(REPORTS)
['approvals-by-function', 'decisions-per-day', 'edited-fields', 'expired', 'responders']
>>> "FROM audit" in REPORTS["decisions-per-day"].sql
True
>>> database_name("agent-wait"), workgroup_name("agent-wait")
('agent_wait', 'agent-wait-audit')
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from wait_service.ledger.questions import EXPIRED_ANSWER, EXPIRY_ACTOR

# The Glue table (and the local view) every report reads.
TABLE = "audit"


def database_name(stack_name: str) -> str:
    """The stack's Glue database (lower case letters, digits and ``_``).

    Examples
    --------
    >>> database_name("aw-Prod")
    'aw_prod'
    """
    return re.sub(r"[^a-z0-9_]", "_", stack_name.lower())


def workgroup_name(stack_name: str) -> str:
    """The stack's Athena workgroup: where the saved reports live and query results go."""
    return f"{stack_name}-audit"


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


# The text the archive writes for the answer an expiry applies when the policy names no default
# (``wait_service.stream.archive`` writes JSON with sorted keys): any other answer of an expiry is
# the default.
_NO_DEFAULT = _literal(json.dumps(EXPIRED_ANSWER, sort_keys=True, ensure_ascii=False))

LATEST = f"""latest AS (
  SELECT * FROM (
    SELECT *, row_number() OVER (
      PARTITION BY question_id ORDER BY length(sequence_number) DESC, sequence_number DESC
    ) AS newest
    FROM {TABLE}
  ) AS ranked
  WHERE newest = 1
)"""

DECISIONS = f"""decided AS (
  SELECT
    question_id,
    thread_id,
    status,
    json_extract_scalar(question, '$.function') AS function_name,
    json_extract_scalar(policy, '$.kind') AS kind,
    answered_by,
    answered_at,
    substr(answered_at, 1, 10) AS day,
    CASE
      WHEN answered_by = {_literal(EXPIRY_ACTOR)} THEN 'expired'
      WHEN regexp_like(lifecycle, '"stage":\\s*"revoked"') THEN 'revoked'
      WHEN json_extract_scalar(answer, '$.action') = 'edit' THEN 'edit'
      WHEN json_extract_scalar(answer, '$.action') = 'approve'
        AND json_array_length(json_extract(audit, '$.diff')) > 0 THEN 'edit'
      WHEN json_extract_scalar(answer, '$.action') IN ('approve', 'reject')
        THEN json_extract_scalar(answer, '$.action')
      ELSE 'respond'
    END AS outcome,
    CAST(date_diff(
      'millisecond', from_iso8601_timestamp(created_at), from_iso8601_timestamp(answered_at)
    ) AS double) / 1000 AS seconds_to_answer,
    answer,
    audit,
    expires_at,
    created_at
  FROM latest
)"""


@dataclass(frozen=True)
class Report:
    """One saved report: its name (the named query's, and ``--report NAME``), what it answers, its SQL."""

    name: str
    description: str
    select: str

    @property
    def sql(self) -> str:
        """The whole statement: the shared ``latest`` and ``decided`` steps, then this report's select."""
        return f"WITH {LATEST},\n{DECISIONS}\n{self.select.strip()}\n"


_REPORTS = (
    Report(
        "decisions-per-day",
        "Questions decided each day, by question kind and outcome (approve, edit, reject, respond, "
        "expired, revoked)",
        """
SELECT day, kind, outcome, count(*) AS decisions
FROM decided
GROUP BY day, kind, outcome
ORDER BY day, kind, outcome
""",
    ),
    Report(
        "approvals-by-function",
        "Who decided what for each function a @wait call proposed: the outcome, when, the arguments "
        "authorized and whether the call ran",
        """
SELECT function_name, question_id, answered_by, outcome, answered_at,
       json_format(json_extract(audit, '$.authorized.args')) AS authorized_args,
       json_extract_scalar(audit, '$.receipt.ran') AS ran
FROM decided
WHERE function_name IS NOT NULL
ORDER BY function_name, answered_at, question_id
""",
    ),
    Report(
        "responders",
        "Per person who answered: how many, how often each outcome, and the time to answer "
        "(p50, p90, max seconds); a high approval rate answered fast is the rubber stamp to look at",
        """
SELECT answered_by,
       count(*) AS decisions,
       count_if(outcome = 'approve') AS approved,
       count_if(outcome = 'edit') AS edited,
       count_if(outcome = 'reject') AS rejected,
       count_if(outcome = 'respond') AS responded,
       round(100 * CAST(count_if(outcome = 'approve') AS double) / count(*), 1) AS approve_pct,
       round(approx_percentile(seconds_to_answer, 0.5), 3) AS p50_seconds,
       round(approx_percentile(seconds_to_answer, 0.9), 3) AS p90_seconds,
       round(max(seconds_to_answer), 3) AS max_seconds
FROM decided
WHERE outcome NOT IN ('expired', 'revoked')
GROUP BY answered_by
ORDER BY decisions DESC, answered_by
""",
    ),
    Report(
        "expired",
        "Questions nobody answered in time: the answer the expiry applied and whether it was the "
        "policy's default (else the rejection an expiry applies without one)",
        f"""
SELECT question_id, function_name, kind, created_at, expires_at, answered_at AS expired_at,
       answer <> {_NO_DEFAULT} AS default_applied,
       answer
FROM decided
WHERE outcome = 'expired'
ORDER BY answered_at, question_id
""",
    ),
    Report(
        "edited-fields",
        "Which arguments people change before approving, per function: each field's edits "
        "(from the audit's JSON Patch diff) and how many people made them",
        """
SELECT function_name, field, count(*) AS edits, count(DISTINCT answered_by) AS editors
FROM decided
CROSS JOIN UNNEST(
  regexp_extract_all(json_format(json_extract(audit, '$.diff')), '"path":\\s*"((?:[^"\\\\]|\\\\.)*)"', 1)
) AS edited(field)
WHERE outcome = 'edit'
GROUP BY function_name, field
ORDER BY function_name, edits DESC, field
""",
    ),
)

REPORTS: dict[str, Report] = {report.name: report for report in _REPORTS}

# Trino functions the reports (and Athena users) call, under DuckDB's names: run before any query.
DUCKDB_MACROS = (
    "CREATE OR REPLACE MACRO json_extract_scalar(j, p) AS json_extract_string(j, p)",
    "CREATE OR REPLACE MACRO json_format(j) AS CAST(j AS VARCHAR)",
    "CREATE OR REPLACE MACRO from_iso8601_timestamp(s) AS CAST(s AS TIMESTAMPTZ)",
    "CREATE OR REPLACE MACRO regexp_like(s, p) AS regexp_matches(s, p)",
    # Athena's approx_percentile on a few rows returns one of them; DuckDB's exact nearest-rank does too.
    "CREATE OR REPLACE MACRO approx_percentile(x, q) AS quantile_disc(x, q)",
)
