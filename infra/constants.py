"""Names, runtime and architecture of the deployment, chosen once.

Everything the constructs, the bundlers and the report agree on lives here. It imports nothing from
``aws_cdk``: the bundlers and ``python -m infra.report`` read it without loading the CDK.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

from wait_service.resources import TTL_DAYS

if TYPE_CHECKING:
    from collections.abc import Mapping

REPO_ROOT: Final = Path(__file__).resolve().parent.parent

METRICS_NAMESPACE: Final = "AgentWait"
LOG_LEVEL: Final = "INFO"
DEFAULT_STACK_NAME: Final = "agent-wait"

# Lambda runtime. The layers are built for exactly this interpreter: the wheels' tags must match.
PYTHON_VERSION: Final = "3.13"
# Graviton: about 20 % cheaper per GB-second than x86_64, and every compiled dependency
# (pydantic_core, orjson, ormsgpack, xxhash, zstandard, PyYAML) publishes aarch64 manylinux wheels.
ARCHITECTURE: Final = "arm64"
PIP_PLATFORM: Final = "manylinux2014_aarch64"

API_MEMORY_MB: Final = 512
# The dispatcher waits on AWS calls (queues, topic, stats table, archive) most of each invocation
# (about 80 % of its modelled duration, `make capacity`), and its imports and clients take about
# 65 MB (measured locally): 256 MB leaves room for a batch. CPU scales with memory, so its few ms of
# CPU take longer, not more GB-s.
DISPATCHER_MEMORY_MB: Final = 256
# With SnapStart (context snapstart=true): the alias of the published version the triggers invoke.
SNAPSTART_ALIAS: Final = "live"
RUNNER_MEMORY_MB: Final = 1024  # LangGraph's import and graph runs are CPU-bound; CPU scales with memory.
LOG_RETENTION: Final = "ONE_MONTH"  # a member of aws_logs.RetentionDays
# Ledger items and checkpoints expire together (the runner's checkpointer uses the same days).
LEDGER_TTL_DAYS: Final = TTL_DAYS

API_STAGE: Final = "prod"
# The stage's throttle per method (context api_rate / api_burst): requests a second, and the bucket
# a burst may take. API Gateway's account quota (10,000 a second, burst 5,000) caps every API.
API_THROTTLE_RATE: Final = 50
API_THROTTLE_BURST: Final = 100
# At most this many runner invocations at once (context runner_max_concurrency): an SQS event source
# mapping takes 2 to 1,000.
RUNNER_MAX_CONCURRENCY: Final = 10
# Batches of one shard of the ledger's stream the dispatcher handles at once (context
# dispatcher_parallelization, 1 to 10): one full batch of 100 records takes it about half a second
# (`make capacity`, modelled), and a stream shard carries up to about 120 records a second at the
# default rate (10 questions/s), so two keep it under half busy.
DISPATCHER_PARALLELIZATION: Final = 2
# 256 KiB is SQS's message limit; the api refuses larger bodies with 413 before enqueuing.

# Alarms. Each compares a metric with a threshold over a window of 5-minute periods, not one reading:
# it fires when DATAPOINTS of the last EVALUATION periods breach. A message in a DLQ, a resume that
# failed, a dropped timer each need a human, so one occurrence in the window fires; error and throttle
# counts, 5xx and latency fire only when they persist (2 of 3 periods).
ALARM_PERIOD_MINUTES: Final = 5
ALARM_EVALUATION_PERIODS: Final = 3
ALARM_DATAPOINTS: Final = 2
DLQ_ALARM_THRESHOLD: Final = 1
RESUME_FAILURE_ALARM_THRESHOLD: Final = 1
# Percent of runner invocations (one run or resume each) that ended with the run failed.
RUNS_FAILED_RATE_ALARM_PERCENT: Final = 10
LAMBDA_ERROR_ALARM_THRESHOLD: Final = 1
LAMBDA_THROTTLE_ALARM_THRESHOLD: Final = 1
# The Average of API Gateway's 5XXError is the fraction of requests answered with a 5xx.
API_5XX_ALARM_RATE: Final = 0.05
API_P99_LATENCY_ALARM_MS: Final = 5000
DYNAMODB_THROTTLE_ALARM_THRESHOLD: Final = 1
SNS_FAILED_ALARM_THRESHOLD: Final = 1
SCHEDULER_ERROR_ALARM_THRESHOLD: Final = 1
# A run waits in the inbox for seconds; its oldest message older than this (longer than a whole
# visibility timeout plus a run) means the runner is not consuming it.
INBOX_AGE_ALARM_SECONDS: Final = 900
# The outbox is read by your systems; an envelope unread for an hour means its consumer has stopped
# (the queue keeps messages 14 days, then drops them unread).
OUTBOX_AGE_ALARM_SECONDS: Final = 3600
# What a committed reply or start promises: its message leaves the ledger's stream within this many
# seconds. The dispatcher's iterator age (the age of the last record it read) past it alarms.
STREAM_AGE_ALARM_SECONDS: Final = 60


def bundle_cache_dir(environ: Mapping[str, str]) -> Path:
    """Where the bundlers keep built layers between synths, keyed on what went into them.

    ``AGENT_WAIT_LAYER_CACHE`` if set; else ``agent-wait/layers`` in the user's cache folder
    (``XDG_CACHE_HOME``, or ``~/.cache``), so that every clone and worktree on a machine shares one
    build of each layer, as pip shares its wheels. A key names everything that decides a layer's
    contents and a build is renamed into place whole, so clones building at once never mix.

    Examples
    --------
    >>> bundle_cache_dir({"AGENT_WAIT_LAYER_CACHE": "/tmp/layers"})
    PosixPath('/tmp/layers')
    >>> bundle_cache_dir({"XDG_CACHE_HOME": "/var/cache/me"})
    PosixPath('/var/cache/me/agent-wait/layers')
    """
    if chosen := environ.get("AGENT_WAIT_LAYER_CACHE"):
        return Path(chosen).expanduser()
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "agent-wait" / "layers"


BUNDLE_CACHE_DIR: Final = bundle_cache_dir(os.environ)
# Metadata on the graph layer naming the user's requirements file (context graph_requirements), so
# the assembly's import check (infra.report) builds the same layer for the host.
GRAPH_REQUIREMENTS_METADATA: Final = "agent-wait:graph-requirements"
# Set on the graph layer of a user's agent: it carries botocore with every AWS service's model.
EVERY_AWS_SERVICE_METADATA: Final = "agent-wait:every-aws-service"
