"""Thread items: the status of a thread's last run, under ``thread:<id>`` keys.

Thread items never carry ``status`` or ``created_at``, so the sparse question indexes never list
them.

This module holds the thread as read (:class:`ThreadRecord`) and the write every move is made of
(:class:`ThreadItems`); the moves are grouped by what they do: :mod:`.thread_starts` (queueing
and claiming runs), :mod:`.thread_parking` (running, parked, resumed; runs deferred meanwhile) and
:mod:`.thread_ends` (retrying, done, failed). :class:`~wait_service.ledger.ThreadStore` is all three.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

from agent_wait.errors import ThreadNotFoundError
from wait_service.ledger.attributes import from_item, iso, thread_key
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


class ThreadItems(LedgerTable):
    """Reads a thread item and builds its writes: what every part of :class:`ThreadStore` shares.

    Every write of a thread item goes through :meth:`_thread_request` (sent by
    :meth:`_update_thread`, or in a transaction).
    """

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

    # -- the write every move is made of -------------------------------------------------------

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
