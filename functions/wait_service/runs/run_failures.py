"""How a run ends when it cannot go on: poison messages, graph failures, retries and the DLQ."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.metrics import MetricUnit
from ulid import ULID

from wait_service.metric_names import (
    POISON_MESSAGES,
    QUESTION_COLLISIONS,
    QUESTIONS_UNRECORDABLE,
    RESUME_FAILURES,
    RUNS_FAILED,
)
from wait_service.observability import logger, metrics
from wait_service.runs.run_outcome import RESUMABLE, RunnerState, RunOutcome

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_wait.errors import QuestionCollisionError
    from wait_service.ledger import QuestionRecord, ThreadRecord
    from wait_service.runs.inbox import ResumeMessage


class RunFailures(RunnerState):
    """Failures and retries: the thread ends `failed` (or `retrying`), its deferred runs go on."""

    def _poison(self, thread_id: str, reason: str, size: int, *, run_id: str | None = None) -> RunOutcome:
        """Consume a message that cannot be run: logged as ``poison`` and counted, never retried.

        Failing it would hold every later message of its thread's FIFO group behind it until the
        queue gave up on it. A start the api had accepted as the thread's latest run ends that run
        ``failed`` with the reason, so nobody waits on it; any other thread is left as it was.
        """
        logger.warning("poison", extra={"reason": reason, "thread_id": thread_id or None, "size": size})
        metrics.add_metric(name=POISON_MESSAGES, unit=MetricUnit.Count, value=1)
        if run_id is not None:
            self._best_effort(lambda: self._fail_accepted_run(thread_id, run_id, reason))
        return RunOutcome(thread_id=thread_id, status="refused", error=reason)

    def _fail_accepted_run(self, thread_id: str, run_id: str, reason: str) -> None:
        thread = self.ledger.find_thread(thread_id)
        if thread is None or thread.latest_run != run_id or thread.run_status != "queued":
            return
        self.ledger.thread_running(thread_id, run_id)
        self._start_deferred(thread_id, self.ledger.thread_failed(thread_id, reason))

    def _resuming(self, message: ResumeMessage, receive_count: int) -> QuestionRecord | None:
        """On the last attempt, the question a resume that failed before its run would resume.

        ``None`` on an earlier attempt (the redelivery checks it again), when the ledger cannot be
        read either, or when the question is not one the message may resume.
        """
        if receive_count < self.max_receive_count:
            return None
        try:
            question = self.ledger.find_question(message.question_id)
        except Exception:
            logger.exception("could not read the question to record the failure")
            return None
        if question is None or question.thread_id != message.thread_id or question.status not in RESUMABLE:
            return None
        return question

    def _start_deferred(self, thread_id: str, thread: ThreadRecord | None = None) -> None:
        """Queue the oldest run deferred on the thread, now that its current run has ended.

        ``thread`` is the item the run's end was written as (no second read). The run is queued
        as the api queues one (:meth:`~wait_service.ledger.ThreadStore.queue_run`: the
        ledger's stream has its start enqueued) before it is dropped from the thread item: a crash
        in between queues it again on the redelivery rather than losing it.
        """
        if thread is None:
            thread = self.ledger.find_thread(thread_id)
        if thread is None or not thread.deferred:
            return
        run = thread.deferred[0]
        # A new run id: the deferred run's own id is its original message's deduplication id.
        run_id = str(ULID())
        self.ledger.queue_run(thread_id, run_id, run.input, started_by=run.started_by)
        self.ledger.drop_deferred(thread_id, run.run_id)
        logger.info("deferred run enqueued", extra={"run_id": run.run_id})

    def _unrecorded(self, thread_id: str, reasons: dict[str, str]) -> RunOutcome:
        """Questions the ledger refused for good: the run ends `failed` naming cause and size.

        No sink heard of them (the ledger comes first), and a retry would meet the same refusal,
        so the message is consumed and the thread is free for a new run.
        """
        error = self._count_unrecordable(reasons)
        metrics.add_metric(name=RUNS_FAILED, unit=MetricUnit.Count, value=1)
        self._start_deferred(thread_id, self.ledger.thread_failed(thread_id, error))
        return RunOutcome(thread_id=thread_id, status="failed", error=error)

    @staticmethod
    def _count_unrecordable(reasons: dict[str, str]) -> str:
        """Log and count questions the ledger refused for good; their reasons as one error."""
        error = "; ".join(reasons.values())
        logger.error("question unrecordable", extra={"questions": list(reasons), "error": error})
        metrics.add_metric(name=QUESTIONS_UNRECORDABLE, unit=MetricUnit.Count, value=len(reasons))
        return error

    def _collided(self, thread_id: str, collisions: list[QuestionCollisionError]) -> RunOutcome:
        """Questions published under ids the ledger holds for other questions: a `wait.collision`.

        Answering the stored question would resume this one with an answer to something else, so
        the run ends `failed` with the collision as its error, for a person to look at.
        """
        error = "; ".join(f"wait.collision: {exc.message}" for exc in collisions)
        logger.error(
            "wait.collision",
            extra={"collisions": [exc.question_id for exc in collisions], "error": error},
        )
        metrics.add_metric(name=QUESTION_COLLISIONS, unit=MetricUnit.Count, value=len(collisions))
        self._start_deferred(thread_id, self.ledger.thread_failed(thread_id, error))
        return RunOutcome(thread_id=thread_id, status="failed", error=error)

    def _graph_failed(
        self, thread_id: str, question: QuestionRecord | None, exc: BaseException | None
    ) -> RunOutcome:
        """The graph raised: the run ends now, the message is consumed, the thread is free."""
        error = f"{type(exc).__name__}: {exc}" if exc is not None else "the graph failed"
        logger.warning("run failed: the graph raised", extra={"error": error}, exc_info=exc)
        metrics.add_metric(name=RUNS_FAILED, unit=MetricUnit.Count, value=1)
        if question is not None and self.ledger.mark_resume_failed(question, error, attempts=1):
            metrics.add_metric(name=RESUME_FAILURES, unit=MetricUnit.Count, value=1)
        self._start_deferred(thread_id, self.ledger.thread_failed(thread_id, error))
        return RunOutcome(thread_id=thread_id, status="failed", error=error)

    def _infrastructure_failed(
        self, thread_id: str, question: QuestionRecord | None, exc: Exception, receive_count: int
    ) -> None:
        """An AWS call failed: ``retrying`` while attempts remain, else recorded before the DLQ."""
        error = f"{type(exc).__name__}: {exc}"
        if receive_count < self.max_receive_count:
            logger.warning(
                "run will be retried",
                extra={"attempt": receive_count, "of": self.max_receive_count, "error": error},
            )
            self._best_effort(lambda: self.ledger.thread_retrying(thread_id, receive_count, error))
            return
        logger.error("run failed on its last attempt; the message goes to the DLQ", extra={"error": error})
        metrics.add_metric(name=RUNS_FAILED, unit=MetricUnit.Count, value=1)

        def record() -> None:
            attempts = receive_count
            if question is not None and self.ledger.mark_resume_failed(question, error, attempts=attempts):
                metrics.add_metric(name=RESUME_FAILURES, unit=MetricUnit.Count, value=1)
            self._start_deferred(thread_id, self.ledger.thread_failed(thread_id, error))

        self._best_effort(record)

    @staticmethod
    def _best_effort(write: Callable[[], None]) -> None:
        # The failure being recorded may be the ledger's own: never let it hide the first error.
        try:
            write()
        except Exception:
            logger.exception("could not record the failure in the ledger")
