"""The resume: the answer read from the ledger, checked, the resume command, the question recorded resumed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from langgraph.types import Command

from agent_wait.langchain_hitl import ToolRuns, resume_value, sibling_ids
from agent_wait.langchain_hitl import receipts as tool_receipts
from agent_wait.receipts import Receipt, emit_receipt
from wait_service.metric_names import QUESTIONS_RESUMED, RESUMES_REFUSED
from wait_service.observability import logger, metrics
from wait_service.runs.async_answers import answer_input, answer_run_id, is_async_question
from wait_service.runs.run_failures import RunFailures
from wait_service.runs.run_outcome import RESUMABLE, RunOutcome, _mapping, _question_ids, _receipt_item
from wait_service.workers import shared_pool

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from wait_service.ledger import QuestionRecord
    from wait_service.runs.inbox import ResumeMessage

# Worker threads for calls a message makes at once with others (two per message; a process that
# runs several runners at once, the local stack, shares them). Threads start as they are needed.
WORKERS = 8


class RunResumes(RunFailures):
    """Resuming a thread with an answer the ledger holds, one question or a middleware's batch."""

    def _resumable(
        self, message: ResumeMessage, config: dict[str, Any]
    ) -> tuple[QuestionRecord | None, bool, bool]:
        """The question to resume with its ledger answer, whether the thread still waits on it,
        and whether the thread was marked running on the way.

        ``(None, False, False)`` refuses the message: no such question, another thread's, no
        recorded answer, or a question the thread does not wait on and never did since it was
        decided. The thread's item says whether it is parked on the question (marking it running
        in the same write), in the same round trip as the question is read; only when it does not
        is the checkpoint read.
        """
        question, waiting = self._read_and_mark(message)
        reason = None
        pending = False
        if question is None:
            reason = "no such question"
        elif question.thread_id != message.thread_id:
            reason = "the question belongs to another thread"
        elif question.status not in RESUMABLE:
            reason = f"the question has no answer to resume with (status {question.status})"
        elif is_async_question(question):
            # Never parked on: the answer runs once, as a new run (a DLQ redrive of a failed one
            # runs it again).
            if question.resumed_at is not None:
                reason = "the answer to this async question already ran on the thread"
        elif waiting:
            return question, True, True
        else:
            state = self.graph.get_state(config)
            pending = message.question_id in _question_ids(getattr(state, "interrupts", ()) or ())
            if not pending and (question.status == "resume_failed" or question.resumed_at is not None):
                reason = "the thread does not wait on this question"
        if reason is not None:
            if waiting:
                # Marked running at once with the read: parked on the question again, as before.
                self.ledger.waiting_again(message.thread_id, message.question_id)
            logger.warning("resume refused", extra={"reason": reason})
            metrics.add_metric(name=RESUMES_REFUSED, unit=MetricUnit.Count, value=1)
            return None, False, False
        return question, pending, False

    def _read_and_mark(self, message: ResumeMessage) -> tuple[QuestionRecord | None, bool]:
        """The question, and whether the thread was parked on it (now marked running), at once.

        Two calls made together, one round trip: the read of the question and
        :meth:`~wait_service.ledger.ThreadStore.resume_if_waiting`. Their order does not
        matter for recovery: the mark only holds on a thread parked on this question, and every
        failure after it leaves the message to be retried, whose redelivery reads the checkpoint
        instead (the thread is no longer ``interrupted``). A resume refused once the question is
        read (no answer yet) parks the thread on it again (:meth:`_resumable`).
        """
        mark = self._pool().submit(self.ledger.resume_if_waiting, message.thread_id, message.question_id)
        try:
            question = self.ledger.find_question(message.question_id)
        finally:
            # Never leave the mark running unseen: its outcome (or its error) is taken either way.
            waiting = mark.result()
        return question, waiting

    def _disarm_early(self, question: QuestionRecord) -> None:
        """Start deleting the decided ``question``'s timer on the pool, at once with its run.

        :meth:`_disarmed` takes the delete's outcome before the question is recorded resumed, as
        the delete made at that point would be: a failed one fails the message, and the question
        stays unrecorded until the retry. A delete that lands while the run fails costs nothing:
        the question is decided, and a timer of a decided question does nothing.
        """
        if self.timers is not None:
            self._disarming = (question.question_id, self._pool().submit(self.timers.cancel, question))

    def _disarmed(self, question: QuestionRecord) -> None:
        """Delete ``question``'s timer: take the delete started with the run, else make it now."""
        disarming = self._disarming
        if disarming is not None and disarming[0] == question.question_id:
            self._disarming = None
            disarming[1].result()
        elif self.timers is not None:
            # (A delete started for another question is left for `_forget_disarming`.)
            self.timers.cancel(question)

    def _forget_disarming(self) -> None:
        """After a message: wait for a delete nothing took (the run failed first), keeping its error
        out of the message's outcome (the retry, or the timer finding its question decided, covers it)."""
        disarming, self._disarming = self._disarming, None
        if disarming is not None:
            try:
                disarming[1].result()
            except Exception as exc:
                logger.warning("the resumed question's timer was not deleted", extra={"error": str(exc)})

    @staticmethod
    def _pool() -> ThreadPoolExecutor:
        """The workers for calls made at once with others: the checkpoint read ahead and the
        thread's mark (one pool per process, created on first use)."""
        return shared_pool("runner", WORKERS)

    def _batch(self, question: QuestionRecord) -> tuple[list[QuestionRecord], list[str]]:
        """The batch ``question`` belongs to (``[]`` for any other) and its undecided ids."""
        ids = sibling_ids(question.question)
        found = {
            qid: self.ledger.find_question(qid) if qid != question.question_id else question for qid in ids
        }
        undecided = [qid for qid, q in found.items() if q is None or q.status not in RESUMABLE]
        return [q for q in found.values() if q is not None], undecided

    def _await_batch(self, thread_id: str, question: QuestionRecord, config: dict[str, Any]) -> RunOutcome:
        """Keep the thread parked on the questions still undecided; the answer waits in the ledger."""
        state = self.graph.get_state(config)
        remaining = [
            qid
            for qid in _question_ids(getattr(state, "interrupts", ()) or ())
            if (q := self.ledger.find_question(qid)) is None or q.status not in RESUMABLE
        ]
        if self.timers is not None:
            self.timers.cancel(question)
        self.ledger.thread_interrupted(thread_id, remaining)
        logger.info("answer kept until its batch is decided", extra={"pending": remaining})
        return RunOutcome(thread_id=thread_id, status="interrupted", pending=remaining)

    def _resume_batch(self, batch: list[QuestionRecord], config: dict[str, Any]) -> Any:
        """Resume the middleware's interrupt with every decision, in order; receipts of the tools."""
        ordered = sorted(batch, key=lambda q: sibling_ids(q.question).index(q.question_id))
        interrupt_id = ordered[0].question_id.rsplit("-", 1)[0]
        decided = [(q.question, q.answer) for q in ordered]
        runs = ToolRuns()
        config["callbacks"] = [runs.handler()]
        command: Command[Any] = Command(resume={interrupt_id: resume_value(decided)})
        result = self.graph.invoke(command, config, durability=self.durability)
        now = self._clock()
        questions = [(q.question_id, _mapping(q.question), q.answer) for q in ordered]
        for receipt in tool_receipts(questions, runs, now=now):
            emit_receipt(receipt)
        return result

    def _defer_answer(self, question: QuestionRecord, interrupts: list[Any]) -> RunOutcome:
        """Keep an async answer's run for after the questions its thread is parked on.

        The run is the thread's from now on (it starts when the thread's current run ends), so
        the question is recorded ``resumed`` here and its timers are disarmed; the run id is the
        answer's own, so a redelivered message keeps it once.
        """
        pending = _question_ids(interrupts)
        self.ledger.defer_run(
            question.thread_id,
            answer_run_id(question.question_id),
            answer_input(question),
            started_by=question.requested_by,
        )
        if self.ledger.mark_resumed(question):
            metrics.add_metric(name=QUESTIONS_RESUMED, unit=MetricUnit.Count, value=1)
        if self.timers is not None:
            self.timers.cancel(question)
        logger.info(
            "async answer deferred until the thread's questions are answered", extra={"pending": pending}
        )
        return RunOutcome(
            thread_id=question.thread_id, status="deferred", pending=pending, resumed=question.question_id
        )

    def _record_receipts(self, receipts: list[Receipt]) -> None:
        """Keep what each resumed call reported on its question; the first receipt stands."""
        for receipt in receipts:
            self.ledger.record_receipt(receipt.question_id, _receipt_item(receipt))

    def _resumed_and_ended(
        self,
        question: QuestionRecord,
        mine: list[Receipt],
        end: dict[str, Any],
        delivered: list[dict[str, Any]] | None = None,
    ) -> bool:
        """Record ``question`` resumed with the run's end ``end`` in one transaction, else alone.

        ``True`` when the transaction wrote both. ``False`` when DynamoDB cancelled it (nothing
        written): the question is then recorded on its own here, and the caller writes the end
        (and the questions ``delivered`` would have recorded delivered).
        """
        own = mine[0] if mine else None
        receipt = None if own is None else _receipt_item(own)
        if self.ledger.resumed_and_ended(question, end, receipt=receipt, delivered=delivered or ()):
            metrics.add_metric(name=QUESTIONS_RESUMED, unit=MetricUnit.Count, value=1)
            return True
        self._mark_resumed(question, mine)
        return False

    def _mark_resumed(self, question: QuestionRecord, mine: list[Receipt]) -> None:
        """Record ``question`` resumed on its own write, its receipt riding on it."""
        own = mine[0] if mine else None
        if self.ledger.mark_resumed(question, receipt=None if own is None else _receipt_item(own)):
            metrics.add_metric(name=QUESTIONS_RESUMED, unit=MetricUnit.Count, value=1)
        else:
            # A duplicate resume (already `resumed`) loses the conditional write and counts
            # nothing; its receipt is kept on its own write, where the first receipt stands.
            self._record_receipts(mine)
