"""Starting runs on a thread: queueing a start, claiming it once, naming the thread's latest run.

A start commits with one ledger write (the thread queued and the run's own item, in one
transaction); the ledger's stream turns the run's item into its start message, and the runner
claims it once per run however often the message comes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from agent_wait import exact_json
from agent_wait.errors import ThreadBusyError
from wait_service.ledger.attributes import condition_failed, iso, run_key, thread_key
from wait_service.ledger.threads import _LATEST_IS_CURRENT, ThreadItems

if TYPE_CHECKING:
    from pydantic import JsonValue


class ThreadStarts(ThreadItems):
    """Queues and claims runs; a part of :class:`~wait_service.ledger.ThreadStore`."""

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
