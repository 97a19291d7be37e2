"""The api's init builds what every request needs, and leaves what only some routes use for later.

A fresh interpreter imports the api handler configured as in Lambda (no Slack, no sign-in, fake
credentials: building clients calls no AWS API) and lists what got loaded and built:

- Slack's module: only a deployment with a Slack signing secret serves ``/slack/interactions``;
- the inbox page: read at the first ``GET /inbox``;
- the policy store (``wait_service.answers.policy_store``): its errors map to their statuses by name;
- Powertools idempotency: built at the first ``POST /threads/{id}/runs`` with an ``Idempotency-Key``;
- Powertools Parameters: the signing keys are read at the first signed request;
- the X-Ray SDK: the tracer is built at the first traced call;
- LangGraph: the api never runs a graph;
- one DynamoDB client and one SQS client: the ledger, the signed routes' replay guard and
  idempotent starts share the one DynamoDB client (each client costs milliseconds to build).
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
}

NEVER_AT_INIT = (
    "wait_service.channels.slack",
    "agent_wait.slack",
    "wait_service.http.inbox_page",
    "wait_service.answers.policy_store",
    "aws_lambda_powertools.utilities.idempotency",
    "aws_lambda_powertools.utilities.parameters",
    "aws_xray_sdk",
    "langgraph",
    "langchain_core",
)


def test_the_api_init_loads_no_route_only_module_and_builds_one_client() -> None:
    code = (
        "import gc, json, sys\n"
        f"sys.path[:0] = [{str(ROOT / 'functions' / 'api')!r}, {str(ROOT)!r}]\n"
        "import handler\n"
        "assert handler._service._service is not None, 'the service was not built at init'\n"
        "from botocore.client import BaseClient\n"
        # The init froze what it built (wait_service.init_phase); the collector lists it once thawed.
        "gc.unfreeze()\n"
        "clients = sorted(o.meta.service_model.service_name for o in gc.get_objects()"
        " if isinstance(o, BaseClient))\n"
        f"loaded = sorted(m for m in sys.modules if m.startswith({NEVER_AT_INIT!r}))\n"
        "print(json.dumps({'loaded': loaded, 'clients': clients}))\n"
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
    found = json.loads(done.stdout.strip().splitlines()[-1])
    # One DynamoDB client, shared by the ledger, the replay guard and idempotent starts; no SQS client:
    # the api only writes the ledger, whose stream's dispatcher sends the messages.
    assert found == {"loaded": [], "clients": ["dynamodb"]}


def test_the_policy_stores_errors_keep_their_statuses_without_the_api_importing_the_store() -> None:
    from wait_service.answers.policy_store import PolicyConflictError, PolicyInvalidError
    from wait_service.http.errors_http import error_body, status_for

    # A subclass of ``InvalidRequestError`` (400), mapped by its own name first.
    assert status_for(PolicyInvalidError("ttl must be positive", field="policy.ttl")) == 422
    assert status_for(PolicyConflictError("set again", current_version=3)) == 409
    assert error_body(PolicyInvalidError("no", field="policy.ttl"))["field"] == "policy.ttl"
