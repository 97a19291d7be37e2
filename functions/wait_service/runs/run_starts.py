"""Starts: a message checked before it runs, a start deferred behind standing questions, the graph invoked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph.types import Command
from ulid import ULID

from agent_wait.errors import InputInvalidError, InvalidRequestError
from wait_service.ledger.statuses import OPEN
from wait_service.limits import MAX_DEPTH, check_numbers, check_thread_id, depth
from wait_service.observability import logger
from wait_service.runs.async_answers import answer_input
from wait_service.runs.failures import is_infrastructure_failure
from wait_service.runs.inbox import ResumeMessage, StartMessage
from wait_service.runs.input_schema import check_input, graph_input_schema
from wait_service.runs.run_outcome import (
    _UNSET,
    MAX_QUESTION_ID,
    RUN_ID_KEY,
    Graph,
    RunOutcome,
    _GraphFailed,
    _question_ids,
)
from wait_service.runs.run_parking import RunParking

if TYPE_CHECKING:
    from wait_service.ledger import QuestionRecord


class RunStarts(RunParking):
    """What a message may run, and the graph's invocation for a start or a resume."""

    def _message_error(self, message: StartMessage | ResumeMessage) -> str | None:
        """Why a parsed message cannot be run (``None``: it can).

        The api's own rules, applied again to what reached the inbox another way (a forged or
        hand-written message, or a start queued before the graph's schema changed): a thread id
        the api accepts, a question id a ledger key can hold, and a start's input storable (depth,
        numbers) and fitting the graph's input schema, as the api checks it before it queues.
        """
        try:
            check_thread_id(message.thread_id)
        except InvalidRequestError as exc:
            return f"invalid_message: {exc.message}"
        if isinstance(message, ResumeMessage):
            if len(message.question_id) > MAX_QUESTION_ID:
                return f"invalid_message: question_id is longer than {MAX_QUESTION_ID} characters"
            return None
        if depth(message.input) > MAX_DEPTH:
            return f"input_invalid: input nests deeper than {MAX_DEPTH} levels"
        try:
            check_numbers(message.input, "input")
            check_input(message.input, self._graph_input_schema())
        except (InvalidRequestError, InputInvalidError) as exc:
            return f"input_invalid: {exc.message}"
        return None

    def _graph_input_schema(self) -> dict[str, Any] | None:
        # Built on the first start (a resume never needs it), then kept for the container's life.
        if self.input_schema is _UNSET:
            self.input_schema = _schema_of(self.graph)
        return self.input_schema

    def _standing(self, run_id: str | None, config: dict[str, Any]) -> tuple[list[Any], bool]:
        """The interrupts a new run finds its thread parked on, and whether this run parked it.

        LangGraph restarts a parked thread invoked with input again (pinned in
        ``tests/unit/langgraph``), so a start never runs on a parked thread: a redelivery of the
        start that parked it republishes, any other run is deferred.
        """
        state = self.graph.get_state(config)
        interrupts = list(getattr(state, "interrupts", ()) or ())
        same_run = run_id is not None and (state.metadata or {}).get(RUN_ID_KEY) == run_id
        return interrupts, same_run

    def _answerable(self, interrupts: list[Any]) -> bool:
        """Whether a person can still answer one of the interrupts a thread is parked on.

        A run that failed before its questions reached the ledger leaves interrupts nobody can
        answer; a new run must not wait behind them.
        """
        for question_id in _question_ids(interrupts):
            question = self.ledger.find_question(question_id)
            if question is not None and question.status in OPEN:
                return True
        return False

    def _defer(self, message: StartMessage, interrupts: list[Any]) -> RunOutcome:
        # The message succeeds: failing it would hold every later message of the thread's FIFO
        # group, the answer's resume included, behind it.
        pending = _question_ids(interrupts)
        run_id = message.run_id or str(ULID())
        self.ledger.defer_run(message.thread_id, run_id, message.input, started_by=self._requester)
        logger.info("run deferred until the thread's questions are answered", extra={"pending": pending})
        return RunOutcome(thread_id=message.thread_id, status="deferred", pending=pending)

    def _invoke(
        self,
        message: StartMessage | ResumeMessage,
        question: QuestionRecord | None,
        settled: bool,
        parked: list[Any],
        config: dict[str, Any],
        answer_run: str | None = None,
        batch: list[QuestionRecord] | None = None,
    ) -> Any:
        if question is not None and settled:
            # The thread ran on with this answer already (a redelivered resume whose run was
            # applied before a later write failed): finish the bookkeeping from the checkpoint.
            state = self.graph.get_state(config)
            interrupts = list(getattr(state, "interrupts", ()) or ())
            return {"__interrupt__": interrupts} if interrupts else dict(state.values or {})
        if parked:
            # A redelivered start: invoking again would start the graph over and raise the
            # question under a new id, orphaning the one already announced. Republish the
            # standing questions instead; their dedupe_keys make that harmless downstream.
            logger.info("start message redelivered; republishing the standing questions")
            return {"__interrupt__": parked}
        try:
            if question is not None and answer_run is not None:
                # Nothing is parked on an async question: its answer is a new run's input.
                config["metadata"] = {RUN_ID_KEY: answer_run}
                return self.graph.invoke(answer_input(question), config, durability=self.durability)
            if question is not None and batch:
                return self._resume_batch(batch, config)
            if question is not None:
                command: Command[Any] = Command(resume={question.question_id: question.answer})
                return self.graph.invoke(command, config, durability=self.durability)
            assert isinstance(message, StartMessage)
            if message.run_id is not None:
                config["metadata"] = {RUN_ID_KEY: message.run_id}
            return self.graph.invoke(message.input, config, durability=self.durability)
        except Exception as exc:
            if is_infrastructure_failure(exc):
                raise
            raise _GraphFailed from exc


def _schema_of(graph: Graph) -> dict[str, Any] | None:
    """The graph's input JSON schema, ``None`` when it has none to give (any input is run)."""
    schema, why = graph_input_schema(graph)
    if why is not None:
        logger.warning(
            "the graph's input schema could not be built; starts are not checked", extra={"reason": why}
        )
    return schema
