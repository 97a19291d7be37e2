"""The api and runner Lambdas: code assets, one role each with exactly the actions the code calls."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import constants
from infra.bundling import asset_files
from infra.layers import architecture, code_asset, runtime
from infra.nag import acknowledge
from infra.requirements import build_layer, file_digest
from infra.runner_config import ConfigError, acknowledged_findings, secret_grant
from wait_service.answer_limits import MAX_ANSWER_BYTES, MAX_ANSWER_BYTES_WITHOUT_OFFLOAD
from wait_service.resources import API_TIMEOUT_SECONDS, RUNNER_BATCH_SIZE
from wait_service.runs.input_schema import INPUT_SCHEMA_FILE, write_input_schema

if TYPE_CHECKING:
    from pathlib import Path

    from infra.bundling import Sources
    from infra.checkpoints import Checkpoints
    from infra.config import StackConfig
    from infra.fanout import Fanout
    from infra.inbox import Inbox
    from infra.layers import Layers
    from infra.ledger import Ledger

# What goes into each function's code asset (destination in the asset → folder of the repository).
API_SOURCES = {"": "functions/api", "wait_service": "functions/wait_service"}
RUNNER_SOURCES = {"": "functions/runner", "wait_service": "functions/wait_service", "examples": "examples"}
# The sample's local walkthrough drives the CLI; the runner never imports it.
RUNNER_EXCLUDE = ("demo.py",)
HANDLER = "handler.handler"
# A user's agent (context graph_source) replaces the sample: its folder's contents at the asset's root.
RUNNER_OWN_SOURCES = {"": "functions/runner", "wait_service": "functions/wait_service"}
# The runner reads these secrets (names -> ARNs, never values) into its environment at init.
RUNNER_SECRETS_VARIABLE = "AGENT_WAIT_RUNNER_SECRETS"


def runner_sources(config: StackConfig) -> tuple[Sources, tuple[str, ...]]:
    """What the runner's asset holds, and the top-level names left out: the sample, or the user's folder.

    Raises :class:`~infra.config.ConfigError` when the user's folder would replace a file of ours.
    """
    if config.graph_source is None:
        return RUNNER_SOURCES, RUNNER_EXCLUDE
    sources: Sources = [*RUNNER_OWN_SOURCES.items(), ("", config.graph_source)]
    try:
        asset_files(sources, ())
    except ValueError as exc:
        raise ConfigError(f"context graph_source: {exc}") from exc
    return sources, ()


def graph_key(config: StackConfig) -> str:
    """The context key that named the runner's object: ``agent`` or ``graph``."""
    return "agent" if config.agent is not None else "graph"


def agent_framework(config: StackConfig) -> str:
    """The framework whose packages the graph layer carries: ``framework``, else detected.

    Detected only for an object of the project (``examples/``), imported here as the input schema
    is; a user's own agent (``graph_source``) brings its framework in ``graph_requirements``.
    """
    if config.framework is not None:
        return config.framework
    if config.graph_source is not None or config.graph_requirements is not None:
        return "langgraph"
    from wait_service.runs.graph import detect_framework

    module, _, attribute = config.graph.partition(":")
    try:
        target = getattr(importlib.import_module(module), attribute)
    except Exception:
        # Reported with its fix when the input schema is generated (graph_input_dir).
        return "langgraph"
    return detect_framework(target)


# -- the graph's input schema, shipped with the api -------------------------------------------
# Lambda's working directory is the asset root, so the api reads it at a relative path.
GRAPH_INPUT_ASSET_DIR = "graph_input"


def graph_input_dir(
    graph: str,
    *,
    source: Path | None = None,
    requirements: Path | None = None,
    checkpointer: str = "aws",
    framework: str | None = None,
    key: str = "graph",
) -> str:
    """Write the input schema of ``graph`` under cdk.out; the folder, relative to the repository.

    The sample is imported in this process. A user's graph (``source``, ``requirements``) is imported
    in a child interpreter whose path starts with the user's folder and the graph layer built for
    this host with the user's requirements, so it resolves as in the runner, and nothing of it is
    left in this process. ``framework`` (``None``: detected) is checked against the object;
    ``key`` is the context key that named ``graph`` (``graph`` or ``agent``), for the errors.
    """
    inputs = [graph, str(source or ""), file_digest(requirements), checkpointer]
    if framework is not None:
        inputs.append(framework)
    digest = hashlib.sha256(json.dumps(inputs).encode()).hexdigest()[:12]
    relative = f"cdk.out/.graph-input/{digest}"
    path = constants.REPO_ROOT / relative / INPUT_SCHEMA_FILE
    if source is None and requirements is None:
        try:
            write_input_schema(graph, path, framework=framework)
        except Exception as exc:
            raise _graph_error(
                graph,
                None,
                None,
                missing=_missing_module(exc),
                error=_said(exc),
                framework=framework,
                key=key,
            ) from exc
        return relative
    paths = [str(source)] if source is not None else []
    if requirements is not None:
        # The same host build the import check makes of a user's agent's graph layer (infra.report).
        graph_layer = build_layer(
            "graph", "host", checkpointer=checkpointer, requirements_file=requirements, every_aws_service=True
        )
        paths += [str(graph_layer / "python"), str(build_layer("core", "host") / "python")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run(
        [sys.executable, "-c", _WRITE_SCHEMA, graph, str(path), framework or ""],
        cwd=source or constants.REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        marker = [line for line in done.stderr.splitlines() if line.startswith(_FAILED)]
        failure = json.loads(marker[-1][len(_FAILED) :]) if marker else {}
        raise _graph_error(
            graph,
            source,
            requirements,
            missing=failure.get("missing"),
            error=failure.get("error") or done.stderr.strip().splitlines()[-1:],
            detail=done.stderr,
            framework=framework,
            key=key,
        )
    # The child's one warning when no schema can be built on this Python (input then unchecked).
    for line in done.stderr.splitlines():
        if line.startswith("warning: the input schema of "):
            sys.stderr.write(line + "\n")
    return relative


def preflight(config: StackConfig) -> None:
    """Check what only building would find, before any asset is bundled; a problem is a ConfigError.

    The user's folder against ours, the graph's import (with ``graph_requirements`` installed, for
    this host and for Lambda: the layer build is cached, so bundling it later copies it).
    """
    runner_sources(config)
    graph_input_dir(
        config.graph,
        source=config.graph_source,
        requirements=config.graph_requirements,
        checkpointer=config.checkpointer,
        framework=config.framework,
        key=graph_key(config),
    )
    if config.graph_requirements is not None:
        # The same build the graph layer's bundling makes (infra.layers: a user's agent).
        build_layer(
            "graph",
            "lambda",
            framework=agent_framework(config),
            checkpointer=config.checkpointer,
            requirements_file=config.graph_requirements,
            every_aws_service=True,
        )


# The child that writes a user's graph's schema: on failure, one marker line says what was missing.
_FAILED = "agent-wait-graph-failed: "
_WRITE_SCHEMA = f"""
import json, sys, traceback
from pathlib import Path
try:
    from wait_service.runs.input_schema import write_input_schema
    write_input_schema(sys.argv[1], Path(sys.argv[2]), framework=sys.argv[3] or None)
except Exception as exc:
    traceback.print_exc()
    cause = exc
    while cause is not None and not isinstance(cause, ModuleNotFoundError):
        cause = cause.__cause__ or cause.__context__
    said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    failure = {{"missing": getattr(cause, "name", None), "error": said}}
    sys.stderr.write({_FAILED!r} + json.dumps(failure) + "\\n")
    sys.exit(1)
"""


def _missing_module(exc: BaseException) -> str | None:
    """The name of the module whose absence caused ``exc``, if one did."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ModuleNotFoundError):
        cause = cause.__cause__ or cause.__context__
    return cause.name if isinstance(cause, ModuleNotFoundError) else None


def _said(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _graph_error(
    graph: str,
    source: Path | None,
    requirements: Path | None,
    *,
    missing: str | None,
    error: str | list[str],
    detail: str = "",
    framework: str | None = None,
    key: str = "graph",
) -> ConfigError:
    """One line for a graph that does not import: its module missing, a package missing, or what it raised.

    A graph that imports but is not of the ``framework`` named is reported on ``framework``.
    """
    module = graph.partition(":")[0]
    where = f"graph_source {source}" if source is not None else "the project (examples/, installed packages)"
    said = error if isinstance(error, str) else " ".join(error)
    if framework is not None and f"AGENT_WAIT_FRAMEWORK={framework}" in said:
        return ConfigError(
            f"context framework={framework}: {key}={graph!r} is not a {framework} agent",
            fix=f"set {key} to the {framework} object (module:attribute), or framework to the one it is "
            "written in (or unset it to detect it)",
            detail=detail,
        )
    if missing and (module == missing or module.startswith(missing + ".")):
        top = missing.split(".", 1)[0]
        return ConfigError(
            f"context {key}={graph!r}: no module named {missing!r} in {where}",
            fix=f"set graph_source to the folder that holds {top}/, or correct {key}",
            detail=detail,
        )
    if missing:
        file = f"add it to {requirements}" if requirements is not None else "list it in a requirements file"
        return ConfigError(
            f"context graph_requirements: the graph {graph!r} imports {missing!r}, which is not installed",
            fix=f"{file} (name==version) and set graph_requirements to that file",
            detail=detail,
        )
    return ConfigError(
        f"context {key}={graph!r}: importing it from {where} failed: {said}",
        fix=f"correct the module, or {key} (module:attribute of a LangGraph factory taking checkpointer=, "
        "or of a pydantic_ai.Agent)",
        detail=detail,
    )


# ---------------------------------------------------------------------------------------------

# Exactly what the code calls (tests/infra/test_roles_match_calls.py records the calls): the api
# reads and moves items, and lists through the indexes (Scan when GET /questions has no filter; a
# thread's page reads its items by key in one BatchGetItem, its index holding keys alone);
# DynamoDbAnnounce creates question items, the runner moves them and reads a thread's deferred runs.
LEDGER_API_ACTIONS: tuple[str, ...] = ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:UpdateItem")
# Idempotent starts: Powertools puts, completes and (when the start is refused) deletes its record.
LEDGER_API_ACTIONS += ("dynamodb:PutItem", "dynamodb:DeleteItem")
LEDGER_API_INDEX_ACTIONS = ("dynamodb:Query", "dynamodb:Scan")
LEDGER_RUNNER_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")
# The dispatcher queues an async answer's run on its thread item; it writes nothing on questions and
# reads nothing but the stream records it is handed.
LEDGER_DISPATCHER_ACTIONS = ("dynamodb:UpdateItem",)
# The analytics counters: each fact is a transaction of a marker put and a counters update, then a
# conditional update of the max (wait_service.stream.analytics); the api queries them for GET /stats.
STATS_DISPATCHER_ACTIONS = ("dynamodb:PutItem", "dynamodb:UpdateItem")
STATS_API_ACTIONS = ("dynamodb:Query",)
# What langgraph-checkpoint-aws DynamoDBSaver calls (get_item, put_item, query, batch_get_item,
# batch_write_item) and, for its S3 offload, put_object / get_object / delete_objects.
CHECKPOINT_AWS_ACTIONS = (
    "dynamodb:BatchGetItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:Query",
)
# Objects are written tagged with their TTL (PutObject with Tagging needs PutObjectTagging); at start
# the saver reads the bucket's lifecycle to find its TTL rule there (and so never writes one).
CHECKPOINT_BUCKET_ACTIONS = ("s3:GetObject", "s3:PutObject", "s3:PutObjectTagging")
CHECKPOINT_BUCKET_LIFECYCLE_ACTIONS = ("s3:GetLifecycleConfiguration",)
# A Strands agent's sessions (wait_service.runs.hosted_strands): Strands' S3Storage lists a session's
# snapshots, and reading a thread's first (missing) snapshot is a 404 only with ListBucket (403 else).
STRANDS_SESSION_BUCKET_ACTIONS = ("s3:ListBucket",)
# langgraph-checkpoint-dynamodb: get_item, put_item and query on its tables, batch_write_item for writes.
CHECKPOINT_DYNAMODB_ACTIONS = (
    "dynamodb:BatchWriteItem",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:Query",
)
# What Lambda's event source mapping calls on the inbox with the runner's role.
INBOX_CONSUME_ACTIONS = (
    "sqs:ChangeMessageVisibility",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
    "sqs:ReceiveMessage",
)
TOPIC_KEY_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")
LOG_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents")
XRAY_ACTIONS = ("xray:PutTelemetryRecords", "xray:PutTraceSegments")
# Powertools Parameters reads a secret (AWSCURRENT, and AWSPREVIOUS for a signing key in rotation).
SECRET_READ_ACTIONS = ("secretsmanager:GetSecretValue",)


class ServiceFunction(Construct):
    """A Python 3.13 Lambda with its own role, log group (retention set), X-Ray and Powertools settings.

    The role starts with no permissions but writing to its own log group; callers add the exact
    statements the code needs through :meth:`allow`.

    Examples
    --------
    >>> fn = ServiceFunction(stack, "Api", sources=API_SOURCES, layers=[], environment={},
    ...                      memory_mb=512, timeout_seconds=29, service="agent-wait",
    ...                      system_log_level="INFO")  # doctest: +SKIP
    >>> fn.allow(["sqs:SendMessage"], [queue.queue_arn])  # doctest: +SKIP
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        sources: Sources,
        exclude: tuple[str, ...] = (),
        layers: list[lambda_.ILayerVersion],
        environment: dict[str, str],
        memory_mb: int,
        timeout_seconds: int,
        service: str,
        description: str,
        function_name: str | None = None,
        reserved_concurrency: int | None = None,
        snapstart: bool = False,
        # Every function takes the stack's setting (context lambda_system_log_level): no default here.
        system_log_level: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=logs.RetentionDays[constants.LOG_RETENTION],
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{description}: exactly the actions its code calls",
        )
        self.allow(LOG_ACTIONS, [self.log_group.log_group_arn])
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            function_name=function_name,
            runtime=runtime(),
            architecture=architecture(),
            handler=HANDLER,
            code=code_asset(sources, exclude=exclude),
            layers=layers,
            role=self.role,
            memory_size=memory_mb,
            timeout=cdk.Duration.seconds(timeout_seconds),
            reserved_concurrent_executions=reserved_concurrency,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            system_log_level_v2=lambda_.SystemLogLevel[system_log_level],
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if snapstart else None,
            environment={
                "POWERTOOLS_SERVICE_NAME": service,
                "POWERTOOLS_METRICS_NAMESPACE": constants.METRICS_NAMESPACE,
                "LOG_LEVEL": constants.LOG_LEVEL,
                **environment,
            },
        )
        # SnapStart snapshots published versions only: each deploy publishes one (a new version when
        # the code or configuration changed) and moves the alias the triggers invoke to it.
        self.alias: lambda_.Alias | None = None
        self.target: lambda_.IFunction = self.function
        if snapstart:
            self.alias = lambda_.Alias(
                self, "Live", alias_name=constants.SNAPSTART_ALIAS, version=self.function.current_version
            )
            self.target = self.alias
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray's PutTraceSegments and PutTelemetryRecords support no resource-level permissions; "
            "they are the only statement on '*' (added by tracing=ACTIVE).",
        )
        runtime_reason = (
            f"Python {constants.PYTHON_VERSION} is pinned on purpose: the layers are built from cp"
            f"{constants.PYTHON_VERSION.replace('.', '')} wheels, so the runtime moves only together with "
            "infra/constants.PYTHON_VERSION and a rebuild of the layers."
        )
        acknowledge(self.function, "AwsSolutions-L1", runtime_reason)
        acknowledge(self.function, "Serverless-LambdaLatestVersion", runtime_reason)

    def allow(self, actions: tuple[str, ...] | list[str], resources: list[str]) -> None:
        """Add one statement allowing exactly ``actions`` on ``resources`` to this function's role."""
        self.role.add_to_policy(iam.PolicyStatement(actions=sorted(actions), resources=resources))


class ApiFunction(ServiceFunction):
    """The api Lambda: the REST routes; reads and writes ledger items (the dispatcher enqueues what follows).

    Examples
    --------
    >>> ApiFunction(stack, "Api", config=cfg, layers=layers, ledger=ledger)  # doctest: +SKIP
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        layers: Layers,
        ledger: Ledger,
    ) -> None:
        # The graph's input schema, generated now and shipped in the asset (wait_service.runs.input_schema).
        schema_dir = graph_input_dir(
            config.graph,
            source=config.graph_source,
            requirements=config.graph_requirements,
            checkpointer=config.checkpointer,
            framework=config.framework,
            key=graph_key(config),
        )
        # Without a checkpoint bucket an answer must fit in a checkpoint item beside the state.
        max_answer_bytes = MAX_ANSWER_BYTES if config.checkpoint_bucket else MAX_ANSWER_BYTES_WITHOUT_OFFLOAD
        super().__init__(
            scope,
            construct_id,
            sources={**API_SOURCES, GRAPH_INPUT_ASSET_DIR: schema_dir},
            layers=layers.for_api,
            environment={
                "AGENT_WAIT_LEDGER_TABLE": ledger.table.table_name,
                "AGENT_WAIT_LEDGER_TTL_DAYS": str(constants.LEDGER_TTL_DAYS),
                "AGENT_WAIT_LISTING_SHARDS": str(config.listing_shards),
                "AGENT_WAIT_INPUT_SCHEMA": f"{GRAPH_INPUT_ASSET_DIR}/{INPUT_SCHEMA_FILE}",
                "AGENT_WAIT_MAX_ANSWER_BYTES": str(max_answer_bytes),
                "AGENT_WAIT_STATS_TABLE": ledger.stats.table_name,
            },
            memory_mb=constants.API_MEMORY_MB,
            timeout_seconds=API_TIMEOUT_SECONDS,
            service=config.stack_name,
            description="agent-wait api: threads, questions and replies",
            snapstart=config.snapstart,
            system_log_level=config.lambda_system_log_level,
        )
        self.allow(LEDGER_API_ACTIONS, [ledger.table.table_arn])
        self.allow(LEDGER_API_INDEX_ACTIONS, ledger.index_arns)
        self.allow(STATS_API_ACTIONS, [ledger.stats.table_arn])
        self._configure_signed_requests(config)
        if config.inbox_client_id and config.inbox_domain:
            self.function.add_environment("AGENT_WAIT_INBOX_CLIENT_ID", config.inbox_client_id)
            self.function.add_environment("AGENT_WAIT_INBOX_DOMAIN", config.inbox_domain)
            if config.jwt_audience:
                self.function.add_environment("AGENT_WAIT_JWT_AUDIENCE", config.jwt_audience)
        acknowledge(
            self.function,
            "Serverless-LambdaDLQ",
            "API Gateway invokes the api synchronously and gets every error as the HTTP response; a Lambda "
            "dead-letter queue only ever receives failed asynchronous invocations.",
        )

    def _configure_signed_requests(self, config: StackConfig) -> None:
        """Signing keys for the /signed routes, and Slack's secrets for its interactions."""
        secrets: list[str] = list(config.signing_keys.values())
        if config.signing_keys:
            self.function.add_environment(
                "AGENT_WAIT_SIGNING_KEYS",
                json.dumps(config.signing_keys, sort_keys=True, separators=(",", ":")),
            )
        if config.slack_signing_secret:
            self.function.add_environment("AGENT_WAIT_SLACK_SIGNING_SECRET", config.slack_signing_secret)
            secrets.append(config.slack_signing_secret)
            if config.slack_bot_token_secret:
                # The modal to edit arguments is opened with the bot token (views.open).
                self.function.add_environment(
                    "AGENT_WAIT_SLACK_BOT_TOKEN_SECRET", config.slack_bot_token_secret
                )
                secrets.append(config.slack_bot_token_secret)
        if secrets:
            self.allow(SECRET_READ_ACTIONS, sorted(set(secrets)))


class RunnerFunction(ServiceFunction):
    """The runner Lambda: consumes the inbox, runs the graph, publishes the questions it raises.

    ``AGENT_WAIT_REPLY_URL`` is set by :meth:`set_reply_url` once the REST API exists.

    Examples
    --------
    >>> runner = RunnerFunction(stack, "Runner", config=cfg, layers=layers, ledger=ledger, inbox=inbox,
    ...                         fanout=fanout, checkpoints=checkpoints)  # doctest: +SKIP
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        layers: Layers,
        ledger: Ledger,
        inbox: Inbox,
        fanout: Fanout,
        checkpoints: Checkpoints,
    ) -> None:
        environment = {
            "AGENT_WAIT_LEDGER_TABLE": ledger.table.table_name,
            "AGENT_WAIT_LISTING_SHARDS": str(config.listing_shards),
            "AGENT_WAIT_TOPIC_ARN": fanout.topic.topic_arn,
            "AGENT_WAIT_OUTBOX_URL": fanout.outbox.queue_url,
            # A failed message is made visible again after a backoff (ChangeMessageVisibility).
            "AGENT_WAIT_INBOX_URL": inbox.queue.queue_url,
            "AGENT_WAIT_GRAPH": config.graph,
            "AGENT_WAIT_CHECKPOINTER": config.checkpointer,
            "AGENT_WAIT_CHECKPOINT_TABLE": checkpoints.table.table_name,
            "AGENT_WAIT_LEDGER_TTL_DAYS": str(constants.LEDGER_TTL_DAYS),
        }
        if config.framework is not None:
            environment["AGENT_WAIT_FRAMEWORK"] = config.framework
        if checkpoints.writes_table is not None:
            environment["AGENT_WAIT_CHECKPOINT_WRITES_TABLE"] = checkpoints.writes_table.table_name
        if checkpoints.bucket is not None:
            environment["AGENT_WAIT_CHECKPOINT_BUCKET"] = checkpoints.bucket.bucket_name
        if config.checkpointer == "aws":
            environment["AGENT_WAIT_CHECKPOINT_COMPRESSION"] = (
                "true" if config.checkpoint_compression else "false"
            )
        if config.default_ttl is not None:
            environment["AGENT_WAIT_DEFAULT_TTL"] = str(config.default_ttl)
        if config.slack_channel and config.slack_bot_token_secret:
            environment["AGENT_WAIT_SLACK_CHANNEL"] = config.slack_channel
            environment["AGENT_WAIT_SLACK_BOT_TOKEN_SECRET"] = config.slack_bot_token_secret
        # The user's own variables (their names are checked apart from ours in infra.runner_config),
        # and the names -> ARNs of the secrets the runner reads into its environment at init.
        environment.update(config.runner_environment)
        if config.runner_secrets:
            environment[RUNNER_SECRETS_VARIABLE] = json.dumps(
                config.runner_secrets, sort_keys=True, separators=(",", ":")
            )
        sources, exclude = runner_sources(config)
        super().__init__(
            scope,
            construct_id,
            sources=sources,
            exclude=exclude,
            layers=layers.for_runner,
            environment=environment,
            memory_mb=config.runner_memory,
            timeout_seconds=config.runner_timeout,
            # Context runner_reserved_concurrency (none by default: the account's unreserved pool).
            reserved_concurrency=config.runner_reserved_concurrency,
            service=config.stack_name,
            description="agent-wait runner: runs and resumes graphs from the inbox",
            snapstart=config.snapstart,
            system_log_level=config.lambda_system_log_level,
        )
        checkpoint_actions = (
            CHECKPOINT_AWS_ACTIONS if config.checkpointer == "aws" else CHECKPOINT_DYNAMODB_ACTIONS
        )
        self.allow(checkpoint_actions, [table.table_arn for table in checkpoints.tables])
        if checkpoints.bucket is not None:
            self.allow(CHECKPOINT_BUCKET_ACTIONS, [checkpoints.bucket.arn_for_objects("*")])
            self.allow(CHECKPOINT_BUCKET_LIFECYCLE_ACTIONS, [checkpoints.bucket.bucket_arn])
            if agent_framework(config) == "strands":
                self.allow(STRANDS_SESSION_BUCKET_ACTIONS, [checkpoints.bucket.bucket_arn])
            stack = cdk.Stack.of(self)
            bucket_id = stack.resolve(stack.get_logical_id(checkpoints.bucket.node.default_child))  # type: ignore[arg-type]
            acknowledge(
                self.role,
                f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/*]",
                "DynamoDBSaver names offloaded objects by thread and checkpoint id at run time; the grant is "
                "object-level actions on this one bucket's objects only.",
            )
        self.allow(LEDGER_RUNNER_ACTIONS, [ledger.table.table_arn])
        self.allow(["sns:Publish"], [fanout.topic.topic_arn])
        self.allow(TOPIC_KEY_ACTIONS, [fanout.key.key_arn])
        # Runs it queues (deferred ones) are started by the dispatcher, from the ledger's stream.
        self.allow(["sqs:SendMessage"], [fanout.outbox.queue_arn])
        self.allow(INBOX_CONSUME_ACTIONS, [inbox.queue.queue_arn])
        if config.slack_channel and config.slack_bot_token_secret:
            self.allow(SECRET_READ_ACTIONS, [config.slack_bot_token_secret])
        if config.runner_secrets:
            self.allow(
                SECRET_READ_ACTIONS, sorted({secret_grant(arn) for arn in config.runner_secrets.values()})
            )
        self.graph_policy = self._add_graph_policy(config)
        # A run deferred behind a thread's questions goes back to the inbox once the thread is free:
        # runner -> ledger -> stream -> dispatcher -> inbox -> runner, one hop per deferred run.
        # Lambda's recursive loop detection (which follows SQS, SNS, S3 and Lambda, not DynamoDB
        # streams) would stop such a chain after about 16 hops and drop the message to the DLQ; the
        # chain is bounded (each hop consumes one deferred run of the thread and starts at most one),
        # so the loop is allowed whatever path a later change gives it.
        cfn_function = self.function.node.default_child
        assert isinstance(cfn_function, lambda_.CfnFunction)
        cfn_function.recursive_loop = "Allow"
        # One run per invocation: the function's timeout bounds that run alone, and a timeout
        # retries that run only. A FIFO source takes no batching window; a failed message is retried
        # (ReportBatchItemFailures) and after maxReceiveCount it lands in the DLQ. The maximum
        # concurrency caps how many runs (and model calls) a burst starts at once; a FIFO queue
        # never runs two messages of one thread (group) together anyway.
        self.inbox_mapping = lambda_.EventSourceMapping(
            self,
            "InboxMapping",
            target=self.target,
            event_source_arn=inbox.queue.queue_arn,
            batch_size=RUNNER_BATCH_SIZE,
            max_concurrency=config.runner_max_concurrency,
            report_batch_item_failures=True,
        )
        self.inbox_mapping.node.add_dependency(self.role)
        acknowledge(
            self.function,
            "Serverless-LambdaDLQ",
            "The runner is invoked only by the inbox event source mapping (synchronously); a message that "
            "fails maxReceiveCount times moves to inbox-dlq.fifo by the queue's redrive policy.",
        )
        acknowledge(
            self.inbox_mapping,
            "Serverless-LambdaEventSourceMappingDestination",
            "On-failure destinations exist only for stream and Kafka sources; for SQS the inbox's redrive "
            "policy to inbox-dlq.fifo is the failure destination.",
        )

    def _add_graph_policy(self, config: StackConfig) -> iam.Policy | None:
        """The statements of ``runner_policy`` as their own policy on the runner's role.

        A policy of their own, so the acknowledgements the user's file gives apply to the user's
        statements only: cdk-nag checks them like ours, and a wildcard without the user's
        acknowledgement fails the synth.
        """
        policy_file = config.runner_policy
        if policy_file is None:
            return None
        statements = []
        for index, document in enumerate(policy_file.statements):
            where = f"context runner_policy: {policy_file.path}: Statement[{index}]"
            try:
                statement = iam.PolicyStatement.from_json(document)
            except Exception as exc:  # jsii raises its own error types for a malformed statement
                raise ConfigError(f"{where}: {exc}") from exc
            problems = statement.validate_for_identity_policy()
            if problems:
                raise ConfigError(f"{where}: {'; '.join(problems)}")
            statements.append(statement)
        policy = iam.Policy(self, "GraphPolicy", roles=[self.role], statements=statements)
        # The function starts only once its graph may call what the user granted.
        self.function.node.add_dependency(policy)
        for rule_id, reason in acknowledged_findings(policy_file):
            acknowledge(policy, rule_id, f"{reason} (acknowledged in {policy_file.path.name})")
        return policy

    def set_reply_url(self, api_url: str) -> None:
        """Wire ``AGENT_WAIT_REPLY_URL`` to ``<api url>questions/{question_id}/reply``."""
        self.function.add_environment("AGENT_WAIT_REPLY_URL", f"{api_url}questions/{{question_id}}/reply")
