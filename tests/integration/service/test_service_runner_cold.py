"""The runner's init builds everything it serves with, and loads nothing it never uses.

A fresh interpreter imports the runner handler configured as in Lambda (fake credentials: building
clients calls no AWS API) and lists what got loaded. Each module named here cost milliseconds of
every cold start when it slipped in:

- Powertools' parser models: ``aws_lambda_powertools.utilities.batch`` imports every parser model
  when pydantic is already loaded, so the handler imports the batch utility first;
- Powertools Parameters: only for runner secrets, and none are configured here;
- ``langchain_core.tools``: the LangGraph adapter recognises its injected-argument markers without it;
- the X-Ray SDK: the tracer is built at the first traced call.

LangSmith is imported by LangGraph itself: ``Pregel`` is a LangChain ``Runnable``, and
``langchain_core.runnables.base`` imports its tracers, hence ``langsmith.run_trees``, at module level.
With tracing off the handler defers the rest (``wait_service.runs.deferred_imports``): ``langsmith.types``,
the SDK's generated REST API and most of its weight, and the LangGraph Platform SDK never run;
``test_service_runner_deferred.py`` shows tracing still works, on at init or turned on later.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

ENVIRONMENT = {
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "cold",
    "AWS_SECRET_ACCESS_KEY": "cold",
    "POWERTOOLS_METRICS_NAMESPACE": "AgentWaitColdTest",
    "AGENT_WAIT_LEDGER_TABLE": "ledger",
    "AGENT_WAIT_INBOX_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/inbox.fifo",
    "AGENT_WAIT_OUTBOX_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/outbox.fifo",
    "AGENT_WAIT_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:questions",
    "AGENT_WAIT_CHECKPOINT_TABLE": "checkpoints",
    "AGENT_WAIT_GRAPH": "examples.refund_agent:build_graph",
    "AGENT_WAIT_REPLY_URL": "https://api.example/prod/questions/{question_id}/reply",
}

NEVER_AT_INIT = (
    "aws_lambda_powertools.utilities.parser",
    "aws_lambda_powertools.utilities.parameters",
    "langchain_core.tools.base",
    "aws_xray_sdk",
)

# Packages imported (LangGraph imports from some of their modules) whose own code never runs with
# LangSmith tracing off: ``langsmith.types`` is the SDK's generated REST API, about 150 modules;
# ``langgraph_checkpoint_aws``'s imports every saver and store of the package.
NEVER_RUN_AT_INIT = (
    "langsmith.types",
    "langgraph_sdk",
    "langgraph_sdk.auth",
    "langgraph_checkpoint_aws",
    "langgraph_checkpoint_aws.checkpoint",
)


def test_the_runner_init_builds_its_service_without_modules_it_never_uses() -> None:
    code = (
        "import json, sys\n"
        f"sys.path[:0] = [{str(ROOT / 'functions' / 'runner')!r}, {str(ROOT)!r}]\n"
        "import handler\n"
        "assert handler._service._service is not None, 'the service was not built at init'\n"
        "from wait_service.runs.deferred_imports import executed\n"
        f"loaded = sorted(m for m in sys.modules if m.startswith({NEVER_AT_INIT!r}))\n"
        f"run = sorted(m for m in {NEVER_RUN_AT_INIT!r} if executed(m))\n"
        "print(json.dumps(loaded + run))\n"
    )
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        **ENVIRONMENT,
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_langsmith_comes_with_langgraph_itself() -> None:
    code = (
        "import json, sys\n"
        "import langchain_core.runnables.config, langgraph.checkpoint.base\n"
        "before = 'langsmith.run_trees' in sys.modules\n"
        "from langchain_core.runnables import Runnable\n"
        "import langgraph.graph\n"
        "loaded = [m in sys.modules for m in ('langsmith.run_trees', 'langsmith.types')]\n"
        "print(json.dumps([before, *loaded]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    # Not loaded by the narrower modules; loaded by ``Runnable`` itself, which LangGraph builds on,
    # with all of ``langsmith.types`` when nothing defers it: what the runner's handler avoids.
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [False, True, True]
