"""A thread's run between its start and its end: running, parked on questions, resumed.

While a thread is parked, the runs that reach it are kept on its item (``deferred``) for after
its questions are answered and its current run ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from agent_wait import exact_json
from agent_wait.aws.dynamodb import to_attribute
from wait_service.ledger.attributes import condition_failed, iso, thread_key
from wait_service.ledger.threads import AT_REST, ThreadItems

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic import JsonValue


class ThreadParking(ThreadItems):
    """Marks runs running, parked and resumed; a part of :class:`~wait_service.ledger.ThreadStore`."""

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

    def thread_interrupted(self, thread_id: str, pending: list[str]) -> None:
        self._client.update_item(**self.interrupted_write(thread_id, pending))

    def interrupted_write(self, thread_id: str, pending: list[str]) -> dict[str, Any]:
        """The ``UpdateItem`` of :meth:`thread_interrupted`, as a request not yet sent."""
        return self._thread_request(
            thread_id, "interrupted", sets={"pending": ":pending"}, values={":pending": to_attribute(pending)}
        )

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
