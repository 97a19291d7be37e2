"""Approval analytics: counters kept as decisions happen, read back as figures for a window.

:class:`AnalyticsConsumer` is one more consumer of the ledger's stream
(:mod:`wait_service.stream.ledger_stream`). From the two images of each question change it reads the
*facts* to count (:func:`facts_of`): a question raised, decided (answered by kind, expired with or
without its default, revoked), escalated one rung, or failing to resume. Each fact adds to one
*cell*: the counters of one day, one function, one responder and one escalation rung.

Where the counters live: a table of their own (``STATS`` in :mod:`wait_service.resources`), not
the ledger. A counter written to the ledger would come back through the ledger's stream to the
dispatcher that wrote it (twice the stream's traffic, for nothing), and the ledger has no sort key
to read a window of days with. In the stats table:

- a cell is the item ``pk = stats#<YYYY-MM>#<shard>``, ``sk = <YYYY-MM-DD>#<cell hash>``, with
  ``day``, ``function``, ``responder`` and ``rung`` as attributes and one number per counter.
  ``shard`` is the question id's hash modulo :data:`SHARDS`, so the writes of one busy day,
  and even of one busy cell, spread over :data:`SHARDS` partition keys and items (no hot key);
  a window of days is read with one ``Query`` per month and shard (``sk BETWEEN``), and the
  reader adds the shards' items up;
- every counter is raised with ``ADD`` (atomic, commutative): time to answer too, as the count
  of one of :data:`BUCKET_BOUNDS_MS`, fixed log-spaced buckets (each bound √2 times the one
  before, from 1 s to 2²⁰ s, about 12 days, then one open bucket), so any set of cells adds up to
  the histogram of their union and p50/p90 are read from it (the bound of the bucket the rank
  falls in, never above the max);
- the max cannot be added: it is kept exact by a conditional ``SET tta_max_ms = :v`` (only when
  larger), which is idempotent, so it needs no marker and is simply written again on a retry. A
  process remembers the largest max it saw stored in each cell (it only rises) and skips the write
  of a smaller one.

Once per batch of the stream (:class:`AnalyticsConsumer` is a batch consumer of
:class:`~wait_service.stream.ledger_stream.LedgerStream`): the facts of a batch's records are counted
together, the facts of one cell (day, function, responder, rung) with one ``ADD`` update.

Exactly once under the stream's redelivery: a batch's facts are counted in one
``TransactWriteItems`` holding each fact's marker item ``pk = mark#<question_id>``,
``sk = <fact>`` put on ``attribute_not_exists``, and the cells' updates. A batch handed over again,
whole or in another shape (the mapping retries from a failed record, splits a batch), finds the
markers of the facts it counted before: the transaction is cancelled naming them, they are
dropped and the rest counted; nothing is added twice. Markers expire (``expires_ttl``) after
:data:`MARKER_TTL_DAYS`, well past the stream's 24-hour retention, the longest a record can come
back. A transaction costs twice the write units of its items: per question, its facts' markers
(raised, decided) and its share of the cells' updates.

Examples
--------
>>> answer_kind({"action": "approve", "args": {"amount": 25}}, {"args": {"amount": 40}})
'edit'
>>> edited_fields({"action": "approve", "args": {"amount": 25, "customer": "c-1"}},
...               {"args": {"amount": 40, "customer": "c-1"}})
['amount']
>>> bucket_of(900), bucket_of(1000), bucket_of(1001), BUCKET_BOUNDS_MS[2]
(0, 0, 1, 2000)
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import ClientError
from pydantic import BaseModel, Field

from agent_wait import canonical_json
from agent_wait.aws._attributes import BARE_FUNCTION
from agent_wait.errors import InvalidWindowError
from wait_service.clients import CLIENT_CONFIG
from wait_service.ledger import QuestionRecord, normalize_json, parse_time
from wait_service.ledger.questions import EXPIRED_ANSWER
from wait_service.ledger.table import CONFLICT_BACKOFF_SECONDS, CONFLICT_RETRIES
from wait_service.metric_names import (
    DECISIONS_APPROVED,
    DECISIONS_EDITED,
    DECISIONS_REJECTED,
    DECISIONS_RESPONDED,
    EXPIRED_WITH_DEFAULT,
    EXPIRED_WITHOUT_DEFAULT,
    QUESTIONS_ANSWERED,
    TIME_TO_ANSWER,
    TIME_TO_DECISION,
)
from wait_service.observability import logger, metrics

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from mypy_boto3_dynamodb import DynamoDBClient

    from wait_service.stream.ledger_stream import LedgerChange

AnswerKind = Literal["approve", "edit", "reject", "respond"]
ANSWER_KINDS: tuple[AnswerKind, ...] = ("approve", "edit", "reject", "respond")
# Counter partitions per month: a day's writes (and one cell's) spread over this many keys. At
# 1,000 questions a second a cell takes about 5 WRU a question (its updates and their max), so 16
# keeps each key near 300 WRU/s, under a partition's 1,000. A window's read is one Query per month
# and shard; cells written when there were fewer shards are read all the same.
SHARDS = 16
# Markers outlive the stream's 24-hour retention: a redelivered record always finds its own.
MARKER_TTL_DAYS = 7
# Upper bounds (ms, inclusive) of the time-to-answer buckets: 1 s * sqrt(2)**i, to 2**20 s.
BUCKET_BOUNDS_MS: tuple[int, ...] = tuple(round(1000 * 2 ** (i / 2)) for i in range(41))
# The longest window one request may read (a year and a day).
MAX_WINDOW_DAYS = 366
# Responder of a fact no person made (a question raised): shown as "(none)".
NO_RESPONDER = ""
# How many of the most edited fields the figures name.
TOP_FIELDS = 10
COUNTERS: tuple[str, ...] = (
    "raised",
    "answered",
    *(f"answered_{kind}" for kind in ANSWER_KINDS),
    "expired",
    "expired_default",
    "expired_no_default",
    "revoked",
    "resume_failed",
    "escalated",
    "tta_count",
    "tta_sum_ms",
)
EDITED_PREFIX = "edited:"
BUCKET_PREFIX = "tta_b"
_KIND_METRICS = {
    "approve": DECISIONS_APPROVED,
    "edit": DECISIONS_EDITED,
    "reject": DECISIONS_REJECTED,
    "respond": DECISIONS_RESPONDED,
}


def bucket_of(ms: int) -> int:
    """The index of the time-to-answer bucket holding ``ms`` (``len(BUCKET_BOUNDS_MS)``: beyond)."""
    for index, bound in enumerate(BUCKET_BOUNDS_MS):
        if ms <= bound:
            return index
    return len(BUCKET_BOUNDS_MS)


def _same(a: Any, b: Any) -> bool:
    return canonical_json(normalize_json(a)) == canonical_json(normalize_json(b))


def _proposed_args(question: Any) -> Mapping[str, Any] | None:
    args = question.get("args") if isinstance(question, Mapping) else None
    return args if isinstance(args, Mapping) else None


def edited_fields(answer: Any, question: Any) -> list[str]:
    """The fields a person changed in ``answer``, sorted; empty when the answer changed nothing.

    An approval's ``args`` name the arguments it overrides: those whose value differs from the
    proposed call's are edited. An ``edit`` policy's answer replaces the proposed ``value``.
    """
    if not isinstance(answer, Mapping):
        return []
    action = answer.get("action")
    if action == "edit":
        return ["value"]
    args = answer.get("args")
    if action != "approve" or not isinstance(args, Mapping):
        return []
    proposed = _proposed_args(question)
    if proposed is None:
        return sorted(str(key) for key in args)
    return sorted(
        str(key) for key, value in args.items() if key not in proposed or not _same(value, proposed[key])
    )


def answer_kind(answer: Any, question: Any = None) -> AnswerKind:
    """What a person's answer did: ``approve``, ``edit`` (approve with changes), ``reject``, ``respond``.

    A choice, a text or a LangChain ``respond`` answers without approving or rejecting a proposal:
    ``respond``. An approval whose ``args`` change nothing is an ``approve``.
    """
    if isinstance(answer, Mapping):
        action = answer.get("action")
        if action == "reject":
            return "reject"
        if action in ("approve", "edit"):
            return "edit" if edited_fields(answer, question) else "approve"
    return "respond"


def function_of(question: Any) -> str:
    name = question.get("function") if isinstance(question, Mapping) else None
    return name if isinstance(name, str) and name else BARE_FUNCTION


def _day(stamp: str | None, fallback: str | None = None) -> str:
    value = stamp or fallback
    if not value:
        return datetime.now(UTC).date().isoformat()
    return parse_time(value).astimezone(UTC).date().isoformat()


def time_to_answer_ms(question: QuestionRecord) -> int | None:
    if not question.created_at or not question.answered_at:
        return None
    waited = parse_time(question.answered_at) - parse_time(question.created_at)
    return max(0, round(waited.total_seconds() * 1000))


@dataclass(frozen=True)
class Fact:
    """One thing to count once: ``event`` of question ``question_id``, added to one cell."""

    question_id: str
    event: str
    day: str
    function: str
    responder: str
    rung: int
    counters: Mapping[str, int]
    time_to_answer_ms: int | None = None
    kind: str | None = None


def _stages(question: QuestionRecord, stage: str) -> list[Mapping[str, Any]]:
    return [e for e in question.lifecycle if isinstance(e, Mapping) and e.get("stage") == stage]


def decision_fact(question: QuestionRecord) -> Fact:
    """The fact of a question's decision (answered, expired or revoked), from the item that holds it."""
    base: dict[str, Any] = {
        "question_id": question.question_id,
        "event": "decided",
        "day": _day(question.answered_at, question.updated_at),
        "function": function_of(question.question),
        "responder": question.answered_by or NO_RESPONDER,
        "rung": question.escalation,
    }
    if question.status == "expired":
        applied = "expired_default" if question.answer != EXPIRED_ANSWER else "expired_no_default"
        return Fact(**base, counters={"expired": 1, applied: 1}, kind=applied)
    if question.status == "revoked":
        return Fact(**base, counters={"revoked": 1}, kind="revoked")
    kind = answer_kind(question.answer, question.question)
    counters: dict[str, int] = {"answered": 1, f"answered_{kind}": 1}
    for name in edited_fields(question.answer, question.question) if kind == "edit" else ():
        counters[EDITED_PREFIX + name] = 1
    waited = time_to_answer_ms(question)
    if waited is not None:
        counters |= {"tta_count": 1, "tta_sum_ms": waited, f"{BUCKET_PREFIX}{bucket_of(waited):02d}": 1}
    return Fact(**base, counters=counters, time_to_answer_ms=waited, kind=kind)


def facts_of(change: LedgerChange) -> list[Fact]:
    """What a ledger change gives to count (nothing for most changes)."""
    if change.kind != "question" or change.new is None:
        return []
    question = QuestionRecord.from_item(change.new)
    old = QuestionRecord.from_item(change.old) if change.old else None
    cell: dict[str, Any] = {"question_id": question.question_id, "function": function_of(question.question)}
    facts: list[Fact] = []
    if old is None and question.status == "raised":
        facts.append(
            Fact(
                **cell,
                event="raised",
                day=_day(question.created_at, question.updated_at),
                responder=NO_RESPONDER,
                rung=0,
                counters={"raised": 1},
            )
        )
    if change.decided:
        facts.append(decision_fact(question))
    if question.status == "escalated" and question.escalation > (old.escalation if old else 0):
        facts.append(
            Fact(
                **cell,
                event=f"escalated:{question.escalation}",
                day=_day(question.updated_at),
                responder=NO_RESPONDER,
                rung=question.escalation,
                counters={"escalated": 1},
            )
        )
    failed = _stages(question, "resume_failed")
    if failed and not (old and _stages(old, "resume_failed")):
        facts.append(
            Fact(
                **cell,
                event="resume_failed",
                day=_day(str(failed[0].get("at") or ""), question.updated_at),
                responder=question.answered_by or NO_RESPONDER,
                rung=question.escalation,
                counters={"resume_failed": 1},
            )
        )
    return facts


def shard_of(question_id: str) -> int:
    return int(hashlib.sha256(question_id.encode()).hexdigest()[:8], 16) % SHARDS


def cell_key(fact: Fact) -> dict[str, dict[str, str]]:
    """The counters item a fact adds to (see the module's docstring)."""
    cell = hashlib.sha256(f"{fact.function}\x1f{fact.responder}\x1f{fact.rung}".encode()).hexdigest()[:20]
    return {
        "pk": {"S": f"stats#{fact.day[:7]}#{shard_of(fact.question_id)}"},
        "sk": {"S": f"{fact.day}#{cell}"},
    }


class StatsStore:
    """Counts facts into the stats table and reads cells back.

    Parameters
    ----------
    table_name:
        The stats table (``AGENT_WAIT_STATS_TABLE``).
    client:
        A boto3 DynamoDB client (``None``: the default one).
    clock:
        Current UTC time, for the markers' expiry.

    Examples
    --------
    >>> store = StatsStore("agent-wait-stats")  # doctest: +SKIP
    >>> store.count(fact)  # doctest: +SKIP
    True
    """

    def __init__(
        self,
        table_name: str,
        client: DynamoDBClient | None = None,
        *,
        clock: Any = lambda: datetime.now(UTC),
    ) -> None:
        if client is None:
            import boto3

            client = boto3.client("dynamodb", config=CLIENT_CONFIG)
        self.table_name = table_name
        self.client = client
        self.clock = clock
        # Waits between tries of a transaction another one was writing a cell of; tests replace it.
        self._sleep: Callable[[float], None] = time.sleep
        # Per cell, a max time to answer this process saw stored (it only rises): a smaller one
        # needs no write.
        self._maxima: dict[CellKey, int] = {}

    def count(self, fact: Fact) -> bool:
        """Add ``fact`` to its cell once; ``False`` when its marker shows it was counted already."""
        return bool(self.count_all([fact]))

    def count_all(self, facts: Sequence[Fact]) -> list[Fact]:
        """Add each of ``facts`` to its cell once; the facts counted now (the others were already).

        The facts of one cell (day, function, responder, rung) are added with one update; that update
        and every fact's marker are one ``TransactWriteItems`` (at most :data:`TRANSACTION_ITEMS`
        items), so a fact is counted with its marker or not at all. A cancelled transaction names
        the markers that existed: those facts are dropped and the rest counted again. One cancelled
        because another transaction was writing one of its items (the dispatcher's invocations of
        other stream shards count into the same cells at once) wrote nothing: it is tried again after
        25, 50 and 100 ms before the batch is failed.
        """
        unique = list({(f.question_id, f.event): f for f in facts}.values())
        counted: list[Fact] = []
        for chunk in _chunks(unique):
            counted += self._count_chunk(chunk)
        # Idempotent, so written for every fact handed over, counted now or before (a crash may
        # have come between the count and its max); skipped when the cell's max is known larger.
        for cell, ms in _maxima(unique).items():
            self._raise_max(cell, ms)
        return counted

    def _count_chunk(self, facts: list[Fact]) -> list[Fact]:
        expires = int((self.clock() + timedelta(days=MARKER_TTL_DAYS)).timestamp())
        conflicts = 0
        while facts:
            markers: list[Any] = [
                {
                    "Put": {
                        "TableName": self.table_name,
                        "Item": {
                            "pk": {"S": f"mark#{fact.question_id}"},
                            "sk": {"S": fact.event},
                            "expires_ttl": {"N": str(expires)},
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
                for fact in facts
            ]
            updates: list[Any] = [self._cell_update(cell, group) for cell, group in _by_cell(facts).items()]
            try:
                self.client.transact_write_items(TransactItems=[*markers, *updates])
            except ClientError as exc:
                if _in_conflict(exc) and conflicts < CONFLICT_RETRIES:
                    conflicts += 1
                    self._sleep(CONFLICT_BACKOFF_SECONDS * 2 ** (conflicts - 1))
                    continue
                existed = _markers_existed(exc, len(facts))
                if not existed:
                    raise
                for index in existed:
                    logger.info(
                        "fact counted already",
                        extra={"question_id": facts[index].question_id, "fact": facts[index].event},
                    )
                facts = [fact for index, fact in enumerate(facts) if index not in existed]
                continue
            return facts
        return []

    def _cell_update(self, cell: CellKey, facts: list[Fact]) -> dict[str, Any]:
        first = facts[0]
        counters: Counter[str] = Counter()
        for fact in facts:
            counters.update(fact.counters)
        names = {"#day": "day", "#fn": "function", "#rs": "responder", "#rung": "rung"}
        values: dict[str, Any] = {
            ":day": {"S": first.day},
            ":fn": {"S": first.function},
            ":rs": {"S": first.responder},
            ":rung": {"N": str(first.rung)},
        }
        adds: list[str] = []
        for index, (name, amount) in enumerate(sorted(counters.items())):
            names[f"#c{index}"] = name
            values[f":c{index}"] = {"N": str(amount)}
            adds.append(f"#c{index} :c{index}")
        return {
            "Update": {
                "TableName": self.table_name,
                "Key": _key(cell),
                "UpdateExpression": "SET #day = :day, #fn = :fn, #rs = :rs, #rung = :rung ADD "
                + ", ".join(adds),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }

    def _raise_max(self, cell: CellKey, ms: int) -> None:
        if self._maxima.get(cell, -1) >= ms:
            return  # the stored max is at least what this process last saw there: already larger
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=_key(cell),
                UpdateExpression="SET tta_max_ms = :v",
                ConditionExpression=(
                    "attribute_exists(pk) AND (attribute_not_exists(tta_max_ms) OR tta_max_ms < :v)"
                ),
                ExpressionAttributeValues={":v": {"N": str(ms)}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            stored = (exc.response.get("Item") or {}).get("tta_max_ms", {}).get("N")  # type: ignore[attr-defined]
            if stored is not None:
                self._maxima[cell] = max(self._maxima.get(cell, -1), int(stored))
            return
        self._maxima[cell] = ms

    def cells(self, since: date, until: date) -> Iterator[dict[str, Any]]:
        """Every counters item of the days ``since`` to ``until`` (inclusive), as plain values."""
        month = date(since.year, since.month, 1)
        while month <= until:
            for shard in range(SHARDS):
                yield from self._query(f"stats#{month:%Y-%m}#{shard}", since, until)
            month = date(month.year + month.month // 12, month.month % 12 + 1, 1)

    def _query(self, pk: str, since: date, until: date) -> Iterator[dict[str, Any]]:
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {
                ":pk": {"S": pk},
                ":lo": {"S": f"{since.isoformat()}#"},
                ":hi": {"S": f"{until.isoformat()}#~"},
            },
        }
        while True:
            page = self.client.query(**request)
            for item in page.get("Items", []):
                yield {
                    name: (int(value["N"]) if "N" in value else value.get("S"))
                    for name, value in item.items()
                    if "N" in value or "S" in value
                }
            if "LastEvaluatedKey" not in page:
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


# DynamoDB takes at most this many items in one TransactWriteItems.
TRANSACTION_ITEMS = 100


CellKey = tuple[str, str]  # (pk, sk) of a counters item


def _key(cell: CellKey) -> dict[str, dict[str, str]]:
    return {"pk": {"S": cell[0]}, "sk": {"S": cell[1]}}


def _by_cell(facts: Iterable[Fact]) -> dict[CellKey, list[Fact]]:
    """Facts grouped by the counters item they add to: the cell of their group's first fact.

    The shard of a group is its first fact's (the reader adds every shard of a cell up, so any
    shard is right); the facts of one day, function, responder and rung share one update.
    """
    groups: dict[tuple[str, str, str, int], list[Fact]] = defaultdict(list)
    for fact in facts:
        groups[(fact.day, fact.function, fact.responder, fact.rung)].append(fact)
    cells: dict[CellKey, list[Fact]] = {}
    for group in groups.values():
        key = cell_key(group[0])
        cells[(key["pk"]["S"], key["sk"]["S"])] = group
    return cells


def _chunks(facts: list[Fact]) -> Iterator[list[Fact]]:
    """Facts in runs whose markers and cell updates fit one transaction."""
    chunk: list[Fact] = []
    for fact in facts:
        if chunk and len(chunk) + 1 + len(_by_cell([*chunk, fact])) > TRANSACTION_ITEMS:
            yield chunk
            chunk = []
        chunk.append(fact)
    if chunk:
        yield chunk


def _maxima(facts: Iterable[Fact]) -> dict[CellKey, int]:
    """The largest time to answer of each cell the facts add to."""
    found: dict[CellKey, int] = {}
    for key, group in _by_cell(facts).items():
        times = [f.time_to_answer_ms for f in group if f.time_to_answer_ms is not None]
        if times:
            found[key] = max(times)
    return found


def _in_conflict(exc: ClientError) -> bool:
    """Whether a transaction was cancelled because another was writing one of its items."""
    if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return False
    return any(
        reason.get("Code") == "TransactionConflict"
        for reason in exc.response.get("CancellationReasons") or []
    )


def _markers_existed(exc: ClientError, markers: int) -> set[int]:
    """The markers (by position) whose condition failed: their facts were counted already.

    Empty when the transaction failed for any other reason (throttled, in conflict): retried whole.
    """
    if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return set()
    reasons = exc.response.get("CancellationReasons") or []
    codes = [str(reason.get("Code") or "None") for reason in reasons]
    existed = {index for index, code in enumerate(codes[:markers]) if code == "ConditionalCheckFailed"}
    if any(code not in ("None", "ConditionalCheckFailed") for code in codes):
        return set()
    return existed


class AnalyticsConsumer:
    """The ledger stream's consumer that keeps the counters (and emits the dashboard's metrics).

    A metric is emitted only for a fact counted now, so a redelivered record adds none.

    Examples
    --------
    >>> consumer = AnalyticsConsumer(StatsStore(table))  # doctest: +SKIP
    >>> LedgerStream([OutboxDispatcher(ledger, inbox), consumer])  # doctest: +SKIP
    """

    name = "analytics"

    def __init__(self, store: StatsStore) -> None:
        self.store = store
        self._facts: list[Fact] = []

    @property
    def pending(self) -> int:
        return len(self._facts)

    def handle(self, change: LedgerChange) -> None:
        """Gather the change's facts; :meth:`flush` counts a batch's facts together."""
        self._facts += facts_of(change)

    def flush(self) -> None:
        facts, self._facts = self._facts, []
        for fact in self.store.count_all(facts) if facts else []:
            if fact.event == "decided":
                _emit(fact)


def _emit(fact: Fact) -> None:
    """The metrics of a decision counted now: how it was decided, and for a person's answer the
    answer itself and how long it waited. Counting answers here, where each decision is counted
    once, rather than in the reply that wrote it, keeps the api's busiest route free of the work
    and counts every decision however it was written (a reply, a quorum's last vote)."""
    if fact.kind in _KIND_METRICS:
        metrics.add_metric(name=_KIND_METRICS[fact.kind], unit=MetricUnit.Count, value=1)
        metrics.add_metric(name=QUESTIONS_ANSWERED, unit=MetricUnit.Count, value=1)
    elif fact.kind == "expired_default":
        metrics.add_metric(name=EXPIRED_WITH_DEFAULT, unit=MetricUnit.Count, value=1)
    elif fact.kind == "expired_no_default":
        metrics.add_metric(name=EXPIRED_WITHOUT_DEFAULT, unit=MetricUnit.Count, value=1)
    if fact.time_to_answer_ms is not None:
        for name in (TIME_TO_ANSWER, TIME_TO_DECISION):
            metrics.add_metric(name=name, unit=MetricUnit.Milliseconds, value=fact.time_to_answer_ms)


# -- reading: cells -> figures -------------------------------------------------------------------


@dataclass
class Tally:
    """Counters of any set of cells, added up; :meth:`figures` turns them into the api's figures."""

    counts: Counter[str] = field(default_factory=Counter)
    max_ms: int | None = None

    def add(self, cell: Mapping[str, Any]) -> None:
        for name, value in cell.items():
            if isinstance(value, int) and (
                name in COUNTERS or name.startswith((EDITED_PREFIX, BUCKET_PREFIX))
            ):
                self.counts[name] += value
        top = cell.get("tta_max_ms")
        if isinstance(top, int):
            self.max_ms = top if self.max_ms is None else max(self.max_ms, top)

    def percentile(self, p: float) -> int | None:
        total = sum(self.counts[f"{BUCKET_PREFIX}{i:02d}"] for i in range(len(BUCKET_BOUNDS_MS) + 1))
        if not total:
            return None
        rank = max(1, math.ceil(p * total))
        seen = 0
        for index in range(len(BUCKET_BOUNDS_MS) + 1):
            seen += self.counts[f"{BUCKET_PREFIX}{index:02d}"]
            if seen >= rank:
                bound = BUCKET_BOUNDS_MS[index] if index < len(BUCKET_BOUNDS_MS) else None
                if bound is None:
                    return self.max_ms
                return bound if self.max_ms is None else min(bound, self.max_ms)
        return self.max_ms

    def buckets(self) -> list[dict[str, int | None]]:
        """The histogram: ``{"le_ms": bound (None: beyond the last), "count": n}`` per bucket."""
        return [
            {
                "le_ms": BUCKET_BOUNDS_MS[i] if i < len(BUCKET_BOUNDS_MS) else None,
                "count": self.counts[f"{BUCKET_PREFIX}{i:02d}"],
            }
            for i in range(len(BUCKET_BOUNDS_MS) + 1)
        ]

    def figures(self) -> dict[str, Any]:
        c = self.counts
        answered = c["answered"]
        edited = sorted(
            (
                (name.removeprefix(EDITED_PREFIX), n)
                for name, n in c.items()
                if name.startswith(EDITED_PREFIX) and n
            ),
            key=lambda pair: (-pair[1], pair[0]),
        )
        return {
            "raised": c["raised"],
            "answered": answered,
            "approve": c["answered_approve"],
            "edit": c["answered_edit"],
            "reject": c["answered_reject"],
            "respond": c["answered_respond"],
            "expired": c["expired"],
            "expired_default": c["expired_default"],
            "expired_no_default": c["expired_no_default"],
            "revoked": c["revoked"],
            "resume_failed": c["resume_failed"],
            "escalated": c["escalated"],
            "edit_rate": round(c["answered_edit"] / answered, 4) if answered else None,
            "approve_rate": round(c["answered_approve"] / answered, 4) if answered else None,
            "time_to_answer": {
                "count": c["tta_count"],
                "p50_ms": self.percentile(0.5),
                "p90_ms": self.percentile(0.9),
                "max_ms": self.max_ms,
                "mean_ms": round(c["tta_sum_ms"] / c["tta_count"]) if c["tta_count"] else None,
            },
            "edited_fields": [{"field": name, "count": n} for name, n in edited[:TOP_FIELDS]],
        }


def summarize(
    cells: Iterable[Mapping[str, Any]],
    *,
    since: date,
    until: date,
    function: str | None = None,
    responder: str | None = None,
) -> dict[str, Any]:
    """The figures of ``cells`` for the window and filters: totals, by day, function, responder, rung.

    Examples
    --------
    >>> cell = {"day": "2026-12-01", "function": "f", "responder": "ann", "rung": 0,
    ...         "answered": 1, "answered_approve": 1, "tta_count": 1, "tta_sum_ms": 1500,
    ...         "tta_b02": 1, "tta_max_ms": 1500}
    >>> s = summarize([cell], since=date(2026, 12, 1), until=date(2026, 12, 1))
    >>> s["totals"]["approve"], s["totals"]["time_to_answer"]["p50_ms"], s["by_responder"][0]["responder"]
    (1, 1500, 'ann')
    """
    total = Tally()
    by: dict[str, dict[Any, Tally]] = {
        name: defaultdict(Tally) for name in ("day", "function", "responder", "rung")
    }
    for cell in cells:
        if function is not None and cell.get("function") != function:
            continue
        if responder is not None and cell.get("responder") != responder:
            continue
        total.add(cell)
        for name, groups in by.items():
            groups[cell.get(name)].add(cell)
    days = [since + timedelta(days=n) for n in range((until - since).days + 1)]
    return {
        "since": since.isoformat(),
        "until": until.isoformat(),
        "function": function,
        "responder": responder,
        "totals": total.figures() | {"buckets": total.buckets()},
        "by_day": [{"day": d.isoformat()} | by["day"][d.isoformat()].figures() for d in days],
        "by_function": [{"function": k} | v.figures() for k, v in sorted(by["function"].items())],
        "by_responder": [
            {"responder": k or None} | v.figures()
            for k, v in sorted(by["responder"].items(), key=lambda kv: str(kv[0]))
            if k
        ],
        "by_rung": [
            {"rung": k} | v.figures() for k, v in sorted(by["rung"].items(), key=lambda kv: int(kv[0] or 0))
        ],
    }


class StatsService:
    """``GET /stats``: the figures of a window of days, optionally of one function or responder.

    Examples
    --------
    >>> service = StatsService(StatsStore("agent-wait-stats"))  # doctest: +SKIP
    >>> service.stats(since=date(2026, 11, 1), until=date(2026, 11, 30))["totals"]["raised"]  # doctest: +SKIP
    """

    def __init__(self, store: StatsStore) -> None:
        self.store = store

    def stats(
        self, *, since: date, until: date, function: str | None = None, responder: str | None = None
    ) -> dict[str, Any]:
        since, until = parse_window(since.isoformat(), until.isoformat(), today=until)
        return summarize(
            self.store.cells(since, until), since=since, until=until, function=function, responder=responder
        )


def parse_window(since: str | None, until: str | None, *, today: date) -> tuple[date, date]:
    """The window ``GET /stats`` reads: ``until`` defaults to ``today``, ``since`` to six days before it.

    Raises
    ------
    InvalidWindowError
        A date that is not ``YYYY-MM-DD``, ``until`` before ``since``, a window over
        :data:`MAX_WINDOW_DAYS` days; ``field`` names the parameter.

    Examples
    --------
    >>> parse_window(None, "2026-12-01", today=date(2026, 12, 5))
    (datetime.date(2026, 11, 25), datetime.date(2026, 12, 1))
    >>> try:
    ...     parse_window("2026-13-01", None, today=date(2026, 12, 5))
    ... except InvalidWindowError as exc:
    ...     print(exc.field)
    since
    """

    def day(name: str, value: str) -> date:
        if not _DATE.fullmatch(value):
            raise InvalidWindowError(f"{name} must be a day as YYYY-MM-DD, not {value[:40]!r}", field=name)
        try:
            return date.fromisoformat(value)
        except ValueError as exc:
            raise InvalidWindowError(f"{name}: {exc}", field=name) from exc

    last = day("until", until) if until is not None else today
    # The week before the first calendar day starts on that day.
    first = (
        day("since", since)
        if since is not None
        else max(last, date.min + timedelta(days=6)) - timedelta(days=6)
    )
    if last < first:
        raise InvalidWindowError("until is before since", field="until")
    if (last - first).days + 1 > MAX_WINDOW_DAYS:
        raise InvalidWindowError(f"a window is at most {MAX_WINDOW_DAYS} days", field="since")
    return first, last


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


# -- the api's view of the figures (its OpenAPI schema) -------------------------------------------


class TimeToAnswerView(BaseModel):
    count: int = Field(description="answers by a person with a known time to answer")
    p50_ms: int | None = Field(description="median, from the histogram: its bucket's bound, never above max")
    p90_ms: int | None = None
    max_ms: int | None = None
    mean_ms: int | None = None


class EditedFieldView(BaseModel):
    field: str
    count: int


class FiguresView(BaseModel):
    raised: int
    answered: int = Field(description="answered by a person: approve + edit + reject + respond")
    approve: int
    edit: int = Field(description="approved with changed arguments (or an edit policy's new value)")
    reject: int
    respond: int = Field(description="a choice, a text, a LangChain `respond`")
    expired: int
    expired_default: int = Field(description="expired with the policy's default answer applied")
    expired_no_default: int = Field(description="expired with no default: the thread got a rejection")
    revoked: int
    resume_failed: int
    escalated: int = Field(description="rungs climbed")
    edit_rate: float | None = Field(description="edit / answered")
    approve_rate: float | None = Field(description="approve (unchanged) / answered")
    time_to_answer: TimeToAnswerView
    edited_fields: list[EditedFieldView] = Field(description="the fields most often edited, most first")


class BucketView(BaseModel):
    le_ms: int | None = Field(description="the bucket's upper bound (inclusive); null: beyond the last")
    count: int


class TotalsView(FiguresView):
    buckets: list[BucketView] = Field(description="the time-to-answer histogram of the window")


class DayFigures(FiguresView):
    day: str


class FunctionFigures(FiguresView):
    function: str


class ResponderFigures(FiguresView):
    responder: str


class RungFigures(FiguresView):
    rung: int


class StatsView(BaseModel):
    """``GET /stats``: the window's figures, and the same figures by day, function, responder, rung."""

    since: str
    until: str
    function: str | None = None
    responder: str | None = None
    totals: TotalsView
    by_day: list[DayFigures]
    by_function: list[FunctionFigures]
    by_responder: list[ResponderFigures] = Field(description="who decided: people, system:expiry, revokers")
    by_rung: list[RungFigures]
