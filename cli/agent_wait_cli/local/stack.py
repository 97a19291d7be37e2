"""The local stack: moto on 127.0.0.1, the deployed resources, and the real handlers wired to them.

:class:`LocalStack` plays every AWS part the handlers need, in this process:

1. a :class:`~agent_wait_cli.local.moto_server.SerializedMotoServer` (one AWS request at a time, so
   DynamoDB conditional writes stay atomic as on AWS) on 127.0.0.1;
2. the ledger, checkpoint table and bucket, inbox, outbox and topic, from
   ``wait_service.resources`` (the same specs the CDK app deploys);
3. the environment the Lambdas get from the stack (``resources.env()``, ``AGENT_WAIT_GRAPH``,
   ``AGENT_WAIT_REPLY_URL``, ``AGENT_WAIT_INPUT_SCHEMA``: the graph's input schema, written to a
   temporary folder), with ``AWS_ENDPOINT_URL`` pointing at moto and fake credentials, so no call
   can reach a real account;
4. the api handler (``functions/api/handler.py``) behind the HTTP :class:`Gateway`, the dispatcher
   handler (``functions/dispatcher/handler.py``) behind the :class:`StreamReader` on the ledger's
   DynamoDB stream (it enqueues the starts and resumes the api recorded), the runner handler
   (``functions/runner/handler.py``) behind the :class:`InboxPoller`, and the lifecycle handler
   (``functions/lifecycle/handler.py``) behind the :class:`ScheduleClock`, which fires the
   question timers moto stores but never fires; all loaded by file path from the project folder
   like Lambda loads them from their assets.

Everything is in memory: moto keeps its tables, queues and bucket in this process, so stopping
the stack forgets every thread, question and checkpoint.

With ``log_path`` set, the handlers' logs (Powertools JSON lines, tracebacks) and the stack's own
(the poller's and gateway's errors) go to that file, so the event lines stay one line per event.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_wait_cli.audit_query import LOCAL_FOLDER_PREFIX
from agent_wait_cli.local.clock import ScheduleClock, destination_record
from agent_wait_cli.local.events import EventLog, ledger_readers
from agent_wait_cli.local.gateway import Exchange, Gateway
from agent_wait_cli.local.graph_source import check_graph, put_first, resolve_graph_source
from agent_wait_cli.local.lambda_endpoint import LambdaEndpoint
from agent_wait_cli.local.moto_server import SerializedMotoServer
from agent_wait_cli.local.poller import InboxPoller
from agent_wait_cli.local.runtime import context_factory, load_handler
from agent_wait_cli.local.streams import StreamReader
from wait_service.resources import (
    API_TIMEOUT_SECONDS,
    DISPATCHER,
    DISPATCHER_TIMEOUT_SECONDS,
    INBOX,
    LIFECYCLE_TIMEOUT_SECONDS,
    RUNNER_BATCH_SIZE,
    RUNNER_TIMEOUT_SECONDS,
    WEBHOOK_BATCH_SIZE,
    WEBHOOK_TIMEOUT_SECONDS,
    create_resources,
    create_webhook_queues,
)
from wait_service.runs.input_schema import INPUT_SCHEMA_FILE, write_input_schema
from wait_service.settings import DEFAULT_GRAPH

if TYPE_CHECKING:
    from wait_service.channels.signing import ReplayGuard
    from wait_service.resources import LocalResources

DEFAULT_PORT = 8787
REGION = "us-east-1"
# The local stack never holds a real bot token: the Slack API it talks to is a stand-in.
LOCAL_SLACK_TOKEN = "xoxb-local-fake-token"
LOCAL_SLACK_CHANNEL = "C-LOCAL"
# The functions' names, as Lambda's contexts and log groups carry them.
API_FUNCTION = "agent-wait-api"
RUNNER_FUNCTION = "agent-wait-runner"
DISPATCHER_FUNCTION = "agent-wait-dispatcher"
WEBHOOKS_FUNCTION = "agent-wait-webhooks"

Handler = Callable[[dict[str, Any], Any], Any]


@dataclass
class StackConfig:
    """How to start the local stack.

    Parameters
    ----------
    project:
        The project folder holding ``functions/`` (and ``examples/`` for the default graph).
    graph:
        ``module:attribute`` of the graph (or agent) the runner runs (``AGENT_WAIT_GRAPH``).
    framework:
        ``langgraph``, ``pydantic_ai`` or ``strands`` (``AGENT_WAIT_FRAMEWORK``); ``None``: detected.
    port:
        The gateway's port on 127.0.0.1; 0 picks a free one.
    moto_port:
        moto's port on 127.0.0.1; 0 picks a free one.
    hmac_keys:
        Key id → secret; when given the gateway requires signed requests. Each is also stored in
        (moto's) Secrets Manager for the api's ``/signed`` routes, as a deployment stores it.
    log_level:
        ``LOG_LEVEL`` for the handlers' Powertools loggers.
    slack_api, slack_signing_secret, slack_channel:
        Slack: the Web API the runner posts questions to (a stand-in; the bot token is a fake one),
        the signing secret ``POST /slack/interactions`` verifies with, and the channel.
    prefix:
        Prefix of every resource name.
    inbox_visibility:
        Seconds the inbox hides a received message (its ``VisibilityTimeout``), so a failed run is
        retried after this long; ``None`` keeps the deployed value.
    stream_retry_attempts:
        Retries of a ledger-stream batch the dispatcher fails before its record goes to the
        stream's DLQ; ``None`` keeps the deployed mapping's ``MaximumRetryAttempts``.
    log_path:
        File for the handlers' and the stack's logs; ``None`` leaves logging as it is.
    checkpointer:
        ``aws`` (one table and the offload bucket) or ``dynamodb`` (langgraph-checkpoint-dynamodb's
        two tables, no bucket, and the api's smaller answer limit), as the stack's context sets it.
    listing_shards:
        The shards of each status listing of the ledger (``--listing-shards``), as the stack's
        ``listing_shards`` context sets it.
    graph_source:
        A folder put first on ``sys.path`` for the graph (``--graph-source``), as the deployed
        runner's asset holds ``-c graph_source=DIR`` at its root; the current directory is
        importable too. ``None``: the project and the current directory only.
    archive_dir:
        The audit archive's folder: the stream's reader writes each decided question there as
        JSON Lines (``audit/date=YYYY-MM-DD/audit.jsonl``). ``None``: a new folder in the temp
        folder (:attr:`LocalStack.archive_dir` names it; it outlives the stack).
    webhooks:
        ``(url, secret)`` pairs (``--webhook URL=SECRET``): each gets a delivery queue subscribed
        to the topic (every event type) and its secret in (moto's) Secrets Manager, and the
        webhooks handler (``functions/webhooks/handler.py``) consumes the queues as the deployed
        event source mappings do.
    """

    project: Path = field(default_factory=Path.cwd)
    graph: str = DEFAULT_GRAPH
    framework: str | None = None
    port: int = DEFAULT_PORT
    moto_port: int = 0
    hmac_keys: Mapping[str, str] = field(default_factory=dict)
    log_level: str = "WARNING"
    prefix: str = "agent-wait-"
    region: str = REGION
    slack_api: str | None = None
    slack_signing_secret: str | None = None
    slack_channel: str | None = None
    inbox_visibility: int | None = None
    stream_retry_attempts: int | None = None
    log_path: Path | None = None
    checkpointer: str = "aws"
    listing_shards: int = 1
    graph_source: Path | None = None
    archive_dir: Path | None = None
    webhooks: list[tuple[str, str]] = field(default_factory=list)


class LocalStack:
    """Start and stop the whole local stack.

    Parameters
    ----------
    config:
        See :class:`StackConfig`.
    write:
        Receives one line per event (run started, question raised, answered, resumed, ...);
        ``None`` prints nothing.
    api_handler, runner_handler, lifecycle_handler, dispatcher_handler:
        Handlers to use instead of loading the project's (tests with toy handlers).

    Examples
    --------
    >>> with LocalStack(StackConfig(port=0)) as stack:  # doctest: +SKIP
    ...     print(stack.api_url)
    http://127.0.0.1:54321
    """

    def __init__(
        self,
        config: StackConfig | None = None,
        *,
        write: Callable[[str], None] | None = None,
        api_handler: Handler | None = None,
        runner_handler: Handler | None = None,
        lifecycle_handler: Handler | None = None,
        dispatcher_handler: Handler | None = None,
    ) -> None:
        self.config = config or StackConfig()
        self._write = write
        self._api_handler = api_handler
        self._runner_handler = runner_handler
        self._lifecycle_handler = lifecycle_handler
        self._dispatcher_handler = dispatcher_handler
        self.streams: StreamReader | None = None
        self.clock: ScheduleClock | None = None
        self.moto = SerializedMotoServer(host="127.0.0.1", port=self.config.moto_port, log_requests=False)
        self.gateway: Gateway | None = None
        # Lambda's Invoke API for the dispatcher, which another process (``agent-wait dlq redrive``)
        # calls as it calls the deployed function.
        self.lambda_endpoint: LambdaEndpoint | None = None
        # One Lambda instance serves one event at a time: the stream reader and a direct
        # invocation never run the dispatcher's handler at once.
        self._dispatcher_lock = threading.Lock()
        self.poller: InboxPoller | None = None
        self.webhook_pollers: list[InboxPoller] = []
        self.webhook_dlq_url: str | None = None
        self._webhook_queues: list[tuple[str, str]] = []
        self._webhooks_handler: Handler | None = None
        self.events: EventLog | None = None
        self._resources: LocalResources | None = None
        self._saved_env: dict[str, str | None] = {}
        self._saved_path: list[str] | None = None
        self._schema_dir: Path | None = None
        self._log_handler: logging.FileHandler | None = None
        self._rerouted: list[tuple[logging.StreamHandler[Any], Any]] = []
        self._started = False
        self.archive_dir: Path | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start moto, create the resources, load the handlers, then serve; stops again on failure."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self._started = True

    def _start(self) -> None:
        self.archive_dir = (
            self.config.archive_dir.resolve()
            if self.config.archive_dir is not None
            else Path(tempfile.mkdtemp(prefix=LOCAL_FOLDER_PREFIX))
        )
        self.archive_dir.mkdir(parents=True, exist_ok=True)
        if self.config.log_path is not None:
            self._log_to_file(self.config.log_path)
        self.moto.start()
        self._set_env(
            {
                "AWS_ENDPOINT_URL": self.moto.endpoint,
                "AWS_ACCESS_KEY_ID": "local",
                "AWS_SECRET_ACCESS_KEY": "local",
                "AWS_SESSION_TOKEN": None,
                "AWS_SECURITY_TOKEN": None,
                "AWS_PROFILE": None,
                "AWS_REGION": self.config.region,
                "AWS_DEFAULT_REGION": self.config.region,
            }
        )
        self._resources = create_resources(
            self.client("dynamodb"),
            self.client("sqs"),
            self.client("sns"),
            prefix=self.config.prefix,
            scheduler=self.client("scheduler"),
            s3=self.client("s3"),
            checkpointer=self.config.checkpointer,
        )
        if self.config.inbox_visibility is not None:
            self.client("sqs").set_queue_attributes(
                QueueUrl=self._resources.inbox_url,
                Attributes={"VisibilityTimeout": str(self.config.inbox_visibility)},
            )
        readers = ledger_readers(self.client("dynamodb"), self._resources.ledger_table)
        if self._write is not None:
            self.events = EventLog(
                self._write, *readers, runner=RUNNER_FUNCTION, max_receive_count=INBOX.max_receive_count
            )
        events = self.events

        # The contexts report the Lambda timeouts the CDK stack gives the functions (same constants).
        self.gateway = Gateway(
            self._invoke_api,
            port=self.config.port,
            hmac_keys=self.config.hmac_keys,
            context_factory=context_factory(API_FUNCTION, API_TIMEOUT_SECONDS, self.config.region),
            on_exchange=self._after_exchange,
        )
        port = self.gateway.bind()
        self._set_env(
            self._resources.env()
            | {
                "AGENT_WAIT_GRAPH": self.config.graph,
                "AGENT_WAIT_FRAMEWORK": self.config.framework,
                "AGENT_WAIT_REPLY_URL": f"http://127.0.0.1:{port}/questions/{{question_id}}/reply",
                "POWERTOOLS_SERVICE_NAME": "agent-wait-local",
                "POWERTOOLS_METRICS_NAMESPACE": "AgentWaitLocal",
                # Metrics are EMF lines on stdout: locally they would only bury the event lines.
                "POWERTOOLS_METRICS_DISABLED": "true",
                "POWERTOOLS_TRACE_DISABLED": "true",
                "LOG_LEVEL": self.config.log_level,
                "AGENT_WAIT_ARCHIVE_DIR": str(self.archive_dir),
                "AGENT_WAIT_LISTING_SHARDS": str(self.config.listing_shards),
            }
        )
        self._set_env(self._secrets_env())
        self._set_env(self._webhooks_env())
        self._load_handlers()
        self._reroute_handler_logs()
        if self.config.hmac_keys:
            # Once the handlers' environment is set: wait_service reads it on import.
            self.gateway.replays = self._replay_guard()

        self.poller = InboxPoller(
            self.client("sqs"),
            self._resources.inbox_url,
            self._resources.inbox_arn,
            self.config.region,
            self._invoke_runner,
            context_factory=context_factory(RUNNER_FUNCTION, RUNNER_TIMEOUT_SECONDS, self.config.region),
            batch_size=RUNNER_BATCH_SIZE,
            on_receive=events.received if events else None,
            on_batch=events.batch_done if events else None,
        )
        stream_arn = self._resources.ledger_stream_arn
        assert stream_arn is not None, "the ledger's spec gives it a stream"
        poller = self.poller
        self.streams = StreamReader(
            self.client("dynamodbstreams"),
            stream_arn,
            self._invoke_dispatcher,
            context_factory=context_factory(
                DISPATCHER_FUNCTION, DISPATCHER_TIMEOUT_SECONDS, self.config.region
            ),
            batch_size=DISPATCHER.batch_size,
            max_retry_attempts=(
                DISPATCHER.max_retry_attempts
                if self.config.stream_retry_attempts is None
                else self.config.stream_retry_attempts
            ),
            sqs=self.client("sqs"),
            dlq_url=self._resources.stream_dlq_url,
            # What the dispatcher enqueued is on the inbox now: the poller need not wait it out.
            on_batch=lambda records: _after_dispatch(poller, events, records),
        )
        group = self._resources.schedule_group
        assert group is not None
        self.clock = ScheduleClock(
            self.client("scheduler"),
            group,
            self._invoke_lifecycle,
            context_factory=context_factory(
                "agent-wait-lifecycle", LIFECYCLE_TIMEOUT_SECONDS, self.config.region
            ),
            on_fire=events.timer if events else None,
            on_failure=self._lifecycle_failed,
        )
        self.lambda_endpoint = LambdaEndpoint(
            {
                self.config.prefix + "dispatcher": (
                    self._invoke_dispatcher,
                    context_factory(DISPATCHER_FUNCTION, DISPATCHER_TIMEOUT_SECONDS, self.config.region),
                )
            }
        )
        self.lambda_endpoint.start()
        self.streams.start()
        for url, arn in self._webhook_queues:
            self.webhook_pollers.append(
                InboxPoller(
                    self.client("sqs"),
                    url,
                    arn,
                    self.config.region,
                    self._invoke_webhooks,
                    context_factory=context_factory(
                        WEBHOOKS_FUNCTION, WEBHOOK_TIMEOUT_SECONDS, self.config.region
                    ),
                    batch_size=WEBHOOK_BATCH_SIZE,
                )
            )
        self.poller.start()
        for webhook_poller in self.webhook_pollers:
            webhook_poller.start()
        self.clock.start()
        self.gateway.start()

    def _replay_guard(self) -> ReplayGuard:
        """The deployed api's replay store (signatures on the ledger), for the gateway's ``--hmac-key``."""
        from wait_service.channels.signing import LedgerReplayGuard

        assert self._resources is not None
        return LedgerReplayGuard(self._resources.ledger_table, self.client("dynamodb"))

    def _secrets_env(self) -> dict[str, str | None]:
        """Signing keys and Slack's secrets in moto's Secrets Manager, named as the Lambdas read them."""
        secrets = self.client("secretsmanager")
        prefix = self.config.prefix

        def store(name: str, value: str) -> str:
            return str(secrets.create_secret(Name=prefix + name, SecretString=value)["ARN"])

        env: dict[str, str | None] = {}
        if self.config.hmac_keys:
            arns = {
                key_id: store(f"signing/{key_id}", secret) for key_id, secret in self.config.hmac_keys.items()
            }
            env["AGENT_WAIT_SIGNING_KEYS"] = json.dumps(arns)
        if self.config.slack_signing_secret:
            env["AGENT_WAIT_SLACK_SIGNING_SECRET"] = store(
                "slack/signing-secret", self.config.slack_signing_secret
            )
        if self.config.slack_api or self.config.slack_channel:
            env["AGENT_WAIT_SLACK_BOT_TOKEN_SECRET"] = store("slack/bot-token", LOCAL_SLACK_TOKEN)
            env["AGENT_WAIT_SLACK_CHANNEL"] = self.config.slack_channel or LOCAL_SLACK_CHANNEL
            if self.config.slack_api:
                env["AGENT_WAIT_SLACK_API_URL"] = self.config.slack_api
        return env

    def _webhooks_env(self) -> dict[str, str | None]:
        """``--webhook``: a delivery queue per receiver on the topic, its secret in Secrets Manager."""
        from wait_service.channels.webhooks import WEBHOOK_DLQ_VARIABLE, WEBHOOKS_VARIABLE, Webhook

        if not self.config.webhooks:
            return {}
        assert self._resources is not None
        created = create_webhook_queues(
            self.client("sqs"),
            self.client("sns"),
            self._resources.topic_arn,
            [() for _ in self.config.webhooks],
            prefix=self.config.prefix,
        )
        self._webhook_queues = created.queues
        self.webhook_dlq_url = created.dlq_url
        secrets = self.client("secretsmanager")
        hooks = []
        for number, ((url, secret), (queue_url, _)) in enumerate(
            zip(self.config.webhooks, created.queues, strict=True), start=1
        ):
            name = f"{self.config.prefix}webhook/{number}"
            secrets.create_secret(Name=name, SecretString=secret)
            hooks.append(Webhook(queue_url=queue_url, url=url, secret_name=name, key_id=f"webhook-{number}"))
        return {
            WEBHOOKS_VARIABLE: json.dumps([hook.to_dict() for hook in hooks]),
            WEBHOOK_DLQ_VARIABLE: created.dlq_url,
        }

    def _load_handlers(self) -> None:
        project = self.config.project.resolve()
        functions = project / "functions"
        # Lambda puts each asset's root on sys.path: the handler, wait_service and examples, and
        # the graph source's contents before them; the current directory is importable too.
        self._saved_path = list(sys.path)
        source = resolve_graph_source(self.config.graph_source)
        first = [source] if source is not None else []
        searched = list(dict.fromkeys([*first, project, Path.cwd().resolve()]))
        put_first([*first, functions, *searched[len(first) :]])
        # Imported once here so a wrong --graph or --graph-source ends in one sentence.
        check_graph(self.config.graph, searched)
        if self._api_handler is None:
            # The api checks run input against the graph's schema, generated here as `cdk synth` does.
            self._schema_dir = Path(tempfile.mkdtemp(prefix="agent-wait-local-"))
            schema = write_input_schema(
                self.config.graph, self._schema_dir / INPUT_SCHEMA_FILE, framework=self.config.framework
            )
            self._set_env({"AGENT_WAIT_INPUT_SCHEMA": str(schema)})
            self._api_handler = load_handler(functions / "api" / "handler.py", "agent_wait_local_api_handler")
        if self._runner_handler is None:
            self._runner_handler = load_handler(
                functions / "runner" / "handler.py", "agent_wait_local_runner_handler"
            )
        if self._lifecycle_handler is None:
            self._lifecycle_handler = load_handler(
                functions / "lifecycle" / "handler.py", "agent_wait_local_lifecycle_handler"
            )
        if self._dispatcher_handler is None:
            self._dispatcher_handler = load_handler(
                functions / "dispatcher" / "handler.py", "agent_wait_local_dispatcher_handler"
            )
        if self.config.webhooks and self._webhooks_handler is None:
            self._webhooks_handler = load_handler(
                functions / "webhooks" / "handler.py", "agent_wait_local_webhooks_handler"
            )

    def _after_exchange(self, exchange: Exchange) -> None:
        if self.events is not None:
            self.events.exchange(exchange)
        # A POST may have recorded a run or a decision: wake the stream reader (its dispatcher
        # enqueues the message, then wakes the poller) rather than leave it to its idle wait. After
        # the event line, so "answered" is printed before "resuming".
        if exchange.request.method == "POST":
            if self.streams is not None:
                self.streams.wake()
            if self.poller is not None:
                self.poller.wake()

    def _invoke_api(self, event: dict[str, Any], context: Any) -> Any:
        if self._api_handler is None:
            raise RuntimeError("the api handler is not loaded")
        if self.events is not None:
            # Ended by the exchange's event line (_after_exchange), which follows every invocation.
            self.events.reply_started(str(event.get("httpMethod", "")), str(event.get("path", "")))
        return self._api_handler(event, context)

    def _invoke_runner(self, event: dict[str, Any], context: Any) -> Any:
        if self._runner_handler is None:
            raise RuntimeError("the runner handler is not loaded")
        return self._runner_handler(event, context)

    def _invoke_dispatcher(self, event: dict[str, Any], context: Any) -> Any:
        if self._dispatcher_handler is None:
            raise RuntimeError("the dispatcher handler is not loaded")
        with self._dispatcher_lock:
            return self._dispatcher_handler(event, context)

    def _invoke_webhooks(self, event: dict[str, Any], context: Any) -> Any:
        if self._webhooks_handler is None:
            raise RuntimeError("the webhooks handler is not loaded")
        return self._webhooks_handler(event, context)

    def _invoke_lifecycle(self, event: dict[str, Any], context: Any) -> Any:
        if self._lifecycle_handler is None:
            raise RuntimeError("the lifecycle handler is not loaded")
        return self._lifecycle_handler(event, context)

    def _lifecycle_failed(self, payload: Any, error: BaseException, attempts: int) -> None:
        """As the deployed function's on-failure destination: the record goes to the lifecycle DLQ."""
        resources = self.resources
        if resources.lifecycle_dlq_url is None or resources.lifecycle_arn is None:
            return
        record = destination_record(payload, error, resources.lifecycle_arn, attempts)
        self.client("sqs").send_message(QueueUrl=resources.lifecycle_dlq_url, MessageBody=json.dumps(record))

    def stop(self) -> None:
        """Stop serving, let the batch in hand finish, stop moto and restore the environment."""
        if self.gateway is not None:
            self.gateway.stop()
            self.gateway = None
        if self.lambda_endpoint is not None:
            self.lambda_endpoint.stop()
            self.lambda_endpoint = None
        if self.clock is not None:
            self.clock.stop()
            self.clock = None
        if self.streams is not None:
            self.streams.stop()
            self.streams = None
        if self.poller is not None:
            self.poller.stop()
            self.poller = None
        for webhook_poller in self.webhook_pollers:
            webhook_poller.stop()
        self.webhook_pollers = []
        self.moto.stop()
        self._restore_logging()
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_env = {}
        if self._saved_path is not None:
            sys.path[:] = self._saved_path
            self._saved_path = None
        if self._schema_dir is not None:
            shutil.rmtree(self._schema_dir, ignore_errors=True)
            self._schema_dir = None
        self._started = False

    # -- logs ---------------------------------------------------------------------------------

    def _log_to_file(self, path: Path) -> None:
        """Send every log record of this process (tracebacks included) to ``path``."""
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.getLogger().addHandler(handler)
        self._log_handler = handler

    def _reroute_handler_logs(self) -> None:
        """Powertools writes the handlers' JSON log lines to stdout: send them to the log file.

        Every logger of the process that writes to stdout or stderr is rerouted (the handlers'
        Powertools loggers are named by their service, whatever it was when they were imported).
        """
        if self._log_handler is None:
            return
        stream = self._log_handler.stream
        loggers = [logging.getLogger(name) for name in list(logging.Logger.manager.loggerDict)]
        for logger in loggers:
            for handler in logger.handlers:
                if isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stdout, sys.stderr):
                    self._rerouted.append((handler, handler.setStream(stream)))

    def _restore_logging(self) -> None:
        for handler, stream in self._rerouted:
            handler.setStream(stream)
        self._rerouted = []
        if self._log_handler is not None:
            logging.getLogger().removeHandler(self._log_handler)
            self._log_handler.close()
            self._log_handler = None

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what callers use -----------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        if self.gateway is None:
            raise RuntimeError("start() the stack first")
        return self.gateway.url

    @property
    def resources(self) -> LocalResources:
        if self._resources is None:
            raise RuntimeError("start() the stack first")
        return self._resources

    def client(self, service: str) -> Any:
        """A boto3 client for ``service`` on this stack's moto server."""
        import boto3

        return boto3.client(
            service,  # type: ignore[call-overload]
            endpoint_url=self.moto.endpoint,
            region_name=self.config.region,
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )

    def _set_env(self, values: Mapping[str, str | None]) -> None:
        for name, value in values.items():
            if name not in self._saved_env:
                self._saved_env[name] = os.environ.get(name)
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _after_dispatch(poller: InboxPoller, events: EventLog | None, records: list[dict[str, Any]]) -> None:
    """What the dispatcher enqueued is on the inbox now; print the events it published."""
    poller.wake()
    if events is not None:
        events.published(records, function=DISPATCHER_FUNCTION)
