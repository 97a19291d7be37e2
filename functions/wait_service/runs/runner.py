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

The runner is assembled from parts, one responsibility each, each in its own module
(:class:`~wait_service.runs.run_outcome.RunnerState` says which): this module keeps the message
loop and the names callers use. This module and its parts (``wait_service.runs.run_*``) are the
only modules of the receive path that import LangGraph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from agent_wait import BaseAnnounce, CompositeAnnounce
from agent_wait.aws import DynamoDbAnnounce
from agent_wait.hosting import AsyncHost, hosting_async_waits
from agent_wait.receipts import Receipt, collect_receipts
from wait_service.constants import MAX_RECEIVE_COUNT
from wait_service.ledger import Clock, Ledger, QuestionRecord, utcnow
from wait_service.metric_names import RESUMES_REFUSED
from wait_service.observability import logger, metrics, tracer
from wait_service.runs.announce_tracking import _Tracking
from wait_service.runs.async_answers import answer_run_id, is_async_question
from wait_service.runs.checkpoint_prefetch import PrefetchingSaver
from wait_service.runs.failures import is_infrastructure_failure
from wait_service.runs.inbox import Inbox, ResumeMessage, StartMessage, parse_message
from wait_service.runs.run_outcome import (
    _UNSET,
    BACKOFF_BASE_SECONDS,
    RUN_ID_KEY,
    Graph,
    PublishFn,
    RunOutcome,
    _first_line,
    _GraphFailed,
    _Undelivered,
    output_json,
)
from wait_service.runs.run_starts import RunStarts, _schema_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient

    from agent_wait.envelope import Question
    from wait_service.lifecycle.timers import Timers
    from wait_service.settings import Durability, Settings

__all__ = [
    "RUN_ID_KEY",
    "Graph",
    "RunOutcome",
    "RunnerService",
    "_schema_of",
    "build_announce",
    "build_policy_overrides",
    "build_runner",
    "is_infrastructure_failure",
    "output_json",
]


class RunnerService(RunStarts):
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
        self._disarming = None

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
            self._forget_disarming()
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
            if question is not None:
                # Its timer is deleted while the graph runs; taken before it is recorded resumed.
                self._disarm_early(question)
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


def build_announce(
    settings: Settings,
    *,
    dynamodb: DynamoDBClient | None = None,
    sns: SNSClient | None = None,
    sqs: SQSClient | None = None,
) -> BaseAnnounce:
    """The deployment's fan-out: ledger item, ``wait-created`` topic, outbox FIFO queue, and a Slack
    channel when the settings name one."""
    from agent_wait.aws import SnsAnnounce, SqsAnnounce

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
    ledger = Ledger.from_settings(settings, dynamodb, clock=clock)
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
