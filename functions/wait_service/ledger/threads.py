"""Thread items: the status of a thread's last run, under ``thread:<id>`` keys.

Thread items never carry ``status`` or ``created_at``, so the sparse question indexes never list
them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

from botocore.exceptions import ClientError

from agent_wait import exact_json
from agent_wait.aws.dynamodb import to_attribute
from agent_wait.errors import ThreadBusyError, ThreadNotFoundError
from wait_service.ledger.attributes import condition_failed, from_item, iso, run_key, thread_key
from wait_service.ledger.table import LedgerTable

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from pydantic import JsonValue

# The largest run output kept on a thread item (DynamoDB holds 400 KB per item, the rest of the
# thread item included); a larger one stays in the checkpoint only.
MAX_OUTPUT_BYTES = 300 * 1024
RunStatus = Literal["queued", "running", "retrying", "interrupted", "done", "failed"]
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
# Set (true) when a run ends `done`, removed when any run starts: while it is set, the thread's
# checkpoint waits on no question, so a start needs not read the checkpoint to know it.
AT_REST = "at_rest"
# A run's end is the thread's end unless the api accepted a later run meanwhile.
_LATEST_IS_CURRENT = "attribute_not_exists(latest_run) OR latest_run = current_run"
# No run waits behind the thread's current one (a started run is removed from the list).
_NOTHING_DEFERRED = "(attribute_not_exists(#deferred) OR size(#deferred) = :zero)"


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
    # While `retrying`: the attempt that failed (1-based) of how many the inbox allows.
    attempt: int | None = None
    # The size of an output too large to keep on the thread item (it stays in the checkpoint).
    output_omitted: int | None = None
    # Runs that reached the thread while it waited on a question, oldest first: (run_id, input).
    deferred: list[DeferredRun] = field(default_factory=list)
    # The api's last accepted run (a start's run id), when it named one.
    latest_run: str | None = None

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
            attempt=int(data["attempt"]) if data.get("attempt") is not None else None,
            output_omitted=int(data["output_omitted"]) if data.get("output_omitted") is not None else None,
            deferred=[
                DeferredRun(
                    str(run["run_id"]),
                    json.loads(run["input"], parse_float=Decimal),
                    started_by=run.get("started_by"),
                )
                for run in data.get("deferred") or []
            ],
            latest_run=str(data["latest_run"]) if data.get("latest_run") else None,
        )


@dataclass(frozen=True)
class DeferredRun:
    """A run waiting for its thread's questions to be answered and its current run to end."""

    run_id: str
    input: JsonValue
    # Who asked for the run (recorded with it as it is queued at last).
    started_by: str | None = None


class ThreadStore(LedgerTable):
    """Reads and writes thread items; a part of :class:`~wait_service.ledger.Ledger`."""

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
            if not condition_failed(exc):
                raise
            raise self._busy(thread_id) from exc

    def _busy(self, thread_id: str) -> ThreadBusyError:
        """The refusal of a run on a thread parked on questions, naming them."""
        current = self.find_thread(thread_id)
        pending = current.pending if current else []
        return ThreadBusyError(
            f"thread {thread_id} waits on {', '.join(pending) or 'a question'}: answer it first",
            thread_id=thread_id,
            pending=pending,
        )

    def queue_run(
        self, thread_id: str, run_id: str, input: JsonValue, *, started_by: str | None = None
    ) -> None:
        """Mark run ``run_id`` queued and record its start, both or neither: the commit of a start.

        ``started_by`` (who asked for the run) is kept on the run's item for the runner to read.

        One transaction writes the thread item (as :meth:`queue_thread`) and the run's own item
        (``run:<run_id>``, the input as JSON): the ledger's stream hands that new item to the
        dispatcher, which enqueues the start message. Nobody needs to send anything after this
        write, so a crash or a failing queue right after it cannot strand the run.

        Raises
        ------
        ThreadBusyError
            The thread waits on a question; nothing was written.
        """
        thread_write = self._thread_request(
            thread_id,
            "queued",
            sets={"latest_run": ":latest"},
            values={":latest": {"S": run_id}},
            remove=("error", "expires_ttl"),
            condition="attribute_not_exists(#run_status) OR #run_status <> :interrupted",
            condition_values={":interrupted": {"S": "interrupted"}},
        )
        now = self._clock()
        run_item = {
            "dedupe_key": {"S": run_key(run_id)},
            "kind": {"S": "run"},
            "thread_id": {"S": thread_id},
            "run_id": {"S": run_id},
            # As sent: the dispatcher puts these characters on the queue (no float on the way).
            "input": {"S": exact_json.dumps(input, separators=(",", ":"), ensure_ascii=False)},
            "queued_at": {"S": iso(now)},
            "expires_ttl": {"N": str(int((now + self._ttl).timestamp()))},
        }
        if started_by is not None:
            run_item["started_by"] = {"S": started_by}
        items: Any = [
            {"Update": thread_write},
            {
                "Put": {
                    "TableName": self.table_name,
                    "Item": run_item,
                    "ConditionExpression": "attribute_not_exists(dedupe_key)",
                }
            },
        ]
        try:
            self._client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons") or []
            codes = [reason.get("Code") for reason in reasons]
            if not codes or codes[0] != "ConditionalCheckFailed":
                raise
            raise self._busy(thread_id) from exc

    def claim_run(self, run_id: str, message_id: str) -> bool:
        """Claim run ``run_id`` for inbox message ``message_id``: :meth:`claim` without the starter."""
        return self.claim(run_id, message_id)[0]

    def claim(self, run_id: str, message_id: str) -> tuple[bool, str | None]:
        """Claim run ``run_id`` for inbox message ``message_id``; ``False``: another message ran it.

        The dispatcher enqueues a run's start at least once: a stream record handled twice past
        the queue's deduplication window puts a second message on the inbox for the same run. The
        first message to reach the runner names itself on the run's record; its own redeliveries
        (a retry after a failure) still run, any other message for the run is a duplicate. A run
        with no record (a message written by hand) is not checked. The second value is who started
        the run (``None``: unknown), read by the same write.
        """
        try:
            response = self._client.update_item(
                TableName=self.table_name,
                Key={"dedupe_key": {"S": run_key(run_id)}},
                UpdateExpression="SET started_message = :mid, started_at = if_not_exists(started_at, :now)",
                ConditionExpression=(
                    "attribute_exists(dedupe_key) AND "
                    "(attribute_not_exists(started_message) OR started_message = :mid)"
                ),
                ExpressionAttributeValues={":mid": {"S": message_id}, ":now": {"S": iso(self._clock())}},
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return self._get(run_key(run_id)) is None, None
        started_by = (response.get("Attributes") or {}).get("started_by") or {}
        return True, started_by.get("S")

    def queue_answer_run(self, thread_id: str, run_id: str) -> bool:
        """Mark the run carrying an async question's answer queued; ``False`` if it cannot be now.

        The dispatcher calls this when it reads the decision from the ledger's stream, which may be
        after the api accepted a later run on the thread. That run stays the thread's latest: the
        answer's run (enqueued first, in stream order) ends with the thread still ``queued`` for
        it. ``False`` changes nothing: the thread is parked (the runner keeps the answer's run for
        after its questions, deferred like any run) or a later run already waits.
        """
        try:
            self._update_thread(
                thread_id,
                "queued",
                sets={"latest_run": ":latest"},
                values={":latest": {"S": run_id}},
                remove=("error", "expires_ttl"),
                condition=(
                    "(attribute_not_exists(#run_status) OR #run_status <> :interrupted) AND "
                    f"({_LATEST_IS_CURRENT} OR latest_run = :latest)"
                ),
                condition_values={":interrupted": {"S": "interrupted"}},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return False
        return True

    def claim_latest_run(self, thread_id: str, run_id: str) -> None:
        """Name ``run_id`` the thread's latest run, unless a later run was accepted since.

        An async answer's run is queued when the answer is recorded, except on a parked thread;
        if that thread ran on before the answer's message came up, nothing named the answer's run,
        and its end would leave the thread waiting for a run that never comes. Left alone when
        ``latest_run`` names another run still to come (it differs from ``current_run``).
        """
        try:
            self._client.update_item(
                TableName=self.table_name,
                Key={"dedupe_key": {"S": thread_key(thread_id)}},
                UpdateExpression="SET latest_run = :rid",
                ConditionExpression=(
                    "attribute_exists(dedupe_key) AND (attribute_not_exists(latest_run) "
                    "OR latest_run = current_run OR latest_run = :rid)"
                ),
                ExpressionAttributeValues={":rid": {"S": run_id}},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise

    def defer_run(
        self, thread_id: str, run_id: str, input: JsonValue, *, started_by: str | None = None
    ) -> bool:
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
                    ":run": to_attribute(
                        [
                            {
                                "run_id": run_id,
                                "input": exact_json.dumps(input, separators=(",", ":"), ensure_ascii=False),
                            }
                            | ({"started_by": started_by} if started_by is not None else {})
                        ]
                    ),
                    ":now": {"S": iso(self._clock())},
                    ":ids": {"SS": [run_id]},
                    ":rid": {"S": run_id},
                },
            )
        except ClientError as exc:
            if condition_failed(exc):
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
            if not condition_failed(exc):  # a redelivery already dropped it
                raise

    def thread_running(self, thread_id: str, run_id: str | None = None) -> None:
        """A run (a start names it with ``run_id``; a resume continues the current one) is running."""
        self._running(thread_id, run_id)

    def start_if_at_rest(self, thread_id: str, run_id: str) -> bool:
        """Mark start ``run_id`` running if the thread's checkpoint is known to wait on nothing.

        True (and the thread is ``running``) when the thread item exists and either no run ever
        ran on it or its last run ended ``done`` (:data:`AT_REST`); ``False`` changes nothing,
        and the runner reads the checkpoint to decide. This saves a checkpoint read per start.
        """
        return self._running(
            thread_id,
            run_id,
            condition="attribute_exists(dedupe_key) AND (attribute_not_exists(#started) OR #rest = :rest)",
            condition_names={"#started": "started_at", "#rest": AT_REST},
            condition_values={":rest": {"BOOL": True}},
        )

    def resume_if_waiting(self, thread_id: str, question_id: str) -> bool:
        """Mark the resume of ``question_id`` running if the thread is recorded parked on it.

        The thread is recorded ``interrupted`` only once its checkpoint waits on every id in
        ``pending``, and every run marks it running before touching the checkpoint: so while it
        is ``interrupted`` with this id pending, the checkpoint waits on the question. ``False``
        changes nothing, and the runner reads the checkpoint to decide.
        """
        return self._running(
            thread_id,
            None,
            condition="#run_status = :interrupted AND contains(#pending, :qid)",
            condition_names={"#pending": "pending"},
            condition_values={":interrupted": {"S": "interrupted"}, ":qid": {"S": question_id}},
        )

    def waiting_again(self, thread_id: str, question_id: str) -> bool:
        """Undo :meth:`resume_if_waiting` for a resume refused once the question was read.

        The runner marks the thread running while it reads the question (one round trip for
        both); when the question turns out not to be one to resume with (no answer yet, an
        async question, another thread's), the thread is parked on it as before. ``pending`` was
        never changed; ``started_at`` keeps the refused attempt's time. ``False`` when the thread
        is no longer running with the question pending (nothing is written).
        """
        return self._update_if(
            TableName=self.table_name,
            Key={"dedupe_key": {"S": thread_key(thread_id)}},
            UpdateExpression="SET #rs = :interrupted, #u = :now",
            ConditionExpression="#rs = :running AND contains(#pending, :qid)",
            ExpressionAttributeNames={"#rs": "run_status", "#u": "updated_at", "#pending": "pending"},
            ExpressionAttributeValues={
                ":interrupted": {"S": "interrupted"},
                ":running": {"S": "running"},
                ":qid": {"S": question_id},
                ":now": {"S": iso(self._clock())},
            },
        )

    def _running(
        self,
        thread_id: str,
        run_id: str | None,
        *,
        condition: str | None = None,
        condition_names: Mapping[str, str] | None = None,
        condition_values: Mapping[str, Any] | None = None,
    ) -> bool:
        sets = {"started_at": ":started"}
        values: dict[str, Any] = {":started": {"S": iso(self._clock())}}
        if run_id:
            sets["current_run"] = ":current"
            values[":current"] = {"S": run_id}
        try:
            self._update_thread(
                thread_id,
                "running",
                sets=sets,
                values=values,
                # A run may change the checkpoint: it is no longer known to be at rest.
                remove=("error", "expires_ttl", "attempt", AT_REST),
                condition=condition,
                condition_names=condition_names,
                condition_values=condition_values,
            )
        except ClientError as exc:
            if condition is None or not condition_failed(exc):
                raise
            return False
        return True

    def thread_retrying(self, thread_id: str, attempt: int, error: str) -> None:
        """An infrastructure failure ended attempt ``attempt``; the message comes back after a backoff."""
        self._update_thread(
            thread_id,
            "retrying",
            sets={"attempt": ":attempt", "error": ":error"},
            values={":attempt": {"N": str(attempt)}, ":error": {"S": error}},
        )

    def thread_interrupted(self, thread_id: str, pending: list[str]) -> None:
        self._client.update_item(**self.interrupted_write(thread_id, pending))

    def interrupted_write(self, thread_id: str, pending: list[str]) -> dict[str, Any]:
        """The ``UpdateItem`` of :meth:`thread_interrupted`, as a request not yet sent."""
        return self._thread_request(
            thread_id, "interrupted", sets={"pending": ":pending"}, values={":pending": to_attribute(pending)}
        )

    def thread_done(self, thread_id: str, output_json: str) -> ThreadRecord:
        """The run ended; its output is kept unless it is too large for the thread item.

        A DynamoDB item holds 400 KB: an output over :data:`MAX_OUTPUT_BYTES` is left out (its size
        kept as ``output_omitted``) so that the run's end is recorded all the same; the whole output
        stays in the thread's checkpoint.
        """
        return self._finish(thread_id, "done", **_done_fields(output_json))

    def done_write(self, thread_id: str, output_json: str) -> dict[str, Any]:
        """:meth:`thread_done` as one conditional ``UpdateItem`` not yet sent, for a transaction.

        Its condition holds only when :meth:`thread_done` would record ``done`` and the thread
        holds no deferred run: what that method returns (the item, for the deferred runs to
        start) is then not needed. When it fails, the caller records the end with
        :meth:`thread_done` instead.
        """
        return self._thread_request(
            thread_id,
            "done",
            **_done_fields(output_json),
            ends=True,
            condition=f"({_LATEST_IS_CURRENT}) AND {_NOTHING_DEFERRED}",
            condition_names={"#deferred": "deferred"},
            condition_values={":zero": {"N": "0"}},
        )

    def thread_failed(self, thread_id: str, error: str) -> ThreadRecord:
        return self._finish(thread_id, "failed", sets={"error": ":error"}, values={":error": {"S": error}})

    def _finish(
        self,
        thread_id: str,
        run_status: RunStatus,
        *,
        sets: Mapping[str, str],
        values: Mapping[str, Any],
        remove: Iterable[str] = (),
    ) -> ThreadRecord:
        """Record how a run ended; a thread with a later run accepted stays ``queued`` for it.

        ``latest_run`` (the api's last accepted run) differs from ``current_run`` (the run ending)
        exactly when another run waits; recording ``done`` then would let a client that started
        that run read this run's end as its own. The output is kept either way, and so is the end
        itself (``ended_status``, ``ended_run``: see :meth:`_thread_request`).
        """
        try:
            record = self._update_thread(
                thread_id,
                run_status,
                sets=sets,
                values=values,
                remove=remove,
                ends=True,
                condition=_LATEST_IS_CURRENT,
                return_item=True,
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            record = self._update_thread(
                thread_id,
                "queued",
                sets=sets,
                values=values,
                remove=remove,
                ended=run_status,
                return_item=True,
            )
        assert record is not None
        return record

    def _update_thread(
        self,
        thread_id: str,
        run_status: RunStatus,
        *,
        sets: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
        remove: Iterable[str] = (),
        ends: bool = False,
        ended: RunStatus | None = None,
        condition: str | None = None,
        condition_names: Mapping[str, str] | None = None,
        condition_values: Mapping[str, Any] | None = None,
        return_item: bool = False,
    ) -> ThreadRecord | None:
        """Write the thread item; with ``return_item``, returns it as written (same call)."""
        kwargs = self._thread_request(
            thread_id,
            run_status,
            sets=sets,
            values=values,
            remove=remove,
            ends=ends,
            ended=ended,
            condition=condition,
            condition_names=condition_names,
            condition_values=condition_values,
        )
        if not return_item:
            self._client.update_item(**kwargs)
            return None
        response = self._client.update_item(**kwargs, ReturnValues="ALL_NEW")
        return ThreadRecord.from_item(response["Attributes"])

    def _thread_request(
        self,
        thread_id: str,
        run_status: RunStatus,
        *,
        sets: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
        remove: Iterable[str] = (),
        ends: bool = False,
        ended: RunStatus | None = None,
        condition: str | None = None,
        condition_names: Mapping[str, str] | None = None,
        condition_values: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The ``UpdateItem`` writing the thread item, as a request not yet sent.

        A write that ends the current run (``ends``: the thread rests in ``done``/``failed``;
        ``ended``: it stays ``queued`` for a later run, the run having ended ``ended``) records
        the end in the same write: ``ended_status`` (how the run ended), ``ended_run`` and
        ``ended_started`` (the run's ``current_run`` and ``started_at``, ``NULL`` when absent). The
        ledger's stream reads each run's end from these changing, whatever ``run_status`` the
        thread is left in; the same end written twice changes nothing.
        """
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
        outcome = run_status if ends else ended
        if outcome is not None:
            expression_values[":ended"] = {"S": outcome}
            expression_values[":unnamed"] = {"NULL": True}
            assignments.append(f"{alias('ended_status')} = :ended")
            for copy, source in (("ended_run", "current_run"), ("ended_started", "started_at")):
                assignments.append(f"{alias(copy)} = if_not_exists({alias(source)}, :unnamed)")
        if ends:
            expression_values[":ttl"] = {"N": str(int((now + self._ttl).timestamp()))}
            assignments.append(f"{alias('expires_ttl')} = :ttl")
        expression = "SET " + ", ".join(assignments)
        removals = [alias(name) for name in remove]
        if removals:
            expression += " REMOVE " + ", ".join(removals)
        if condition and "#run_status" in condition:
            names["#run_status"] = "run_status"
        names.update(condition_names or {})
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": {"dedupe_key": {"S": thread_key(thread_id)}},
            "UpdateExpression": expression,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": expression_values,
        }
        if condition:
            kwargs["ConditionExpression"] = condition
        return kwargs


def _done_fields(output_json: str) -> dict[str, Any]:
    """The ``sets``, ``values`` and ``remove`` of a thread item recording a run ended ``done``."""
    size = len(output_json.encode())
    # The run ended with no question pending: the next start needs no checkpoint read.
    sets = {"pending": ":none", AT_REST: ":rest"}
    values: dict[str, Any] = {":none": {"L": []}, ":rest": {"BOOL": True}}
    if size > MAX_OUTPUT_BYTES:
        sets["output_omitted"] = ":omitted"
        values[":omitted"] = {"N": str(size)}
        remove: tuple[str, ...] = ("error", "output")
    else:
        sets["output"] = ":output"
        values[":output"] = {"S": output_json}
        remove = ("error", "output_omitted")
    return {"sets": sets, "values": values, "remove": remove}
