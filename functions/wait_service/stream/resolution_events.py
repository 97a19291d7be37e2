"""Resolution events: the ledger's stream tells downstream systems how each wait and run ended.

:class:`ResolutionEvents` is a consumer of the ledger's stream (:mod:`wait_service.stream.ledger_stream`):
from the two images of each change it reads one *transition* and publishes its event
(:mod:`agent_wait.events`) to the topic and the outbox through the announcers that publish
``wait.created``. A transition is seen once per change because the ledger's conditional writes
allow it once (two racing replies: one ``raised → answered`` write succeeds), so each event is
published once per question or run; a stream record handled twice (a retried batch) publishes it
again under the same ``dedupe_key``, which the outbox's FIFO deduplication drops and a topic
subscriber drops on ``dedupe_key``.

- a question's ``status`` moves to ``answered`` / ``expired`` / ``revoked``: ``wait.answered`` /
  ``wait.expired`` / ``wait.revoked``;
- a question moves to ``resumed``, or (expired, revoked) gains ``resumed_at``: ``wait.resumed``
  (with the call's receipt);
- a question gains its first ``resume_failed`` stage: ``wait.resume_failed``;
- a run ends (the thread item's ``ended_run``/``ended_started``/``ended_status`` change, also
  when the thread stays ``queued`` for a later run): ``thread.done`` / ``thread.failed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from agent_wait.aws._attributes import BARE_FUNCTION
from agent_wait.aws.batches import PartialDelivery
from agent_wait.events import (
    ThreadDone,
    ThreadFailed,
    WaitAnswered,
    WaitExpired,
    WaitResumed,
    WaitResumeFailed,
    WaitRevoked,
)
from wait_service.ledger import QuestionRecord
from wait_service.ledger.questions import EXPIRED_ANSWER
from wait_service.metric_names import EVENTS_PUBLISHED
from wait_service.observability import logger, metrics
from wait_service.stream.ledger_stream import BatchNotWritten, comes_before, first_undelivered

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_wait.aws import SnsAnnounce, SqsAnnounce
    from agent_wait.events import ResolutionEvent
    from wait_service.stream.ledger_stream import LedgerChange


class ResolutionEvents:
    """Publishes the resolution event of each ledger change that ends a wait or a run.

    A batch consumer: a batch's events are gathered, then delivered to each sink in turn in batch
    calls (``deliver_batch``: up to 10 events a call, each thread's in order), the outbox first.
    When a sink does not take them all, the stream retries from the first record whose event did
    not go, and the sinks after it get only the events of the records before it (the FIFO outbox
    drops what it already took; a topic subscriber drops a repeat on ``dedupe_key``).

    Parameters
    ----------
    sinks:
        The announcers to deliver to (the outbox's :class:`SqsAnnounce`, the topic's
        :class:`SnsAnnounce`).

    Examples
    --------
    >>> events = ResolutionEvents([SqsAnnounce(outbox_url), SnsAnnounce(topic_arn)])  # doctest: +SKIP
    >>> LedgerStream([OutboxDispatcher(ledger, inbox), events])  # doctest: +SKIP
    """

    name = "resolution-events"

    def __init__(self, sinks: Sequence[SnsAnnounce | SqsAnnounce]) -> None:
        self.sinks = list(sinks)
        self._events: list[tuple[str, ResolutionEvent]] = []

    @property
    def pending(self) -> int:
        return len(self._events)

    def handle(self, change: LedgerChange) -> None:
        self._events += [(change.sequence_number, event) for event in events_of(change)]

    def flush(self) -> None:
        """Deliver the gathered events; raises :class:`BatchNotWritten` from the first record whose
        event did not reach every sink."""
        gathered, self._events = self._events, []
        # Events of records from `cut` on are published again on the retry: none is sent now.
        cut: str | None = None
        failure: PartialDelivery | None = None
        for sink in self.sinks:
            sending = [
                (sequence, event)
                for sequence, event in gathered
                if cut is None or comes_before(sequence, cut)
            ]
            if not sending:
                break
            try:
                sink.deliver_batch([event for _, event in sending])
            except PartialDelivery as exc:
                cut, failure = first_undelivered([sequence for sequence, _ in sending], exc), exc
        published = [event for sequence, event in gathered if cut is None or comes_before(sequence, cut)]
        if published:
            # One metric value and one line for the batch (each event's dedupe key names its type
            # and question), not a line per event.
            metrics.add_metric(name=EVENTS_PUBLISHED, unit=MetricUnit.Count, value=len(published))
            logger.info(
                "events published",
                extra={
                    "count": len(published),
                    "dedupe_keys": [event.dedupe_key for event in published],
                    "thread_ids": [event.thread_id for event in published],
                },
            )
        if failure is not None and cut is not None:
            raise BatchNotWritten(cut, str(failure)) from failure


def events_of(change: LedgerChange) -> list[ResolutionEvent]:
    """The resolution events a ledger change carries (none for most changes)."""
    if change.new is None:
        return []
    if change.kind == "question":
        return _question_events(change)
    if change.kind == "thread":
        return _thread_events(change)
    return []


def _question_events(change: LedgerChange) -> list[ResolutionEvent]:
    question = QuestionRecord.from_item(change.new or {})
    old = QuestionRecord.from_item(change.old) if change.old else None
    common: dict[str, Any] = {
        "question_id": question.question_id,
        "thread_id": question.thread_id,
        "at": question.updated_at or question.answered_at or "",
        "function": _function_of(question.question),
        "policy_kind": str(question.policy.get("kind") or "none"),
        "digest": question.digest,
    }
    events: list[ResolutionEvent] = []
    moved = old is None or old.status != question.status
    if moved and question.status == "answered":
        events.append(
            WaitAnswered.build(
                **common, answer=question.answer, answered_by=question.answered_by, reason=question.reason
            )
        )
    elif moved and question.status == "expired":
        events.append(
            WaitExpired.build(
                **common, default_applied=question.answer != EXPIRED_ANSWER, answer=question.answer
            )
        )
    elif moved and question.status == "revoked":
        events.append(
            WaitRevoked.build(
                **common, reason=question.reason or "", revoked_by=question.answered_by or "unknown"
            )
        )
    # A person's answer moves `answered -> resumed`; a closed question keeps its status and gains
    # `resumed_at`.
    into_resumed = moved and question.status == "resumed"
    if into_resumed or (question.resumed_at is not None and (old is None or old.resumed_at is None)):
        events.append(WaitResumed.build(**common, status=question.status, receipt=_receipt(question.receipt)))
    if _stages(question, "resume_failed") and not (old and _stages(old, "resume_failed")):
        attempts = change.new_value("resume_attempts")
        events.append(
            WaitResumeFailed.build(
                **common,
                status=question.status,
                error=question.error or "unknown",
                attempts=int(attempts) if attempts is not None else None,
            )
        )
    return events


def _thread_events(change: LedgerChange) -> list[ResolutionEvent]:
    status = _run_end(change)
    if status is None:
        return []
    ended = change.new_value("ended_status") is not None
    common: dict[str, Any] = {
        "thread_id": str(change.new_value("thread_id")),
        "run_id": change.new_value("ended_run" if ended else "current_run"),
        "at": str(change.new_value("updated_at") or ""),
        "started_at": change.new_value("ended_started" if ended else "started_at"),
    }
    if status == "failed":
        return [ThreadFailed.build(**common, error=str(change.new_value("error") or "unknown"))]
    output = change.new_value("output")
    omitted = change.new_value("output_omitted")
    if isinstance(output, str):
        size, summary = len(output.encode()), ThreadDone.summarize(output)
    else:
        size = int(omitted or 0)
        summary = f"(an output of {size} bytes, kept in the thread's checkpoint only)"
    return [ThreadDone.build(**common, output_bytes=size, summary=summary)]


_END = ("ended_status", "ended_run", "ended_started")


def _run_end(change: LedgerChange) -> str | None:
    """How the run this change ends ended (``done``/``failed``), or ``None``: no run ended here.

    The write that ends a run names it on the thread item (``ended_run``, ``ended_started``) with
    its outcome (``ended_status``), also when the thread stays ``queued`` for a later run: a run
    ended here when these changed. The same end written twice changes none of them. A thread
    item written before these attributes existed falls back on ``run_status``.
    """
    if change.new_value("ended_status") is not None:
        if all(change.old_value(name) == change.new_value(name) for name in _END):
            return None
        status = change.new_value("ended_status")
        return str(status) if status in ("done", "failed") else None
    status = change.new_value("run_status")
    if status not in ("done", "failed") or change.old_value("run_status") == status:
        return None
    return str(status)


def _function_of(question: Any) -> str:
    name = question.get("function") if isinstance(question, Mapping) else None
    return name if isinstance(name, str) and name else BARE_FUNCTION


def _stages(question: QuestionRecord, stage: str) -> int:
    return sum(
        1 for entry in question.lifecycle if isinstance(entry, Mapping) and entry.get("stage") == stage
    )


def _receipt(receipt: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not receipt:
        return None
    return {key: receipt.get(key) for key in ("ran", "args", "outcome", "error", "at") if key in receipt}
