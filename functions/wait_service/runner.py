"""The runner: one inbox message, one graph run, its questions announced, the thread recorded.

This is the seed's entry point and its one ``if``: a message naming a question resumes the thread
with ``Command(resume={question_id: answer})``; any other message starts a run with its input.
After the run, ``publish_interrupts`` announces each question through the composite of ledger,
SNS topic and SQS outbox; the thread is recorded ``interrupted`` (pending ids), ``done`` (output
JSON) or ``failed`` (error). A run that raises is recorded and re-raised, so the queue retries
the message and, after ``maxReceiveCount`` receives, moves it to the DLQ.

This is the only module of the receive path that imports LangGraph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from aws_lambda_powertools.metrics import MetricUnit
from langgraph.types import Command
from pydantic_core import to_json
from ulid import ULID

from agent_wait import BaseAnnounce, CompositeAnnounce
from agent_wait.errors import AnnounceError
from wait_service.inbox import Inbox, ResumeMessage, StartMessage, parse_message
from wait_service.ledger import Clock, Ledger, utcnow
from wait_service.metric_names import QUESTIONS_RAISED, QUESTIONS_RESUMED, RESUME_FAILURES, RUNS_FAILED
from wait_service.observability import logger, metrics, tracer
from wait_service.resources import MAX_RECEIVE_COUNT

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient

    from agent_wait import Envelope
    from wait_service.settings import Durability, Settings

PublishFn = Callable[..., list["Envelope"]]


class Graph(Protocol):
    """What the runner needs of a compiled graph."""

    def invoke(self, input: Any, config: Any, *, durability: Durability | None = None) -> Any: ...

    def get_state(self, config: Any) -> Any: ...


# Checkpoint metadata key naming the start message that produced a checkpoint.
RUN_ID_KEY = "agent_wait_run_id"


@dataclass(frozen=True)
class RunOutcome:
    """What one message did to its thread."""

    thread_id: str
    status: Literal["interrupted", "done", "deferred"]
    pending: list[str] = field(default_factory=list)
    delivered: list[str] = field(default_factory=list)
    resumed: str | None = None


class _Tracking(BaseAnnounce):
    """Announces through ``inner`` and remembers, per question, whether every sink took it."""

    name = "tracking"

    def __init__(self, inner: BaseAnnounce) -> None:
        self.inner = inner
        self.delivered: dict[str, bool] = {}

    def deliver(self, envelope: Envelope) -> None:
        self.delivered[envelope.question_id] = self.inner.announce(envelope)


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
        The inbox's ``maxReceiveCount``: on the last receive a failing resume marks its
        question ``resume_failed`` before the queue moves the message to the DLQ.
    clock:
        Current UTC time for the envelopes' ``created_at``; injected by tests.
    inbox:
        Where a run deferred behind a thread's questions is enqueued once the thread's current
        run ends; ``None`` keeps deferred runs on the thread item only.
    durability:
        LangGraph's checkpoint durability for each run (``AGENT_WAIT_DURABILITY``); ``None`` keeps
        LangGraph's default.

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
        durability: Durability | None = None,
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
        self.durability = durability

    def process_record(self, record: SQSRecord) -> RunOutcome:
        """The batch processor's record handler: parse the body and run it."""
        receive_count = int(record.attributes.approximate_receive_count or 1)
        return self.run(parse_message(record.body), receive_count=receive_count)

    @tracer.capture_method
    def run(self, message: StartMessage | ResumeMessage, *, receive_count: int = 1) -> RunOutcome:
        """Run one message; raises (after recording the failure) when the graph raises."""
        question_id = message.question_id if isinstance(message, ResumeMessage) else None
        logger.append_keys(thread_id=message.thread_id, question_id=question_id)
        try:
            return self._run(message, question_id, receive_count)
        finally:
            logger.remove_keys(["thread_id", "question_id"])

    def _run(
        self, message: StartMessage | ResumeMessage, question_id: str | None, receive_count: int
    ) -> RunOutcome:
        thread_id = message.thread_id
        config: dict[str, Any] = {"configurable": {"thread_id": thread_id}}
        parked = None
        if isinstance(message, StartMessage):
            interrupts, same_run = self._standing(message, config)
            if interrupts and not same_run:
                return self._defer(message, interrupts)
            parked = interrupts or None
        self.ledger.thread_running(thread_id, message.run_id if isinstance(message, StartMessage) else None)
        try:
            if parked is not None:
                # A redelivered start: invoking again would start the graph over and raise the
                # question under a new id, orphaning the one already announced. Republish the
                # standing questions instead; their dedupe_keys make that harmless downstream.
                logger.info("start message redelivered; republishing the standing questions")
                result: Any = {"__interrupt__": parked}
            elif isinstance(message, ResumeMessage):
                result = self.graph.invoke(
                    Command(resume={message.question_id: message.answer}), config, durability=self.durability
                )
            else:
                if message.run_id is not None:
                    config["metadata"] = {RUN_ID_KEY: message.run_id}
                result = self.graph.invoke(message.input, config, durability=self.durability)
        except Exception as exc:
            self._record_failure(thread_id, question_id, exc, receive_count)
            raise

        # The question is `resumed` before the thread records where the run went: a client that
        # sees the thread done or parked on its next question also sees this answer applied.
        if question_id is not None and self.ledger.mark_resumed(question_id):
            # A duplicate resume (already `resumed`) loses the conditional write and counts nothing.
            metrics.add_metric(name=QUESTIONS_RESUMED, unit=MetricUnit.Count, value=1)
        tracking = _Tracking(self.announce)
        envelopes = self.publish(
            result,
            thread_id,
            tracking,
            reply_url=self.reply_url,
            default_ttl=self.default_ttl,
            now=self._clock(),
        )
        delivered = [e.question_id for e in envelopes if tracking.delivered.get(e.question_id)]
        for delivered_id in delivered:
            self.ledger.mark_delivered(delivered_id)
        pending = [e.question_id for e in envelopes]
        if pending:
            if parked is None:  # a republish raises nothing new
                metrics.add_metric(name=QUESTIONS_RAISED, unit=MetricUnit.Count, value=len(pending))
            self.ledger.thread_interrupted(thread_id, pending)
            logger.info("thread parked", extra={"pending": pending, "delivered": delivered})
        else:
            self.ledger.thread_done(thread_id, output_json(result))
            logger.info("thread done")
            self._start_deferred(thread_id)

        undelivered = [qid for qid in pending if qid not in delivered]
        if undelivered:
            # Seed 000: "the next redelivery republishes with the same dedupe_key, and that is the
            # retry". The thread is parked and recorded; failing the message makes the queue hand
            # it back, and a redelivered message republishes instead of running the graph again.
            raise AnnounceError(
                f"questions {', '.join(undelivered)} did not reach every sink; the message is retried",
                thread_id=thread_id,
                question_id=undelivered[0],
            )
        return RunOutcome(
            thread_id=thread_id,
            status="interrupted" if pending else "done",
            pending=pending,
            delivered=delivered,
            resumed=question_id,
        )

    def _standing(self, message: StartMessage, config: dict[str, Any]) -> tuple[list[Any], bool]:
        """The interrupts a start finds its thread parked on, and whether this start parked it.

        LangGraph restarts a parked thread invoked with input again (pinned in
        ``tests/unit/langgraph``), so a start never runs on a parked thread: a redelivery of the
        start that parked it republishes, any other run is deferred.
        """
        state = self.graph.get_state(config)
        interrupts = list(getattr(state, "interrupts", ()) or ())
        same_run = message.run_id is not None and (state.metadata or {}).get(RUN_ID_KEY) == message.run_id
        return interrupts, same_run

    def _defer(self, message: StartMessage, interrupts: list[Any]) -> RunOutcome:
        # The message succeeds: failing it would hold every later message of the thread's FIFO
        # group, the answer's resume included, behind it.
        pending = [interrupt.id for interrupt in interrupts]
        run_id = message.run_id or str(ULID())
        self.ledger.defer_run(message.thread_id, run_id, message.input)
        logger.info("run deferred until the thread's questions are answered", extra={"pending": pending})
        return RunOutcome(thread_id=message.thread_id, status="deferred", pending=pending)

    def _start_deferred(self, thread_id: str) -> None:
        """Enqueue the oldest run deferred on the thread, now that its current run has ended.

        Sent before it is dropped from the thread item: a crash in between sends it again on the
        redelivery rather than losing it.
        """
        thread = self.ledger.find_thread(thread_id)
        if self.inbox is None or thread is None or not thread.deferred:
            return
        run = thread.deferred[0]
        # A new run id: the deferred run's own id is its original message's deduplication id.
        run_id = str(ULID())
        self.ledger.queue_thread(thread_id, run_id)
        self.inbox.start(thread_id, run.input, run_id=run_id)
        self.ledger.drop_deferred(thread_id, run.run_id)
        logger.info("deferred run enqueued", extra={"run_id": run.run_id})

    def _record_failure(
        self, thread_id: str, question_id: str | None, exc: Exception, receive_count: int
    ) -> None:
        error = f"{type(exc).__name__}: {exc}"
        logger.exception("run failed", extra={"receive_count": receive_count})
        metrics.add_metric(name=RUNS_FAILED, unit=MetricUnit.Count, value=1)
        self.ledger.thread_failed(thread_id, error)
        if receive_count < self.max_receive_count:
            return
        # The queue moves the message to the DLQ after this receive: say so on the question, and
        # let the runs deferred behind it go ahead.
        if question_id is not None and self.ledger.mark_resume_failed(question_id, error):
            metrics.add_metric(name=RESUME_FAILURES, unit=MetricUnit.Count, value=1)
        self._start_deferred(thread_id)


def build_announce(
    settings: Settings,
    *,
    dynamodb: DynamoDBClient | None = None,
    sns: SNSClient | None = None,
    sqs: SQSClient | None = None,
) -> BaseAnnounce:
    """The deployment's fan-out: ledger item, ``wait-created`` topic, outbox FIFO queue."""
    from agent_wait.aws import DynamoDbAnnounce, SnsAnnounce, SqsAnnounce

    children: Sequence[BaseAnnounce] = [
        DynamoDbAnnounce(settings.require("ledger_table"), client=dynamodb),
        SnsAnnounce(settings.require("topic_arn"), client=sns),
        SqsAnnounce(settings.require("outbox_url"), client=sqs),
    ]
    return CompositeAnnounce(children)


def build_runner(
    settings: Settings,
    *,
    dynamodb: DynamoDBClient | None = None,
    sns: SNSClient | None = None,
    sqs: SQSClient | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    clock: Clock = utcnow,
) -> RunnerService:
    """The runner wired to the resources, graph and checkpointer named by ``settings``.

    Examples
    --------
    >>> runner = build_runner(Settings.from_env(os.environ))  # doctest: +SKIP
    """
    from wait_service.checkpointer import make_checkpointer
    from wait_service.graph import load_graph

    graph = load_graph(
        settings.graph, checkpointer if checkpointer is not None else make_checkpointer(settings)
    )
    ledger = Ledger(
        settings.require("ledger_table"), dynamodb, clock=clock, ttl_days=settings.ledger_ttl_days
    )
    return RunnerService(
        graph,
        build_announce(settings, dynamodb=dynamodb, sns=sns, sqs=sqs),
        ledger,
        reply_url=settings.reply_url,
        default_ttl=settings.default_ttl,
        clock=clock,
        inbox=Inbox(settings.require("inbox_url"), sqs),
        durability=settings.durability,
    )
