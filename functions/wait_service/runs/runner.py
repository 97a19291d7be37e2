"""The runner: one inbox message, one graph run, its questions announced, the thread recorded.

This is the seed's entry point and its one ``if``: a message naming a question resumes the thread
with ``Command(resume={question_id: answer})``; any other message starts a run with its input.
The answer to an async-mode question (``@wait(mode="async")``, nothing parked on it) starts a new
run instead, whose input is ``{"agent_wait_answer": {...}}`` (``wait_service.runs.async_answers``).
Async questions raised during a run are announced through the same fan-out: the runner lends it
to ``@wait`` with ``agent_wait.hosting.hosting_async_waits``.
After the run, ``publish_interrupts`` announces each question through the composite of ledger,
SNS topic and SQS outbox, and arms its timers; the thread is recorded ``interrupted`` (pending
ids), ``done`` (output JSON) or ``failed`` (error).

**The ledger is the only source of answers.** A resume message says which question to resume;
the answer is read from the ledger when the message is processed, and only for a question the
thread has pending in its checkpoint. Anything else is refused, counted and consumed.

**Failures end visibly.** An exception raised by the graph ends the run at once: the thread is
``failed`` with the error and the message is consumed, so the thread takes a new run at once.
Only infrastructure failures (throttling, timeouts, 5xx from AWS) are retried, with exponential
backoff, up to the inbox's ``maxReceiveCount``; meanwhile the thread is ``retrying``; the last
failure marks the question ``resume_failed`` and the thread ``failed`` before the DLQ.

This is the only module of the receive path that imports LangGraph.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import ClientError
from langgraph.types import Command
from pydantic_core import to_json
from ulid import ULID

from agent_wait import BaseAnnounce, CompositeAnnounce
from agent_wait.aws import DynamoDbAnnounce
from agent_wait.errors import AnnounceError, InputInvalidError, InvalidRequestError, QuestionCollisionError
from agent_wait.hosting import AsyncHost, hosting_async_waits
from agent_wait.langchain_hitl import ToolRuns, resume_value, sibling_ids
from agent_wait.langchain_hitl import receipts as tool_receipts
from agent_wait.receipts import Receipt, collect_receipts, emit_receipt
from wait_service.constants import MAX_RECEIVE_COUNT
from wait_service.ledger import Clock, Ledger, QuestionRecord, ThreadRecord, utcnow
from wait_service.ledger.statuses import OPEN
from wait_service.limits import MAX_DEPTH, check_numbers, check_thread_id, depth
from wait_service.metric_names import (
    POISON_MESSAGES,
    QUESTION_COLLISIONS,
    QUESTIONS_RAISED,
    QUESTIONS_RESUMED,
    QUESTIONS_UNRECORDABLE,
    RESUME_FAILURES,
    RESUMES_REFUSED,
    RUNS_FAILED,
)
from wait_service.observability import logger, metrics, tracer
from wait_service.runs.async_answers import answer_input, answer_run_id, is_async_question
from wait_service.runs.checkpoint_prefetch import PrefetchingSaver
from wait_service.runs.failures import is_infrastructure_failure
from wait_service.runs.inbox import Inbox, ResumeMessage, StartMessage, parse_message
from wait_service.runs.input_schema import check_input, graph_input_schema

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient

    from agent_wait import Envelope
    from agent_wait.envelope import Question
    from wait_service.lifecycle.timers import Timers
    from wait_service.settings import Durability, Settings

PublishFn = Callable[..., list["Envelope"]]

# Statuses whose recorded answer a resume may carry into the thread (`resume_failed`: a DLQ redrive).
RESUMABLE = frozenset({"answered", "expired", "revoked", "resume_failed"})
# Seconds an infrastructure failure waits before attempt n + 1 (n = 1, 2, ...): 2, 4, 8, 16.
BACKOFF_BASE_SECONDS = 2
# Longest question id a message may name (question ids are 32 to 64 hex digits; a ledger key holds 2 KB).
MAX_QUESTION_ID = 256
# The input schema is the graph's own until a caller says otherwise.
_UNSET: Any = object()
# Worker threads for calls a message makes at once with others (two per message; a process that
# runs several runners at once, the local stack, shares them). Threads start as they are needed.
WORKERS = 8
_EXECUTOR: ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()


class Graph(Protocol):
    """What the runner needs of a compiled graph: the seam every hosted framework speaks.

    A LangGraph graph is one as is; an agent of another framework is adapted to it
    (``wait_service.runs.hosted_pydantic_ai``): ``invoke`` takes a start's input or a
    ``Command(resume={question_id: answer})`` and returns ``{"__interrupt__": [Interrupt]}`` when
    the thread parks, and ``get_state`` gives the ``interrupts``, ``values`` and ``metadata`` the
    thread holds.
    """

    def invoke(self, input: Any, config: Any, *, durability: Durability | None = None) -> Any: ...

    def get_state(self, config: Any) -> Any: ...


# Checkpoint metadata key naming the start message that produced a checkpoint.
RUN_ID_KEY = "agent_wait_run_id"


@dataclass(frozen=True)
class RunOutcome:
    """What one message did to its thread."""

    thread_id: str
    status: Literal["interrupted", "done", "deferred", "failed", "refused"]
    pending: list[str] = field(default_factory=list)
    delivered: list[str] = field(default_factory=list)
    resumed: str | None = None
    error: str | None = None


class _Tracking(BaseAnnounce):
    """Announces through ``inner`` and remembers, per question, which sinks took it.

    A composite is tracked child by child, so the lifecycle shows each sink and the runner knows
    whether the ledger itself recorded the question. The ledger comes first: the other sinks
    (topic, outbox, Slack) hear of a question only once the ledger holds it, so nobody is told of
    a question the api cannot open. A question the ledger refuses for good (too large, a value it
    cannot store) is ``unrecordable``, with the reason; one it could not write this time (a
    throttle) reaches no other sink either, and the message is retried.
    """

    name = "tracking"

    def __init__(self, inner: BaseAnnounce, *, requested_by: str | None = None) -> None:
        # Recorded on each question item the ledger sink writes: who started the run.
        self.extra = {"requested_by": requested_by} if requested_by is not None else None
        self.published: list[Envelope] = []
        self.sinks: dict[str, dict[str, bool]] = {}
        self.recorded: dict[str, bool] = {}
        self.collisions: dict[str, QuestionCollisionError] = {}
        self.unrecordable: dict[str, str] = {}
        children = inner.children if isinstance(inner, CompositeAnnounce) else [inner]
        # Sinks run concurrently; the lifecycle lists them in the announcers' order.
        self.order = [child.name for child in children]
        self._ledger_sinks = {child.name for child in children if isinstance(child, DynamoDbAnnounce)}
        self._ledgers = [_Recorder(child, self) for child in children if isinstance(child, DynamoDbAnnounce)]
        others = [_Recorder(child, self) for child in children if not isinstance(child, DynamoDbAnnounce)]
        # The other sinks, concurrently, once the ledger holds the question.
        self.inner = CompositeAnnounce(others, name=inner.name) if others else None

    def deliver(self, envelope: Envelope) -> None:
        self.published.append(envelope)
        recorded = True
        for ledger in self._ledgers:
            recorded = ledger.announce(envelope) and recorded
        if recorded and self.inner is not None:
            self.inner.announce(envelope)

    def note(self, sink: str, envelope: Envelope, ok: bool) -> None:
        self.sinks.setdefault(envelope.question_id, {})[sink] = ok
        if sink in self._ledger_sinks:
            self.recorded[envelope.question_id] = ok

    def delivered(self, question_id: str) -> bool:
        results = self.sinks.get(question_id, {})
        return bool(results) and all(results.values())

    def is_recorded(self, question_id: str) -> bool:
        # Without a ledger sink among the announcers (tests), nothing says it is missing.
        return self.recorded.get(question_id, not self._ledger_sinks)


class _Recorder(BaseAnnounce):
    def __init__(self, inner: BaseAnnounce, tracking: _Tracking) -> None:
        self.inner = inner
        self.name = inner.name
        self._tracking = tracking

    def deliver(self, envelope: Envelope) -> None:
        if isinstance(self.inner, DynamoDbAnnounce):
            # The ledger sink says when the id is taken by another question: a collision is not
            # a failure to retry, it is reported on the thread. Nor is a question the ledger
            # refuses for good (too large, a value it cannot store): retrying cannot change it.
            try:
                self.inner.record(envelope, extra=self._tracking.extra)
            except QuestionCollisionError as exc:
                self._tracking.collisions[envelope.question_id] = exc
                ok = False
            except Exception as exc:
                ok = False
                if is_infrastructure_failure(exc):
                    logger.warning(
                        "the ledger could not record the question; the message is retried",
                        extra={"question": envelope.question_id, "error": _first_line(exc)},
                    )
                else:
                    self._tracking.unrecordable[envelope.question_id] = _unrecordable(envelope, exc)
            else:
                ok = True
        else:
            ok = self.inner.announce(envelope)
        self._tracking.note(self.name, envelope, ok)
        if not ok:
            raise AnnounceError(f"{self.name} failed", question_id=envelope.question_id)


def output_json(result: Any) -> str:
    """The run's final values as JSON, without LangGraph's ``__interrupt__`` key.

    Values JSON cannot hold (messages, dataclasses) are rendered by pydantic, else as strings.

    Examples
    --------
    >>> output_json({"refund": {"amount": 40}, "__interrupt__": ()})
    '{"refund":{"amount":40}}'
    """
    if isinstance(result, dict):
        result = {k: v for k, v in result.items() if k != "__interrupt__"}
    return to_json(result, fallback=str).decode()


class RunnerService:
    """Runs the graph for inbox messages and records what happened in the ledger.

    Parameters
    ----------
    graph:
        A compiled LangGraph graph with a checkpointer.
    announce:
        Where envelopes go (the composite of ledger, topic and outbox in the deployment).
    ledger:
        The question and thread ledger.
    publish:
        ``agent_wait.langgraph.publish_interrupts``; injectable for tests.
    reply_url:
        Template with ``{question_id}`` for the envelopes' ``reply_with.url``.
    default_ttl:
        Seconds, for questions whose policy sets no ttl.
    max_receive_count:
        The inbox's ``maxReceiveCount``: the last attempt of a message that keeps failing on
        infrastructure records the failure before the queue moves the message to the DLQ.
    clock:
        Current UTC time for the envelopes' ``created_at``; injected by tests.
    inbox:
        How a retried message is delayed; ``None`` retries at the queue's visibility timeout.
        (A run deferred behind a thread's questions is queued in the ledger once the thread's
        current run ends; the ledger's stream enqueues its start.)
    timers:
        Arms the expiry and reminder timers of each new question and disarms them once the
        question is decided; ``None`` when the deployment has no scheduler.
    durability:
        LangGraph's checkpoint durability for each run (``AGENT_WAIT_DURABILITY``); ``None`` keeps
        LangGraph's default.
    input_schema:
        The JSON schema every start's input must fit (the one the api checks); by default the
        graph's own (``get_input_jsonschema()``), built at the first start; ``None`` runs any input.
    policies:
        The policy store's say on each question raised
        (``wait_service.answers.policy_store.PolicyOverrides``):
        given to ``publish`` and to async-mode ``@wait`` calls; ``None``: the code's policies alone.

    Examples
    --------
    >>> runner = RunnerService(graph, announce, ledger)  # doctest: +SKIP
    >>> runner.run(StartMessage(thread_id="t-1", input={"customer": "c-17", "amount": 40}))  # doctest: +SKIP
    RunOutcome(thread_id='t-1', status='interrupted', pending=['0b1f'], delivered=['0b1f'], resumed=None)
    """

    def __init__(
        self,
        graph: Graph,
        announce: BaseAnnounce,
        ledger: Ledger,
        *,
        publish: PublishFn | None = None,
        reply_url: str | None = None,
        default_ttl: int | None = None,
        max_receive_count: int = MAX_RECEIVE_COUNT,
        clock: Clock = utcnow,
        inbox: Inbox | None = None,
        timers: Timers | None = None,
        durability: Durability | None = None,
        input_schema: dict[str, Any] | None = _UNSET,
        policies: Callable[[Question], Question] | None = None,
    ) -> None:
        if publish is None:
            from agent_wait.langgraph import publish_interrupts

            publish = publish_interrupts
        self.graph = graph
        self.announce = announce
        self.ledger = ledger
        self.publish = publish
        self.reply_url = reply_url
        self.default_ttl = default_ttl
        self.max_receive_count = max_receive_count
        self._clock = clock
        self.inbox = inbox
        self.timers = timers
        self.durability = durability
        self.input_schema = input_schema
        self.policies = policies
        # Who started the run the current message runs (one message at a time per instance).
        self._requester: str | None = None
        # The graph's checkpointer when it can read a thread's checkpoint ahead (build_runner's).
        saver = getattr(graph, "checkpointer", None)
        self._saver = saver if isinstance(saver, PrefetchingSaver) else None

    def process_record(self, record: SQSRecord) -> RunOutcome:
        """The batch processor's record handler: parse the body and run it.

        A body that is not a message is consumed (logged and counted), never retried: failing it
        would hold every later message of its thread behind it.
        """
        receive_count = int(record.attributes.approximate_receive_count or 1)
        try:
            message = parse_message(record.body)
        except ValueError as exc:
            return self._poison("", f"not a start or resume message: {_first_line(exc)}", len(record.body))
        error = self._message_error(message)
        if error is not None:
            run_id = message.run_id if isinstance(message, StartMessage) else None
            return self._poison(message.thread_id, error, len(record.body), run_id=run_id)
        try:
            return self.run(message, receive_count=receive_count, message_id=record.message_id)
        except Exception:
            if self.inbox is not None and receive_count < self.max_receive_count:
                # Exponential backoff: the message comes back after 2, 4, 8, 16 s, not after the
                # queue's visibility timeout. If even that call fails, the timeout applies.
                delay = BACKOFF_BASE_SECONDS * 2 ** (receive_count - 1)
                inbox = self.inbox
                self._best_effort(lambda: inbox.delay(record.receipt_handle, delay))
            raise

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

    @tracer.capture_method
    def run(
        self, message: StartMessage | ResumeMessage, *, receive_count: int = 1, message_id: str | None = None
    ) -> RunOutcome:
        """Run one message; raises only on an infrastructure failure (the message is retried).

        ``message_id`` (the inbox message's id) lets a start claim its run: a second message for
        a run another message started is a duplicate, consumed without running.
        """
        question_id = message.question_id if isinstance(message, ResumeMessage) else None
        logger.append_keys(thread_id=message.thread_id, question_id=question_id)
        # Who started the run this message runs (a resume: read from its question in `_run`).
        self._requester = None
        if self._saver is not None:
            # The graph's first read of the checkpoint, made at once with the ledger's first calls.
            self._saver.prefetch({"configurable": {"thread_id": message.thread_id}}, self._pool())
        try:
            if isinstance(message, StartMessage) and message.run_id is not None and message_id is not None:
                claimed, self._requester = self.ledger.claim(message.run_id, message_id)
                if not claimed:
                    logger.warning(
                        "duplicate start refused: another message ran it", extra={"run_id": message.run_id}
                    )
                    metrics.add_metric(name=RESUMES_REFUSED, unit=MetricUnit.Count, value=1)
                    return RunOutcome(thread_id=message.thread_id, status="refused")
            return self._run(message, receive_count)
        finally:
            self._requester = None
            if self._saver is not None:
                self._saver.discard()
            logger.remove_keys(["thread_id", "question_id"])

    def _run(self, message: StartMessage | ResumeMessage, receive_count: int) -> RunOutcome:
        thread_id = message.thread_id
        config: dict[str, Any] = {"configurable": {"thread_id": thread_id}}
        question: QuestionRecord | None = None
        parked: list[Any] = []
        settled = False
        # The questions of a HumanInTheLoopMiddleware batch the answer belongs to, in its order.
        batch: list[QuestionRecord] = []
        # The run carrying an async question's answer (None: a start or an ordinary resume).
        answer_run: str | None = None
        # What the resumed `@wait` calls reported while the graph ran (the audit's receipts).
        receipts: list[Receipt] = []
        try:
            if isinstance(message, ResumeMessage):
                question, pending, running = self._resumable(message, config)
                if question is None:
                    return RunOutcome(thread_id=thread_id, status="refused")
                # The resumed run is the one that raised the question: its starter stays.
                self._requester = question.requested_by
                if is_async_question(question):
                    answer_run = answer_run_id(question.question_id)
                    interrupts, same_run = self._standing(answer_run, config)
                    if interrupts and not same_run and self._answerable(interrupts):
                        return self._defer_answer(question, interrupts)
                    parked = interrupts if same_run else []
                else:
                    settled = not pending
                    batch, undecided = self._batch(question)
                    if undecided and not settled:
                        # One answer of a batch: the thread resumes once every one is decided.
                        return self._await_batch(thread_id, question, config)
            elif message.run_id is not None and self.ledger.start_if_at_rest(thread_id, message.run_id):
                # The thread's last run ended done (or none ran): its checkpoint waits on nothing,
                # so there is nothing to defer behind or to republish, and no need to read it.
                running = True
            else:
                interrupts, same_run = self._standing(message.run_id, config)
                if interrupts and not same_run and self._answerable(interrupts):
                    return self._defer(message, interrupts)
                parked = interrupts if same_run else []
                running = False
            # The fan-out lent to async-mode `@wait` calls, tracked like the interrupts' own.
            hosted = _Tracking(self.announce, requested_by=self._requester)
            if answer_run is not None:
                self.ledger.claim_latest_run(thread_id, answer_run)
            if not running:
                self.ledger.thread_running(
                    thread_id, message.run_id if isinstance(message, StartMessage) else answer_run
                )
            host = AsyncHost(
                announce=hosted,
                reply_url=self.reply_url,
                default_ttl=self.default_ttl,
                now=self._clock,
                override=self.policies,
            )
            with collect_receipts() as receipts, hosting_async_waits(host):
                result = self._invoke(message, question, settled, parked, config, answer_run, batch)
        except _GraphFailed as failed:
            self._best_effort(lambda: self._record_receipts(receipts))
            self._best_effort(lambda: self._record_async(hosted))
            if hosted.unrecordable:
                self._count_unrecordable(hosted.unrecordable)
            return self._graph_failed(thread_id, question, failed.__cause__)
        except Exception as exc:
            if question is None and isinstance(message, ResumeMessage):
                # It failed while the resume was being checked (the question's or the thread's
                # read, or marking it running): the last attempt still marks the question.
                question = self._resuming(message, receive_count)
            self._infrastructure_failed(thread_id, question, exc, receive_count)
            raise
        try:
            self._record_async(hosted)
            outcome = self._after_run(
                thread_id,
                question,
                result,
                republished=settled or bool(parked),
                receipts=receipts,
                unrecordable=hosted.unrecordable,
            )
            for sibling in batch:
                if question is not None and sibling.question_id != question.question_id:
                    self._mark_resumed(sibling, [r for r in receipts if r.question_id == sibling.question_id])
            return outcome
        except _Undelivered:
            # Parked, and every question is in the ledger: the thread is `interrupted` and each
            # question answerable; the redelivery only republishes to the sinks that missed it.
            raise
        except Exception as exc:
            self._infrastructure_failed(thread_id, question, exc, receive_count)
            raise

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

    def _record_receipts(self, receipts: list[Receipt]) -> None:
        """Keep what each resumed call reported on its question; the first receipt stands."""
        for receipt in receipts:
            self.ledger.record_receipt(receipt.question_id, _receipt_item(receipt))

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
        :meth:`~wait_service.ledger.threads.ThreadStore.resume_if_waiting`. Their order does not
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

    @staticmethod
    def _pool() -> ThreadPoolExecutor:
        """The workers for calls made at once with others: the checkpoint read ahead and the
        thread's mark (one pool per process, created on first use)."""
        global _EXECUTOR
        with _EXECUTOR_LOCK:
            if _EXECUTOR is None:
                _EXECUTOR = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="runner")
            return _EXECUTOR

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
            self.timers.cancel(question)
        if unrecordable:
            if with_end is not None:
                self._mark_resumed(with_end, mine)
            return self._unrecorded(thread_id, unrecordable)
        tracking = _Tracking(self.announce, requested_by=self._requester)
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
            # way); creating a timer that exists changes nothing.
            for envelope in envelopes:
                if envelope.question_id in recorded:
                    self.timers.set(self.timers.for_envelope(envelope))
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
                self.timers.set(self.timers.for_envelope(envelope))
        if hosted.published:
            metrics.add_metric(name=QUESTIONS_RAISED, unit=MetricUnit.Count, value=len(hosted.published))

    def _start_deferred(self, thread_id: str, thread: ThreadRecord | None = None) -> None:
        """Queue the oldest run deferred on the thread, now that its current run has ended.

        ``thread`` is the item the run's end was written as (no second read). The run is queued
        as the api queues one (:meth:`~wait_service.ledger.threads.ThreadStore.queue_run`: the
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


# DynamoDB's item size limit, named in the error of a question too large to record.
_ITEM_LIMIT = 400 * 1024


def _unrecordable(envelope: Envelope, exc: BaseException) -> str:
    """Why the ledger refused ``envelope``'s question, with the item's size in bytes."""
    from agent_wait.aws.dynamodb import ledger_put

    try:
        item = ledger_put("ledger", envelope)["Item"]
        size = sum(len(name.encode()) + len(json.dumps(value).encode()) for name, value in item.items())
    except Exception:
        size = len(envelope.to_json().encode())
    cause = _first_line(exc)
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        cause = f"{error.get('Code', 'ClientError')}: {error.get('Message', '')}".strip()
    too_large = size > _ITEM_LIMIT or "size" in cause.lower()
    what = (
        f"too large ({size:,} bytes; a ledger item holds at most {_ITEM_LIMIT:,})"
        if too_large
        else (f"not storable ({size:,} bytes)")
    )
    return f"question {envelope.question_id} cannot be recorded in the ledger: {what}: {cause}"


def _question_ids(interrupts: Any) -> list[str]:
    """The question ids of a checkpoint's interrupts (a middleware batch stands for several)."""
    from agent_wait.langgraph import question_ids

    return question_ids(list(interrupts))


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _schema_of(graph: Graph) -> dict[str, Any] | None:
    """The graph's input JSON schema, ``None`` when it has none to give (any input is run)."""
    schema, why = graph_input_schema(graph)
    if why is not None:
        logger.warning(
            "the graph's input schema could not be built; starts are not checked", extra={"reason": why}
        )
    return schema


def _first_line(exc: BaseException) -> str:
    """The first line of an error, cut: a message body can be megabytes of hostile text."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


def _receipt_item(receipt: Receipt) -> dict[str, Any]:
    """A receipt as its question item keeps it."""
    return receipt.model_dump(mode="json", exclude={"question_id"})


class _Undelivered(AnnounceError):
    """A parked thread's questions are all in the ledger, but some other sink missed one."""


class _GraphFailed(Exception):
    """Raised from an exception of the graph itself (``__cause__``): not worth retrying."""


def build_announce(
    settings: Settings,
    *,
    dynamodb: DynamoDBClient | None = None,
    sns: SNSClient | None = None,
    sqs: SQSClient | None = None,
) -> BaseAnnounce:
    """The deployment's fan-out: ledger item, ``wait-created`` topic, outbox FIFO queue, and a Slack
    channel when the settings name one."""
    from agent_wait.aws import DynamoDbAnnounce, SnsAnnounce, SqsAnnounce

    children: list[BaseAnnounce] = [
        DynamoDbAnnounce(
            settings.require("ledger_table"), client=dynamodb, listing_shards=settings.listing_shards
        ),
        SnsAnnounce(settings.require("topic_arn"), client=sns),
        SqsAnnounce(settings.require("outbox_url"), client=sqs),
    ]
    if settings.slack_channel:
        # Slack's modules load only in a deployment that names a channel.
        from wait_service.channels.slack import build_slack_announce

        slack = build_slack_announce(settings, dynamodb=dynamodb)
        if slack is not None:
            children.append(slack)
    return CompositeAnnounce(children)


def build_runner(
    settings: Settings,
    *,
    dynamodb: DynamoDBClient | None = None,
    sns: SNSClient | None = None,
    sqs: SQSClient | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    scheduler: EventBridgeSchedulerClient | None = None,
    clock: Clock = utcnow,
) -> RunnerService:
    """The runner wired to the resources, graph and checkpointer named by ``settings``.

    Examples
    --------
    >>> runner = build_runner(Settings.from_env(os.environ))  # doctest: +SKIP
    """
    from wait_service.lifecycle.timers import build_timers
    from wait_service.runs.checkpointer import make_checkpointer
    from wait_service.runs.graph import load_graph
    from wait_service.settings import SettingsError

    graph = load_graph(
        settings.graph,
        # A LangGraph graph's checkpointer, read ahead by the runner; an agent of another framework
        # keeps its state in the store.
        checkpointer
        if settings.framework in ("pydantic_ai", "strands")
        else PrefetchingSaver(checkpointer if checkpointer is not None else make_checkpointer(settings)),
        framework=settings.framework,
        store=_agent_state_store(settings, dynamodb),
        sessions=_strands_sessions(settings),
    )
    if getattr(graph, "framework", None) == "strands" and graph.sessions is None:
        raise SettingsError(
            f"{settings.graph} is a Strands agent: its sessions live in the checkpoint bucket, and "
            "AGENT_WAIT_CHECKPOINT_BUCKET is not set (context checkpoint_bucket=true)"
        )
    if settings.checkpointer == "dynamodb" and not hasattr(graph, "builder"):
        raise SettingsError(
            f"AGENT_WAIT_CHECKPOINTER=dynamodb is a LangGraph checkpointer; {settings.graph} is not a "
            "LangGraph graph: keep AGENT_WAIT_CHECKPOINTER=aws (its table keeps the agent's state)"
        )
    if settings.checkpointer == "dynamodb":
        from wait_service.runs.checkpoint_dynamodb import refuse_subgraphs

        refuse_subgraphs(graph, settings.graph)
    ledger = Ledger(
        settings.require("ledger_table"),
        dynamodb,
        clock=clock,
        ttl_days=settings.ledger_ttl_days,
        listing_shards=settings.listing_shards,
    )
    return RunnerService(
        graph,
        build_announce(settings, dynamodb=dynamodb, sns=sns, sqs=sqs),
        ledger,
        reply_url=settings.reply_url,
        default_ttl=settings.default_ttl,
        clock=clock,
        inbox=Inbox(settings.require("inbox_url"), sqs),
        timers=build_timers(settings, scheduler, clock=clock),
        durability=settings.durability,
        policies=build_policy_overrides(settings, ledger, dynamodb=dynamodb),
    )


def _agent_state_store(settings: Settings, dynamodb: DynamoDBClient | None) -> Any:
    """Where an agent of another framework than LangGraph keeps its threads (the checkpoint table)."""
    if settings.framework == "langgraph" or not settings.checkpoint_table:
        return None
    from wait_service.runs.agent_state import AgentStateStore

    return AgentStateStore(settings.checkpoint_table, dynamodb, ttl_seconds=settings.checkpoint_ttl_seconds)


def _strands_sessions(settings: Settings) -> Callable[[str], Any] | None:
    """Where a Strands agent keeps each thread's session: the checkpoint bucket, when there is one."""
    if settings.framework not in (None, "strands") or not settings.checkpoint_bucket:
        return None
    import boto3

    from wait_service.runs.hosted_strands import S3Sessions

    return S3Sessions(settings.checkpoint_bucket, boto3.DEFAULT_SESSION)


def build_policy_overrides(
    settings: Settings, ledger: Ledger, *, dynamodb: DynamoDBClient | None = None
) -> Callable[[Question], Question] | None:
    """The policy store's overrides for questions raised, when the settings name a store."""
    if not settings.policy_table:
        return None
    from wait_service.answers.policy_store import CACHE_SECONDS, PolicyOverrides, PolicyStore

    cache = CACHE_SECONDS if settings.policy_cache_seconds is None else settings.policy_cache_seconds
    return PolicyOverrides(
        PolicyStore(settings.policy_table, dynamodb), ledger.find_question, cache_seconds=cache
    )
