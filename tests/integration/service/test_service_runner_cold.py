"""The runner's init builds everything it serves with, and loads nothing it never uses.

A fresh interpreter imports the runner handler configured as in Lambda (fake credentials: building
clients calls no AWS API) and lists what got loaded. Each module named here cost milliseconds of
every cold start when it slipped in:

- Powertools' parser models: ``aws_lambda_powertools.utilities.batch`` imports every parser model
  when pydantic is already loaded, so the handler imports the batch utility first;
- Powertools Parameters: only for runner secrets, and none are configured here;
- ``langchain_core.tools``: the LangGraph adapter recognises its injected-argument markers without it;
- the X-Ray SDK: the tracer is built at the first traced call.

LangSmith (about 220 modules, with OpenTelemetry and its own HTTP client) is loaded although
nothing uses it unless LangSmith tracing is on, and it cannot honestly be kept out: LangGraph's
``Pregel`` is a LangChain ``Runnable``, and ``langchain_core.runnables.base`` imports its tracers,
hence ``langsmith.run_trees``, at module level (``langgraph._internal._runnable`` imports
``LangChainTracer`` too). Only a lazy stand-in planted in ``sys.modules`` would avoid it, which is
patching the installed packages by another name. The last test here fails on the day LangGraph
stops loading it: then ``langsmith`` belongs in ``NEVER_AT_INIT``. Until then SnapStart (context
``snapstart=true``) is how a deployment stops paying for it at every cold start.
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


def test_the_runner_init_builds_its_service_without_modules_it_never_uses() -> None:
    code = (
        "import json, sys\n"
        f"sys.path[:0] = [{str(ROOT / 'functions' / 'runner')!r}, {str(ROOT)!r}]\n"
        "import handler\n"
        "assert handler._service._service is not None, 'the service was not built at init'\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({NEVER_AT_INIT!r}))))\n"
    )
    environment = {"PATH": os.environ.get("PATH", ""), **ENVIRONMENT}
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
        "print(json.dumps([before, 'langsmith.run_trees' in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    # Not loaded by the narrower modules; loaded by ``Runnable`` itself, which LangGraph builds on.
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [False, True]
