"""Names, runtime and architecture of the deployment, chosen once.

Everything the constructs, the bundlers and the report agree on lives here. It imports nothing from
``aws_cdk``: the bundlers and ``python -m infra.report`` read it without loading the CDK.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from wait_service.resources import TTL_DAYS

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
RUNNER_MEMORY_MB: Final = 1024  # LangGraph's import and graph runs are CPU-bound; CPU scales with memory.
LOG_RETENTION: Final = "ONE_MONTH"  # a member of aws_logs.RetentionDays
# Ledger items and checkpoints expire together (the runner's checkpointer uses the same days).
LEDGER_TTL_DAYS: Final = TTL_DAYS

API_STAGE: Final = "prod"
API_THROTTLE_RATE: Final = 50
API_THROTTLE_BURST: Final = 100
# 256 KiB is SQS's message limit; the api refuses larger bodies with 413 before enqueuing.

# Alarm thresholds: any message in a DLQ, any failed resume or run, any Lambda error or throttle
# and any 5xx from the api needs a human.
DLQ_ALARM_THRESHOLD: Final = 1
RESUME_FAILURE_ALARM_THRESHOLD: Final = 1
RUNS_FAILED_ALARM_THRESHOLD: Final = 1
LAMBDA_ERROR_ALARM_THRESHOLD: Final = 1
LAMBDA_THROTTLE_ALARM_THRESHOLD: Final = 1
API_5XX_ALARM_THRESHOLD: Final = 1
# A run waits in the inbox for seconds; its oldest message older than this (longer than a whole
# visibility timeout plus a run) means the runner is not consuming it.
INBOX_AGE_ALARM_SECONDS: Final = 900
# What a committed reply or start promises: its message leaves the ledger's stream within this many
# seconds. The dispatcher's iterator age (the age of the last record it read) past it alarms.
STREAM_AGE_ALARM_SECONDS: Final = 60

# Where the bundlers keep built layers between synths, keyed on what went into them.
BUNDLE_CACHE_DIR: Final = REPO_ROOT / "cdk.out" / ".bundle-cache"
# Metadata on the graph layer naming the user's requirements file (context graph_requirements), so
# the assembly's import check (infra.report) builds the same layer for the host.
GRAPH_REQUIREMENTS_METADATA: Final = "agent-wait:graph-requirements"
# Set on the graph layer of a user's agent: it carries botocore with every AWS service's model.
EVERY_AWS_SERVICE_METADATA: Final = "agent-wait:every-aws-service"
