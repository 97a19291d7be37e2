"""How a thread's run ends: ``retrying`` after an infrastructure failure, ``done`` or ``failed``.

The end of a run is the thread's end unless the api accepted a later run meanwhile: the thread
then stays ``queued`` for it, with the end recorded all the same (``ended_status``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from wait_service.ledger.attributes import condition_failed
from wait_service.ledger.threads import (
    _LATEST_IS_CURRENT,
    _NOTHING_DEFERRED,
    AT_REST,
    MAX_OUTPUT_BYTES,
    RunStatus,
    ThreadItems,
    ThreadRecord,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping


class RunEnds(ThreadItems):
    """Records how runs end; a part of :class:`~wait_service.ledger.ThreadStore`."""

    def thread_retrying(self, thread_id: str, attempt: int, error: str) -> None:
        """An infrastructure failure ended attempt ``attempt``; the message comes back after a backoff."""
        self._update_thread(
            thread_id,
            "retrying",
            sets={"attempt": ":attempt", "error": ":error"},
            values={":attempt": {"N": str(attempt)}, ":error": {"S": error}},
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
