"""The park: a run's questions announced through the fan-out and recorded, the thread parked or done."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from agent_wait.errors import AnnounceError
from wait_service.metric_names import QUESTION_COLLISIONS, QUESTIONS_RAISED
from wait_service.observability import logger, metrics
from wait_service.runs.announce_tracking import _Tracking
from wait_service.runs.async_answers import is_async_question
from wait_service.runs.run_outcome import RunOutcome, _Undelivered, output_json
from wait_service.runs.run_resumes import RunResumes

if TYPE_CHECKING:
    from agent_wait import Envelope
    from agent_wait.receipts import Receipt
    from wait_service.ledger import QuestionRecord


class RunParking(RunResumes):
    """After a run: its questions announced and recorded, the thread parked on them or done."""

    def _record_async(self, hosted: _Tracking) -> None:
        """Record the async questions the run published: delivered, timers armed.

        The run went on without them, so a sink that missed one is logged, not retried: re-running
        the graph to republish it would repeat the run's other effects. The question's next
        publication (the same call again) is the retry, under the same ``dedupe_key``.
        """
        for envelope in hosted.published:
            question_id = envelope.question_id
            collision = hosted.collisions.get(question_id)
            if collision is not None:
                logger.error(
                    "wait.collision", extra={"collisions": [question_id], "error": collision.message}
                )
                metrics.add_metric(name=QUESTION_COLLISIONS, unit=MetricUnit.Count, value=1)
                continue
            if question_id in hosted.unrecordable:
                # No sink heard of it either; the run's end reports it (it ends `failed`).
                continue
            if hosted.delivered(question_id):
                results = hosted.sinks.get(question_id, {})
                self.ledger.mark_delivered(question_id, [name for name in hosted.order if results.get(name)])
            else:
                logger.warning("async question did not reach every sink", extra={"question": question_id})
            if self.timers is not None and hosted.is_recorded(question_id):
                self._arm(envelope)
        if hosted.published:
            metrics.add_metric(name=QUESTIONS_RAISED, unit=MetricUnit.Count, value=len(hosted.published))

    def _after_run(
        self,
        thread_id: str,
        question: QuestionRecord | None,
        result: Any,
        *,
        republished: bool,
        receipts: list[Receipt] | None = None,
        unrecordable: dict[str, str] | None = None,
    ) -> RunOutcome:
        reported: list[Receipt] = list(receipts or ())
        # The resumed question is recorded `resumed` in the same write as the run's end (one
        # transaction): a client that sees the thread done or parked on its next question also
        # sees this answer applied. Until then it stays as it was, so a failure on the way leaves
        # the message to be redelivered, which finishes the bookkeeping from the checkpoint.
        mine: list[Receipt] = []
        with_end: QuestionRecord | None = None
        try:
            if question is not None:
                mine = [r for r in reported if r.question_id == question.question_id]
                reported = [r for r in reported if r.question_id != question.question_id]
                if is_async_question(question):
                    # An async answer runs once, as a new run: its question is recorded first, so
                    # that no redelivery runs it again (a redelivery finds it `resumed_at`).
                    self._mark_resumed(question, mine)
                else:
                    with_end = question
            return self._publish_and_end(
                thread_id, question, with_end, mine, result, reported, republished, unrecordable
            )
        except _Undelivered:
            raise
        except Exception:
            # The redelivery does not run the calls again: keep what they reported all the same
            # (a receipt already kept stands).
            self._best_effort(lambda: self._record_receipts(list(receipts or ())))
            raise

    def _arm(self, envelope: Envelope) -> None:
        """Create the schedule of a just-raised question's next due timer (none without one)."""
        if self.timers is not None:
            self.timers.set(self.timers.for_envelope(envelope))

    def _publish_and_end(
        self,
        thread_id: str,
        question: QuestionRecord | None,
        with_end: QuestionRecord | None,
        mine: list[Receipt],
        result: Any,
        reported: list[Receipt],
        republished: bool,
        unrecordable: dict[str, str] | None = None,
    ) -> RunOutcome:
        """Announce the run's questions and record its end.

        ``question`` is the one the run resumed; ``with_end`` the same when it is still to be
        recorded `resumed`, with the run's end (``mine``: the receipts of its call).
        ``unrecordable``: the async questions of the run the ledger refused for good; the run
        ends `failed` naming them, as it does for its interrupts' own, and announces nothing more.
        """
        self._record_receipts(reported)
        if question is not None and self.timers is not None:
            self._disarmed(question)
        if unrecordable:
            if with_end is not None:
                self._mark_resumed(with_end, mine)
            return self._unrecorded(thread_id, unrecordable)
        # A question's timer is armed as soon as the ledger holds it, at once with the other sinks;
        # it is waited for below, before the thread is recorded parked on the question.
        tracking = _Tracking(
            self.announce,
            requested_by=self._requester,
            arm=None if self.timers is None else self._arm,
            pool=self._pool(),
        )
        # Only a deployment with a policy store passes it (an injected `publish` may not take it).
        overriding: dict[str, Any] = {"override": self.policies} if self.policies is not None else {}
        envelopes = self.publish(
            result,
            thread_id,
            tracking,
            reply_url=self.reply_url,
            default_ttl=self.default_ttl,
            now=self._clock(),
            **overriding,
        )
        if tracking.unrecordable:
            if with_end is not None:
                self._mark_resumed(with_end, mine)
            return self._unrecorded(thread_id, tracking.unrecordable)
        if tracking.collisions:
            if with_end is not None:
                self._mark_resumed(with_end, mine)
            return self._collided(thread_id, list(tracking.collisions.values()))
        delivered = [e.question_id for e in envelopes if tracking.delivered(e.question_id)]
        # Each question every sink took moves to `delivered`: in the write recording the thread
        # parked when there is one (one transaction), else alone.
        deliveries = {
            qid: [name for name in tracking.order if tracking.sinks.get(qid, {}).get(name)]
            for qid in delivered
        }
        recorded = [e.question_id for e in envelopes if tracking.is_recorded(e.question_id)]
        if self.timers is not None:
            # Armed on every publish, a redelivery's too (a create that failed is retried this
            # way); creating a timer that exists changes nothing. Each is in place before the
            # thread is recorded parked: a failed create fails the message, which is retried.
            for envelope in envelopes:
                if envelope.question_id in recorded and not tracking.armed(envelope):
                    self._arm(envelope)
        pending = [e.question_id for e in envelopes]
        if pending:
            if not republished:
                metrics.add_metric(name=QUESTIONS_RAISED, unit=MetricUnit.Count, value=len(pending))
            if recorded == pending:
                self._parked(thread_id, pending, deliveries, with_end, mine)
                logger.info("thread parked", extra={"pending": pending, "delivered": delivered})
            else:
                self._mark_delivered(deliveries)
        else:
            output = output_json(result)
            if with_end is None or not self._resumed_and_ended(
                with_end, mine, self.ledger.done_write(thread_id, output)
            ):
                # Written alone: the run's end may leave the thread queued for a later run, and
                # the item it returns names the runs deferred behind this one.
                ended = self.ledger.thread_done(thread_id, output)
                logger.info("thread done")
                self._start_deferred(thread_id, ended)
            else:
                # The transaction's condition held: no run was deferred behind this one.
                logger.info("thread done")

        undelivered = [qid for qid in pending if qid not in delivered]
        if undelivered:
            # Seed 000: "the next redelivery republishes with the same dedupe_key, and that is the
            # retry". A thread is recorded parked only on questions the ledger holds, so a client
            # can always open every pending id; until then it is `retrying`.
            error = _Undelivered if recorded == pending else AnnounceError
            raise error(
                f"questions {', '.join(undelivered)} did not reach every sink; the message is retried",
                thread_id=thread_id,
                question_id=undelivered[0],
            )
        return RunOutcome(
            thread_id=thread_id,
            status="interrupted" if pending else "done",
            pending=pending,
            delivered=delivered,
            resumed=question.question_id if question is not None else None,
        )

    def _parked(
        self,
        thread_id: str,
        pending: list[str],
        deliveries: dict[str, list[str]],
        with_end: QuestionRecord | None,
        mine: list[Receipt],
    ) -> None:
        """Record the thread parked on ``pending``, its questions delivered (and ``with_end`` resumed).

        One transaction writes them all: the thread is never seen parked without its questions
        delivered, and a crash before it leaves the message to be redelivered, which republishes
        under the same ``dedupe_key`` and writes it again. Cancelled (a question no longer
        ``raised``: a republish, or an answer already given), nothing of it is written and each
        write is made alone, in the order the redelivery would make them.
        """
        end = self.ledger.interrupted_write(thread_id, pending)
        delivered = [self.ledger.delivered_write(qid, sinks) for qid, sinks in deliveries.items()]
        if with_end is not None:
            if self._resumed_and_ended(with_end, mine, end, delivered):
                return
        elif self.ledger.parked(end, delivered):
            return
        self._mark_delivered(deliveries)
        self.ledger.thread_interrupted(thread_id, pending)

    def _mark_delivered(self, deliveries: dict[str, list[str]]) -> None:
        for question_id, sinks in deliveries.items():
            self.ledger.mark_delivered(question_id, sinks)
