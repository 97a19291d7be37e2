"""Cost per million questions from counted calls, at the list prices of :mod:`bench.prices`.

:class:`PerQuestion` holds what one question costs in billable units (measured by the capacity run,
or made up in a test); :func:`itemised` prices each line; :func:`step_functions` prices the same flow
as a Step Functions Standard ``.waitForTaskToken`` workflow: the same Lambda work, ledger and
checkpoints, api requests, announcements, audit archive and logs, without the inbox queue and
Scheduler, plus the workflow's transitions and the task that stores each wait's token on its question.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.prices import PRICES

MILLION = 1_000_000
GIB = 1024**3


@dataclass
class PerQuestion:
    """Billable units per question (averages over a sample)."""

    lambda_requests: dict[str, float] = field(default_factory=dict)  # function → invocations
    lambda_gb_seconds: dict[str, float] = field(default_factory=dict)  # function → GB-s (billed ms)
    dynamodb_wru_tables: float = 0.0
    dynamodb_wru_indexes: float = 0.0
    dynamodb_rru: float = 0.0
    stream_tables: tuple[str, ...] = ()  # tables with a stream (records are free, Lambda reads are free)
    sqs_requests: dict[str, float] = field(default_factory=dict)  # queue → billable requests
    sns_publishes: float = 0.0
    api_requests: float = 0.0
    scheduler_invocations: float = 0.0
    log_bytes: float = 0.0
    firehose_billed_bytes: float = 0.0  # the audit archive's records, each rounded up to 5 KB


@dataclass(frozen=True)
class Line:
    item: str
    quantity: float  # per million questions, in the price's unit
    unit: str
    usd: float  # per million questions


def _each(values: dict[str, float], spec: str) -> str:
    return ", ".join(f"{name} {format(value, spec)}" for name, value in sorted(values.items()))


def _tiered(unit: str, monthly: float | None) -> str:
    """A tiered price's unit, naming the month's volume it was averaged over."""
    return unit if monthly is None else f"{unit}, averaged over the tiers of {monthly:,.3g} a month"


def monthly_volumes(q: PerQuestion, monthly_questions: float | None) -> dict[str, float | None]:
    """The month's volume of each price that has tiers (:data:`bench.prices.PRICES` names, their
    units), at ``monthly_questions`` a month; each ``None`` for ``None`` (a low rate: first tier).

    Examples
    --------
    >>> monthly_volumes(PerQuestion(api_requests=3, log_bytes=2000), 1e6)["apigw_rest_request"]
    3000000.0
    """
    volumes: dict[str, float] = {
        "apigw_rest_request": q.api_requests,
        "lambda_gb_second": sum(q.lambda_gb_seconds.values()),
        "logs_ingested_gb": q.log_bytes / 1e9,
    }
    if monthly_questions is None:
        return dict.fromkeys(volumes)
    return {name: per_question * monthly_questions for name, per_question in volumes.items()}


def itemised(q: PerQuestion, monthly_questions: float | None = None) -> list[Line]:
    """Each cost line per million questions.

    ``monthly_questions``: the questions a month the rate comes to; the prices that fall with the
    month's volume (:attr:`~bench.prices.Price.tiers`) are averaged over the tiers it fills.
    ``None``: their first tier (a low rate).

    Examples
    --------
    >>> lines = itemised(PerQuestion(api_requests=2))
    >>> [(l.item, l.usd) for l in lines if l.usd]
    [('API Gateway REST requests', 7.0)]
    >>> [round(l.usd, 2) for l in itemised(PerQuestion(api_requests=2), 1e9) if l.usd]
    [5.41]
    """
    p = PRICES
    month = monthly_volumes(q, monthly_questions)
    gb_seconds = sum(q.lambda_gb_seconds.values())
    lines = [
        Line(
            f"Lambda requests ({_each(q.lambda_requests, 'g')} per question)",
            sum(q.lambda_requests.values()) * MILLION,
            p["lambda_request"].unit,
            p["lambda_request"].cost(sum(q.lambda_requests.values()) * MILLION),
        ),
        Line(
            f"Lambda GB-s ({_each(q.lambda_gb_seconds, '.3f')} per question)",
            gb_seconds * MILLION,
            _tiered(p["lambda_gb_second"].unit, month["lambda_gb_second"]),
            p["lambda_gb_second"].cost(gb_seconds * MILLION, month["lambda_gb_second"]),
        ),
        Line(
            "DynamoDB writes, tables",
            q.dynamodb_wru_tables * MILLION,
            p["dynamodb_wru"].unit,
            p["dynamodb_wru"].cost(q.dynamodb_wru_tables * MILLION),
        ),
        Line(
            "DynamoDB writes, index replication",
            q.dynamodb_wru_indexes * MILLION,
            p["dynamodb_wru"].unit,
            p["dynamodb_wru"].cost(q.dynamodb_wru_indexes * MILLION),
        ),
        Line(
            "DynamoDB reads (tables and indexes)",
            q.dynamodb_rru * MILLION,
            p["dynamodb_rru"].unit,
            p["dynamodb_rru"].cost(q.dynamodb_rru * MILLION),
        ),
        Line(
            "DynamoDB Streams ("
            + (
                f"on {', '.join(q.stream_tables)}: records free, Lambda trigger reads free"
                if q.stream_tables
                else "none"
            )
            + ")",
            0.0,
            "-",
            0.0,
        ),
    ]
    for queue, requests in sorted(q.sqs_requests.items()):
        lines.append(
            Line(
                f"SQS {queue}",
                requests * MILLION,
                p["sqs_fifo_request"].unit,
                p["sqs_fifo_request"].cost(requests * MILLION),
            )
        )
    lines += [
        Line(
            "SNS publishes",
            q.sns_publishes * MILLION,
            p["sns_publish"].unit,
            p["sns_publish"].cost(q.sns_publishes * MILLION),
        ),
        Line(
            "API Gateway REST requests",
            q.api_requests * MILLION,
            _tiered(p["apigw_rest_request"].unit, month["apigw_rest_request"]),
            p["apigw_rest_request"].cost(q.api_requests * MILLION, month["apigw_rest_request"]),
        ),
        Line(
            "EventBridge Scheduler invocations (create and delete are not billed)",
            q.scheduler_invocations * MILLION,
            p["scheduler_invocation"].unit,
            p["scheduler_invocation"].cost(q.scheduler_invocations * MILLION),
        ),
        Line(
            "CloudWatch Logs ingested",
            q.log_bytes * MILLION / 1e9,
            _tiered(p["logs_ingested_gb"].unit, month["logs_ingested_gb"]),
            p["logs_ingested_gb"].cost(q.log_bytes * MILLION / 1e9, month["logs_ingested_gb"]),
        ),
        Line(
            "Firehose ingestion, audit archive (each record billed as 5 KB)",
            q.firehose_billed_bytes * MILLION / GIB,
            p["firehose_ingested_gb"].unit,
            p["firehose_ingested_gb"].cost(q.firehose_billed_bytes * MILLION / GIB),
        ),
    ]
    return lines


@dataclass(frozen=True)
class TokenTask:
    """The ``WaitForAnswer`` task of the Step Functions flow: one Lambda storing the token on the question."""

    gb_seconds: float  # per invocation
    wru: float  # the question item's update, with its index writes


def step_functions(
    q: PerQuestion,
    transitions: float,
    waits: float,
    token: TokenTask,
    *,
    inbox: str,
    monthly_questions: float | None = None,
) -> list[Line]:
    """The same flow's cost lines as a Standard ``.waitForTaskToken`` workflow, per million questions.

    ``transitions`` and ``waits`` are per question (the transitions walked in the ASL, the
    ``WaitForAnswer`` tasks entered); ``inbox`` is the queue the workflow replaces;
    ``monthly_questions`` as for :func:`itemised` (Step Functions' transitions have one price).
    """
    p = PRICES
    without = PerQuestion(
        lambda_requests=dict(q.lambda_requests),
        lambda_gb_seconds=dict(q.lambda_gb_seconds),
        dynamodb_wru_tables=q.dynamodb_wru_tables,
        dynamodb_wru_indexes=q.dynamodb_wru_indexes,
        dynamodb_rru=q.dynamodb_rru,
        stream_tables=q.stream_tables,
        sqs_requests={k: v for k, v in q.sqs_requests.items() if k != inbox},
        sns_publishes=q.sns_publishes,
        api_requests=q.api_requests,
        scheduler_invocations=0.0,
        log_bytes=q.log_bytes,
        firehose_billed_bytes=q.firehose_billed_bytes,
    )
    lines = [
        line
        for line in itemised(without, monthly_questions)
        if not line.item.startswith("EventBridge Scheduler")
    ]
    lines += [
        Line(
            "Step Functions Standard transitions",
            transitions * MILLION,
            p["sfn_standard_transition"].unit,
            p["sfn_standard_transition"].cost(transitions * MILLION),
        ),
        Line(
            "WaitForAnswer task: Lambda requests",
            waits * MILLION,
            p["lambda_request"].unit,
            p["lambda_request"].cost(waits * MILLION),
        ),
        Line(
            "WaitForAnswer task: Lambda GB-s",
            waits * token.gb_seconds * MILLION,
            p["lambda_gb_second"].unit,
            p["lambda_gb_second"].cost(waits * token.gb_seconds * MILLION),
        ),
        Line(
            "WaitForAnswer task: token written on the question",
            waits * token.wru * MILLION,
            p["dynamodb_wru"].unit,
            p["dynamodb_wru"].cost(waits * token.wru * MILLION),
        ),
    ]
    return lines


def total(lines: list[Line]) -> float:
    return sum(line.usd for line in lines)
