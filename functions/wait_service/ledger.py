"""The question ledger: one DynamoDB table holding questions and threads (docs/internals.md).

The library's ``DynamoDbAnnounce`` writes a question item first; from then on only this module
moves it, always with a conditional write on the current ``status``, so two racing writers can
never both win (the first answer stands). Thread items share the table under ``thread:<id>``
keys and never carry ``status`` or ``created_at``, so the sparse indexes never list them.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from agent_wait.aws.dynamodb import to_attribute
from agent_wait.errors import InvalidRequestError, QuestionNotFoundError, ThreadBusyError, ThreadNotFoundError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from pydantic import JsonValue

Clock = Callable[[], datetime]

# Statuses from which a human may still answer. `escalated` forwards the question to other
# responders; it does not close it.
ANSWERABLE = ("raised", "delivered", "escalated")
# The `status` filter that lists every question still waiting for an answer.
PENDING = "pending"
ANSWERED = ("answered", "resumed", "resume_failed")
CLOSED = ("expired", "revoked")
RunStatus = Literal["queued", "running", "interrupted", "done", "failed"]
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
MAX_PAGE = 100

_deserializer = TypeDeserializer()


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """ISO-8601 UTC with a ``Z``, millisecond precision: sortable as a string.

    Examples
    --------
    >>> iso(datetime(2026, 11, 30, 10, 0, tzinfo=UTC))
    '2026-11-30T10:00:00.000Z'
    """
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(value: str) -> datetime:
    """Parse an ISO-8601 timestamp (``Z`` or offset); naive values are taken as UTC."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def question_key(question_id: str) -> str:
    return f"wait.created:{question_id}"


def thread_key(thread_id: str) -> str:
    return f"thread:{thread_id}"


def _from_dynamo_native(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Mapping):
        return {k: _from_dynamo_native(v) for k, v in value.items()}
    if isinstance(value, list | set | tuple):
        return [_from_dynamo_native(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return value.decode()
    return value


def from_attribute(value: Any) -> Any:
    """A DynamoDB attribute value (low-level format) as a JSON value (Decimals → int/float)."""
    return _from_dynamo_native(_deserializer.deserialize(value))


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: from_attribute(value) for name, value in item.items()}


def normalize_json(value: Any) -> Any:
    """The value as it reads back from the ledger, so that stored and new answers compare equal.

    Examples
    --------
    >>> normalize_json({"amount": 25.0, "ok": True})
    {'amount': 25, 'ok': True}
    """
    return from_attribute(to_attribute(value))


def encode_token(last_key: Mapping[str, Any]) -> str:
    """An opaque page token: url-safe base64 of the ``LastEvaluatedKey`` JSON."""
    return base64.urlsafe_b64encode(json.dumps(last_key, sort_keys=True).encode()).decode()


def decode_pending_token(token: str) -> dict[str, Any]:
    """The per-status positions of a ``status=pending`` page token."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, binascii.Error) as exc:
        raise InvalidRequestError("next is not a page token", field="next") from exc
    positions = decoded.get(PENDING) if isinstance(decoded, dict) else None
    if not isinstance(positions, dict) or set(positions) != set(ANSWERABLE):
        raise InvalidRequestError("next is not a page token of status=pending", field="next")
    return positions


def decode_token(token: str) -> dict[str, Any]:
    """Invert :func:`encode_token`; anything else is an :class:`InvalidRequestError` on ``next``."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, binascii.Error) as exc:
        raise InvalidRequestError("next is not a page token", field="next") from exc
    valid = isinstance(decoded, dict) and all(
        isinstance(v, dict) and len(v) == 1 and all(isinstance(x, str) for x in v.values())
        for v in decoded.values()
    )
    if not valid or "dedupe_key" not in decoded:
        raise InvalidRequestError("next is not a page token", field="next")
    return decoded


@dataclass(frozen=True)
class QuestionRecord:
    """A question item as read from the ledger."""

    question_id: str
    thread_id: str
    status: str
    digest: str
    question: JsonValue
    policy: dict[str, Any]
    source: dict[str, Any] | None
    created_at: str | None
    expires_at: str | None
    updated_at: str | None
    lifecycle: list[dict[str, Any]]
    answer: JsonValue = None
    answered_by: str | None = None
    answered_at: str | None = None
    reason: str | None = None
    resume_enqueued_at: str | None = None

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> QuestionRecord:
        data = from_item(item)
        return cls(
            question_id=str(data["question_id"]),
            thread_id=str(data.get("thread_id", "")),
            status=str(data.get("status", "raised")),
            digest=str(data.get("digest", "")),
            question=data.get("question"),
            policy=dict(data.get("policy") or {}),
            source=data.get("source"),
            created_at=data.get("created_at"),
            expires_at=data.get("expires_at"),
            updated_at=data.get("updated_at"),
            lifecycle=list(data.get("lifecycle") or []),
            answer=data.get("answer"),
            answered_by=data.get("answered_by"),
            answered_at=data.get("answered_at"),
            reason=data.get("reason"),
            resume_enqueued_at=data.get("resume_enqueued_at"),
        )

    def expired_at(self, now: datetime) -> bool:
        """True when the question has an expiry and it has passed at ``now``."""
        return self.expires_at is not None and parse_time(self.expires_at) <= now


@dataclass(frozen=True)
class ThreadRecord:
    """A thread item: the status of the thread's last run."""

    thread_id: str
    run_status: RunStatus
    pending: list[str] = field(default_factory=list)
    output: JsonValue = None
    error: str | None = None
    updated_at: str | None = None
    started_at: str | None = None
    # Runs that reached the thread while it waited on a question, oldest first: (run_id, input).
    deferred: list[DeferredRun] = field(default_factory=list)

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> ThreadRecord:
        data = from_item(item)
        raw_output = data.get("output")
        run_status = data.get("run_status")
        return cls(
            thread_id=str(data["thread_id"]),
            run_status=cast("RunStatus", run_status) if run_status in RUN_STATUSES else "queued",
            pending=[str(p) for p in data.get("pending") or []],
            output=json.loads(raw_output) if isinstance(raw_output, str) else None,
            error=data.get("error"),
            updated_at=data.get("updated_at"),
            started_at=data.get("started_at"),
            deferred=[
                DeferredRun(str(run["run_id"]), json.loads(run["input"]))
                for run in data.get("deferred") or []
            ],
        )


@dataclass(frozen=True)
class DeferredRun:
    """A run waiting for its thread's questions to be answered and its current run to end."""

    run_id: str
    input: JsonValue


@dataclass(frozen=True)
class Page:
    items: list[QuestionRecord]
    next: str | None


class Ledger:
    """Reads and moves question and thread items in the ledger table.

    Parameters
    ----------
    table_name:
        The ledger table (``AGENT_WAIT_LEDGER_TABLE``).
    client:
        A boto3 DynamoDB client; ``None`` creates the default one.
    clock:
        Returns the current UTC time; injected by tests.
    ttl_days:
        Days after which an ended question or a finished thread is removed by DynamoDB TTL.

    Examples
    --------
    >>> ledger = Ledger("agent-wait-ledger")  # doctest: +SKIP
    >>> ledger.record_answer("q-1", {"action": "approve"}, answered_by="ann")  # doctest: +SKIP
    True
    """

    def __init__(
        self,
        table_name: str,
        client: DynamoDBClient | None = None,
        *,
        clock: Clock = utcnow,
        ttl_days: int = 90,
    ) -> None:
        if client is None:
            import boto3

            client = boto3.client("dynamodb")
        self.table_name = table_name
        self._client = client
        self._clock = clock
        self._ttl = timedelta(days=ttl_days)

    # -- questions ---------------------------------------------------------------------------

    def get_question(self, question_id: str) -> QuestionRecord:
        """The question, read consistently; :class:`QuestionNotFoundError` when there is none."""
        item = self._get(question_key(question_id))
        if item is None or from_attribute(item.get("kind", {"S": "question"})) != "question":
            raise QuestionNotFoundError(f"no question {question_id}", question_id=question_id)
        return QuestionRecord.from_item(item)

    def list_questions(
        self,
        *,
        status: str | None = None,
        thread_id: str | None = None,
        limit: int = 50,
        next_token: str | None = None,
    ) -> Page:
        """One page of questions, newest first, filtered by status and/or thread.

        ``next`` is ``None`` on the last page. With neither filter the sparse ``by-status`` index
        is scanned, which holds questions only.
        """
        limit = max(1, min(limit, MAX_PAGE))
        if status == PENDING and thread_id is None:
            return self._list_pending(limit, next_token)
        kwargs: dict[str, Any] = {"TableName": self.table_name, "Limit": limit}
        if next_token:
            kwargs["ExclusiveStartKey"] = decode_token(next_token)
        if thread_id is not None:
            kwargs |= {
                "IndexName": "by-thread",
                "KeyConditionExpression": "thread_id = :t",
                "ExpressionAttributeValues": {":t": {"S": thread_id}},
                "ScanIndexForward": False,
            }
            if status is not None:
                wanted = ANSWERABLE if status == PENDING else (status,)
                names = [f":s{i}" for i in range(len(wanted))]
                kwargs["FilterExpression"] = f"#s IN ({', '.join(names)})"
                kwargs["ExpressionAttributeNames"] = {"#s": "status"}
                kwargs["ExpressionAttributeValues"] |= {
                    n: {"S": w} for n, w in zip(names, wanted, strict=True)
                }
            response = self._client.query(**kwargs)
        elif status is not None:
            kwargs |= {
                "IndexName": "by-status",
                "KeyConditionExpression": "#s = :s",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": {":s": {"S": status}},
                "ScanIndexForward": False,
            }
            response = self._client.query(**kwargs)
        else:
            response = self._client.scan(IndexName="by-status", **kwargs)
        last = response.get("LastEvaluatedKey")
        return Page(
            items=[QuestionRecord.from_item(item) for item in response.get("Items", [])],
            next=encode_token(last) if last else None,
        )

    def _list_pending(self, limit: int, next_token: str | None) -> Page:
        """Newest first across the ``by-status`` partitions of every answerable status.

        Each partition is read newest first from where the last page left it; the newest
        ``limit`` of what comes back form the page, and the token remembers, per partition, the
        last item taken (``None``: nothing taken yet; ``"end"``: read to the end).
        """
        starts = decode_pending_token(next_token) if next_token else dict.fromkeys(ANSWERABLE)
        fetched: dict[str, list[dict[str, Any]]] = {}
        more: dict[str, bool] = {}
        for status, start in starts.items():
            if start == "end":
                continue
            kwargs: dict[str, Any] = {
                "TableName": self.table_name,
                "IndexName": "by-status",
                "KeyConditionExpression": "#s = :s",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": {":s": {"S": status}},
                "ScanIndexForward": False,
                "Limit": limit,
            }
            if start is not None:
                kwargs["ExclusiveStartKey"] = start
            response = self._client.query(**kwargs)
            fetched[status] = response.get("Items", [])
            more[status] = "LastEvaluatedKey" in response

        def newest_first(entry: tuple[str, dict[str, Any]]) -> tuple[str, str]:
            item = entry[1]
            return (item["created_at"]["S"], item["dedupe_key"]["S"])

        merged = sorted(
            ((status, item) for status, items in fetched.items() for item in items),
            key=newest_first,
            reverse=True,
        )
        page = merged[:limit]
        positions: dict[str, Any] = dict(starts)
        for status, items in fetched.items():
            taken = [item for s, item in page if s == status]
            if taken:
                last = taken[-1]
                positions[status] = {k: last[k] for k in ("dedupe_key", "status", "created_at")}
            if len(taken) == len(items) and not more[status]:
                positions[status] = "end"
        done = all(position == "end" for position in positions.values())
        return Page(
            items=[QuestionRecord.from_item(item) for _, item in page],
            next=None if done else encode_token({PENDING: positions}),
        )

    def record_answer(
        self, question_id: str, answer: JsonValue, *, answered_by: str, reason: str | None = None
    ) -> QuestionRecord | None:
        """Move an answerable question to ``answered`` with its answer.

        Returns ``None`` when this answer was recorded; when the conditional write lost (someone
        answered or closed it first), the question as it stood then, from the failed write itself
        (``ReturnValuesOnConditionCheckFailure``), so the loser needs no second read.
        """
        now = iso(self._clock())
        extra: dict[str, Any] = {"answer": answer, "answered_by": answered_by, "answered_at": now}
        if reason is not None:
            extra["reason"] = reason
        try:
            self._move(
                question_id, "answered", ANSWERABLE, actor=answered_by, extra=extra, raise_on_loss=True
            )
        except ClientError as exc:
            item = cast("Mapping[str, Any] | None", exc.response.get("Item"))
            if not item:
                raise QuestionNotFoundError(f"no question {question_id}", question_id=question_id) from exc
            return QuestionRecord.from_item(item)
        return None

    def mark_resume_enqueued(self, question_id: str) -> None:
        """Note that the resume message for the recorded answer reached the inbox."""
        self._client.update_item(
            TableName=self.table_name,
            Key={"dedupe_key": {"S": question_key(question_id)}},
            UpdateExpression="SET resume_enqueued_at = :now",
            ConditionExpression="attribute_exists(dedupe_key)",
            ExpressionAttributeValues={":now": {"S": iso(self._clock())}},
        )

    def mark_delivered(self, question_id: str, *, actor: str = "runner") -> bool:
        """``raised → delivered`` once every sink took the envelope."""
        return self._move(question_id, "delivered", ("raised",), actor=actor)

    def mark_resumed(self, question_id: str, *, actor: str = "runner") -> bool:
        """``answered → resumed`` after the resume run succeeded (also after a DLQ redrive)."""
        return self._move(question_id, "resumed", ("answered", "resume_failed"), actor=actor, ends=True)

    def mark_resume_failed(self, question_id: str, error: str, *, actor: str = "runner") -> bool:
        """``answered → resume_failed`` when the last delivery attempt of the resume failed."""
        return self._move(question_id, "resume_failed", ("answered",), actor=actor, extra={"error": error})

    def mark_expired(self, question_id: str, *, actor: str = "api") -> bool:
        """Close an unanswered question whose ``expires_at`` passed."""
        return self._move(question_id, "expired", ANSWERABLE, actor=actor, ends=True)

    def _move(
        self,
        question_id: str,
        to: str,
        allowed_from: Iterable[str],
        *,
        actor: str,
        extra: Mapping[str, Any] | None = None,
        ends: bool = False,
        raise_on_loss: bool = False,
    ) -> bool:
        """Conditionally move a question; ``False`` (or, with ``raise_on_loss``, the
        ``ConditionalCheckFailedException`` carrying the old item) when it is not in ``allowed_from``.
        """
        now = self._clock()
        stamp = iso(now)
        names = {"#s": "status"}
        values: dict[str, Any] = {
            ":to": {"S": to},
            ":now": {"S": stamp},
            ":empty": {"L": []},
            ":stage": to_attribute([{"stage": to, "at": stamp, "actor": actor}]),
        }
        sets = [
            "#s = :to",
            "updated_at = :now",
            "lifecycle = list_append(if_not_exists(lifecycle, :empty), :stage)",
        ]
        for index, (name, value) in enumerate((extra or {}).items()):
            names[f"#x{index}"] = name
            values[f":x{index}"] = to_attribute(value)
            sets.append(f"#x{index} = :x{index}")
        if ends:
            values[":ttl"] = {"N": str(int((now + self._ttl).timestamp()))}
            sets.append("expires_ttl = :ttl")
        allowed = list(allowed_from)
        for index, status in enumerate(allowed):
            values[f":f{index}"] = {"S": status}
        condition = (
            f"attribute_exists(dedupe_key) AND #s IN ({', '.join(f':f{i}' for i in range(len(allowed)))})"
        )
        try:
            self._client.update_item(
                TableName=self.table_name,
                Key={"dedupe_key": {"S": question_key(question_id)}},
                UpdateExpression="SET " + ", ".join(sets),
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD" if raise_on_loss else "NONE",
            )
        except ClientError as exc:
            if _condition_failed(exc) and not raise_on_loss:
                return False
            raise
        return True

    # -- threads -----------------------------------------------------------------------------

    def find_thread(self, thread_id: str) -> ThreadRecord | None:
        item = self._get(thread_key(thread_id))
        return ThreadRecord.from_item(item) if item else None

    def get_thread(self, thread_id: str) -> ThreadRecord:
        """The thread; :class:`ThreadNotFoundError` when no run was ever queued for it."""
        record = self.find_thread(thread_id)
        if record is None:
            raise ThreadNotFoundError(f"no thread {thread_id}", thread_id=thread_id)
        return record

    def queue_thread(self, thread_id: str, run_id: str | None = None) -> None:
        """Mark a new run queued, unless the thread waits on a question (:class:`ThreadBusyError`).

        A queued or running thread takes the new run after the current one: the inbox keeps
        FIFO order per thread. ``latest_run`` names it, so that the end of an earlier run is not
        mistaken for the end of this one.
        """
        try:
            self._update_thread(
                thread_id,
                "queued",
                sets={"latest_run": ":latest"} if run_id else None,
                values={":latest": {"S": run_id}} if run_id else None,
                remove=("error", "expires_ttl"),
                condition="attribute_not_exists(#run_status) OR #run_status <> :interrupted",
                condition_values={":interrupted": {"S": "interrupted"}},
            )
        except ClientError as exc:
            if not _condition_failed(exc):
                raise
            current = self.find_thread(thread_id)
            pending = current.pending if current else []
            raise ThreadBusyError(
                f"thread {thread_id} waits on {', '.join(pending) or 'a question'}: answer it first",
                thread_id=thread_id,
                pending=pending,
            ) from exc

    def defer_run(self, thread_id: str, run_id: str, input: JsonValue) -> bool:
        """Keep a run for after the thread's current one; ``False`` if this run is already kept.

        ``deferred_ids`` makes a redelivered message harmless: the condition refuses a run id the
        thread already holds.
        """
        try:
            self._client.update_item(
                TableName=self.table_name,
                Key={"dedupe_key": {"S": thread_key(thread_id)}},
                UpdateExpression=(
                    "SET #d = list_append(if_not_exists(#d, :empty), :run), #u = :now ADD #ids :ids"
                ),
                ConditionExpression="attribute_exists(dedupe_key) AND NOT contains(#ids, :rid)",
                # DEFERRED is one of DynamoDB's reserved words.
                ExpressionAttributeNames={"#d": "deferred", "#ids": "deferred_ids", "#u": "updated_at"},
                ExpressionAttributeValues={
                    ":empty": {"L": []},
                    ":run": to_attribute([{"run_id": run_id, "input": json.dumps(input)}]),
                    ":now": {"S": iso(self._clock())},
                    ":ids": {"SS": [run_id]},
                    ":rid": {"S": run_id},
                },
            )
        except ClientError as exc:
            if _condition_failed(exc):
                return False
            raise
        return True

    def drop_deferred(self, thread_id: str, run_id: str) -> None:
        """Forget the oldest deferred run once it has been enqueued (only if it is ``run_id``)."""
        try:
            self._client.update_item(
                TableName=self.table_name,
                Key={"dedupe_key": {"S": thread_key(thread_id)}},
                UpdateExpression="REMOVE #d[0] DELETE #ids :ids",
                ConditionExpression="#d[0].run_id = :rid",
                ExpressionAttributeNames={"#d": "deferred", "#ids": "deferred_ids"},
                ExpressionAttributeValues={":ids": {"SS": [run_id]}, ":rid": {"S": run_id}},
            )
        except ClientError as exc:
            if not _condition_failed(exc):  # a redelivery already dropped it
                raise

    def thread_running(self, thread_id: str, run_id: str | None = None) -> None:
        """A run (a start names it with ``run_id``; a resume continues the current one) is running."""
        sets = {"started_at": ":started"}
        values: dict[str, Any] = {":started": {"S": iso(self._clock())}}
        if run_id:
            sets["current_run"] = ":current"
            values[":current"] = {"S": run_id}
        self._update_thread(thread_id, "running", sets=sets, values=values, remove=("error", "expires_ttl"))

    def thread_interrupted(self, thread_id: str, pending: list[str]) -> None:
        self._update_thread(
            thread_id, "interrupted", sets={"pending": ":pending"}, values={":pending": to_attribute(pending)}
        )

    def thread_done(self, thread_id: str, output_json: str) -> None:
        self._finish(
            thread_id,
            "done",
            sets={"output": ":output", "pending": ":none"},
            values={":output": {"S": output_json}, ":none": {"L": []}},
            remove=("error",),
        )

    def thread_failed(self, thread_id: str, error: str) -> None:
        self._finish(thread_id, "failed", sets={"error": ":error"}, values={":error": {"S": error}})

    def _finish(
        self,
        thread_id: str,
        run_status: RunStatus,
        *,
        sets: Mapping[str, str],
        values: Mapping[str, Any],
        remove: Iterable[str] = (),
    ) -> None:
        """Record how a run ended; a thread with a later run accepted stays ``queued`` for it.

        ``latest_run`` (the api's last accepted run) differs from ``current_run`` (the run ending)
        exactly when another run waits; recording ``done`` then would let a client that started
        that run read this run's end as its own. The output is kept either way.
        """
        try:
            self._update_thread(
                thread_id,
                run_status,
                sets=sets,
                values=values,
                remove=remove,
                ends=True,
                condition="attribute_not_exists(latest_run) OR latest_run = current_run",
            )
        except ClientError as exc:
            if not _condition_failed(exc):
                raise
            self._update_thread(thread_id, "queued", sets=sets, values=values, remove=remove)

    def _update_thread(
        self,
        thread_id: str,
        run_status: RunStatus,
        *,
        sets: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
        remove: Iterable[str] = (),
        ends: bool = False,
        condition: str | None = None,
        condition_values: Mapping[str, Any] | None = None,
    ) -> None:
        now = self._clock()
        expression_values: dict[str, Any] = {
            ":kind": {"S": "thread"},
            ":tid": {"S": thread_id},
            ":rs": {"S": run_status},
            ":now": {"S": iso(now)},
            **(values or {}),
            **(condition_values or {}),
        }
        # Every attribute goes through a name placeholder: `error`, among others, is reserved.
        names: dict[str, str] = {}

        def alias(name: str) -> str:
            placeholder = f"#n{len(names)}"
            names[placeholder] = name
            return placeholder

        assignments = [
            f"{alias(name)} = {placeholder}"
            for name, placeholder in {
                "kind": ":kind",
                "thread_id": ":tid",
                "run_status": ":rs",
                "updated_at": ":now",
                **(sets or {}),
            }.items()
        ]
        if ends:
            expression_values[":ttl"] = {"N": str(int((now + self._ttl).timestamp()))}
            assignments.append(f"{alias('expires_ttl')} = :ttl")
        expression = "SET " + ", ".join(assignments)
        removals = [alias(name) for name in remove]
        if removals:
            expression += " REMOVE " + ", ".join(removals)
        if condition and "#run_status" in condition:
            names["#run_status"] = "run_status"
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": {"dedupe_key": {"S": thread_key(thread_id)}},
            "UpdateExpression": expression,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": expression_values,
        }
        if condition:
            kwargs["ConditionExpression"] = condition
        self._client.update_item(**kwargs)

    def _get(self, key: str) -> dict[str, Any] | None:
        response = self._client.get_item(
            TableName=self.table_name, Key={"dedupe_key": {"S": key}}, ConsistentRead=True
        )
        item = response.get("Item")
        return dict(item) if item else None


def _condition_failed(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"
