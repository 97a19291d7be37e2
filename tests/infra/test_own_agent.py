"""Bring your own agent: a user's graph deployed from a folder outside the project, by context only.

One synth (module-scoped) of an agent written to a temporary folder, with its own requirement
(``inflection``, pure Python, in no layer of ours), its own policy (a wildcard it acknowledges), its
own environment, secrets, memory and timeout; and one synth whose unacknowledged wildcard fails.
"""

from __future__ import annotations

import json
import textwrap
from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
import pytest
from cdk_nag import AwsSolutionsChecks, ServerlessChecks

from infra.report import AssemblyReport

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.infra.conftest import Synth

pytestmark = pytest.mark.infra

REQUIREMENT = "inflection==0.5.1"
_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:"
SECRETS = {"API_KEY": _ARN + "team/api-AbC123", "DB_PASSWORD": _ARN + "team/db"}
MODEL_ARN = "arn:aws:bedrock:eu-west-1::foundation-model/*"
GRAPH = """\
    \"\"\"A user's agent: one node that turns a title into a slug with a package of its own.\"\"\"

    import boto3
    import inflection
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict


    class State(TypedDict):
        title: str


    def slug(state: State) -> State:
        return {"title": inflection.parameterize(state["title"])}


    def build_graph(checkpointer=None):
        # A model client made at build time, as LangChain's Bedrock chat models do: a service the
        # deployment itself never calls.
        boto3.client("bedrock-runtime", region_name="eu-west-1")
        graph = StateGraph(State)
        graph.add_node("slug", slug)
        graph.add_edge(START, "slug")
        graph.add_edge("slug", END)
        return graph.compile(checkpointer=checkpointer)
    """


def write_agent(root: Path) -> Path:
    """``root/agent/my_agent/graph.py`` with clutter that must not ship; returns ``root/agent``."""
    agent = root / "agent"
    (agent / "my_agent").mkdir(parents=True)
    (agent / "my_agent" / "__init__.py").write_text("")
    (agent / "my_agent" / "graph.py").write_text(textwrap.dedent(GRAPH))
    for junk in (".venv/lib/site.py", "my_agent/__pycache__/graph.cpython-311.pyc", ".git/HEAD"):
        (agent / junk).parent.mkdir(parents=True, exist_ok=True)
        (agent / junk).write_text("junk")
    return agent


def write_policy(path: Path, *, acknowledged: bool) -> Path:
    document: dict[str, Any] = {
        "Statement": [{"Effect": "Allow", "Action": "bedrock:InvokeModel", "Resource": MODEL_ARN}]
    }
    if acknowledged:
        document["acknowledge"] = [
            {"id": "AwsSolutions-IAM5", "reason": "Any foundation model of the region."}
        ]
    path.write_text(json.dumps(document))
    return path


@pytest.fixture(scope="module")
def agent_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("own-agent")
    agent = write_agent(root)
    (root / "requirements.txt").write_text(f"# the agent's own\n{REQUIREMENT}\n")
    write_policy(root / "policy.json", acknowledged=True)
    return agent


@pytest.fixture(scope="module")
def own_synth(synth_factory: Callable[[dict[str, str]], Synth], agent_dir: Path) -> Synth:
    root = agent_dir.parent
    return synth_factory(
        {
            "stack_name": "aw-own",
            "graph": "my_agent.graph:build_graph",
            "graph_source": str(agent_dir),
            "graph_requirements": str(root / "requirements.txt"),
            "runner_policy": str(root / "policy.json"),
            "runner_environment": json.dumps({"MODEL_ID": "anthropic.claude-3-haiku", "TEAM": "refunds"}),
            "runner_secrets": json.dumps(SECRETS),
            "runner_memory": "2048",
            "runner_timeout": "300",
        }
    )


@pytest.fixture(scope="module")
def own_report(own_synth: Synth) -> AssemblyReport:
    return AssemblyReport.load(own_synth.outdir)


def _function(synth: Synth, prefix: str) -> dict[str, Any]:
    (props,) = [
        f["Properties"] for k, f in synth.resources("AWS::Lambda::Function").items() if k.startswith(prefix)
    ]
    return props


def _runner_asset(report: AssemblyReport) -> Path:
    (runner,) = [f for f in report.functions if f.name == "Runner"]
    return runner.path


def test_the_user_folder_is_bundled_at_the_root_of_the_runner_asset(own_report: AssemblyReport) -> None:
    asset = _runner_asset(own_report)
    assert (asset / "my_agent" / "graph.py").is_file()
    assert (asset / "handler.py").is_file() and (asset / "wait_service" / "runs" / "runner.py").is_file()
    # The sample is replaced, and the user's caches, virtual environment and VCS data stay home.
    assert not (asset / "examples").exists()
    assert not (asset / ".venv").exists() and not (asset / ".git").exists()
    assert not list(asset.rglob("graph.cpython-311.pyc"))
    # Compiled for the runtime like our own code.
    assert list((asset / "my_agent" / "__pycache__").glob("graph.cpython-313.pyc"))


def test_the_user_requirement_lands_in_the_graph_layer(own_synth: Synth, own_report: AssemblyReport) -> None:
    (graph,) = [layer for layer in own_report.layers if layer.pip_layer == "graph"]
    assert (graph.path / "python" / "inflection" / "__init__.pyc").is_file() or list(
        (graph.path / "python").glob("inflection*.pyc")
    )
    assert list((graph.path / "python").glob("inflection-0.5.1.dist-info"))
    # Still on top of what the runner needs, and not in the core layer.
    assert (graph.path / "python" / "langgraph").is_dir()
    (core,) = [layer for layer in own_report.layers if layer.pip_layer == "core"]
    assert not list((core.path / "python").glob("inflection*"))
    # The agent may call any AWS service: its graph layer carries every botocore model, at the
    # core layer's botocore version (Lambda lays it over the core layer's trimmed copy).
    models = graph.path / "python" / "botocore" / "data"
    assert (models / "bedrock-runtime").is_dir() and len(list(models.iterdir())) > 300
    assert not (core.path / "python" / "botocore" / "data" / "bedrock-runtime").exists()
    assert [p.name for p in (graph.path / "python").glob("botocore-*.dist-info")] == [
        p.name for p in (core.path / "python").glob("botocore-*.dist-info")
    ]
    (description,) = [
        r["Properties"]["Description"]
        for k, r in own_synth.resources("AWS::Lambda::LayerVersion").items()
        if k.startswith("LayersGraph")
    ]
    assert description.endswith("-r requirements.txt")


def test_the_import_check_imports_the_user_graph_from_the_assembled_asset(
    own_report: AssemblyReport,
) -> None:
    (runner,) = [f for f in own_report.functions if f.name == "Runner"]
    result = own_report.import_handler(runner)
    assert result.ok, result.output
    # The runner built the user's graph at init (as in Lambda), with the layer's own inflection.
    assert {"my_agent", "inflection", "langgraph"} <= set(result.modules)


def test_the_api_validates_input_against_the_user_graph(own_report: AssemblyReport) -> None:
    (api,) = [f for f in own_report.functions if f.name == "ApiFunction"]
    schema = json.loads((api.path / "graph_input" / "graph_input_schema.json").read_text())
    assert schema["properties"] == {"title": {"title": "Title", "type": "string"}}


def test_runner_memory_timeout_and_the_inbox_visibility_follow_the_context(
    own_synth: Synth, default_synth: Synth
) -> None:
    runner = _function(own_synth, "Runner")
    assert (runner["MemorySize"], runner["Timeout"]) == (2048, 300)
    (inbox,) = [
        q["Properties"] for k, q in own_synth.resources("AWS::SQS::Queue").items() if k.startswith("Inbox4")
    ]
    assert inbox["VisibilityTimeout"] == 6 * 300
    # The api and the lifecycle function are not the runner: unchanged.
    for prefix in ("ApiFunction", "TimersLifecycle"):
        mine, default = _function(own_synth, prefix), _function(default_synth, prefix)
        assert (mine["MemorySize"], mine["Timeout"]) == (default["MemorySize"], default["Timeout"])


def test_runner_environment_and_secrets_are_names_and_arns_only(own_synth: Synth) -> None:
    variables = _function(own_synth, "Runner")["Environment"]["Variables"]
    assert (variables["MODEL_ID"], variables["TEAM"]) == ("anthropic.claude-3-haiku", "refunds")
    assert json.loads(variables["AGENT_WAIT_RUNNER_SECRETS"]) == SECRETS
    text = own_synth.template_path.read_text()
    # No function gets a secret's variable set, and no dynamic reference resolves one at deploy time.
    for props in own_synth.resources("AWS::Lambda::Function").values():
        assert not set(SECRETS) & set(props.get("Environment", {}).get("Variables", {}))
    assert "resolve:secretsmanager" not in text


def _statements(synth: Synth, prefix: str) -> list[dict[str, Any]]:
    return [
        statement
        for k, policy in synth.resources("AWS::IAM::Policy").items()
        if k.startswith(prefix)
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_the_runner_reads_exactly_its_secrets(own_synth: Synth) -> None:
    reads = [
        s for s in _statements(own_synth, "RunnerRole") if s["Action"] == "secretsmanager:GetSecretValue"
    ]
    # The full ARN as it is; the partial one (no suffix) with exactly Secrets Manager's six characters.
    assert [s["Resource"] for s in reads] == [[SECRETS["API_KEY"], SECRETS["DB_PASSWORD"] + "-??????"]]
    others = _statements(own_synth, "ApiFunction") + _statements(own_synth, "Timers")
    assert not any("team/" in json.dumps(s) for s in others)


def test_the_user_policy_is_its_own_policy_on_the_runner_role_only(own_synth: Synth) -> None:
    policies = {
        k: p["Properties"]
        for k, p in own_synth.resources("AWS::IAM::Policy").items()
        if k.startswith("RunnerGraph")
    }
    ((_, policy),) = policies.items()
    assert policy["PolicyDocument"]["Statement"] == [
        {"Action": "bedrock:InvokeModel", "Effect": "Allow", "Resource": MODEL_ARN}
    ]
    (role,) = policy["Roles"]
    assert role["Ref"].startswith("RunnerRole")


@pytest.mark.parametrize("pack", [AwsSolutionsChecks, ServerlessChecks], ids=lambda p: p.__name__)
def test_cdk_nag_passes_with_the_user_acknowledgement(own_synth: Synth, pack: Any) -> None:
    report = pack().validate_scope(own_synth.stack)
    assert [v.rule_name for v in report.violations if v.severity == "error"] == []


def test_an_unacknowledged_wildcard_fails_the_synth(tmp_path: Path) -> None:
    from app import build_app

    policy = write_policy(tmp_path / "policy.json", acknowledged=False)
    app, _ = build_app(cdk.App(outdir=str(tmp_path / "cdk.out"), context={"runner_policy": str(policy)}))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "cdk.out" / "validation-report.json").read_text())
    (violation,) = [v for r in report["pluginReports"] for v in r["violations"]]
    assert violation["ruleName"] == f"AwsSolutions-IAM5[Resource::{MODEL_ARN}]"
    assert [c["constructPath"] for c in violation["violatingConstructs"]] == [
        "agent-wait/Runner/GraphPolicy/Resource"
    ]
    # What `make synth` ends with: one line naming the key (app.main raises this error).
    from infra.errors import one_line, refusal

    refused = refusal(tmp_path / "cdk.out")
    assert refused is not None
    assert one_line(refused) == (
        f"agent-wait: context runner_policy: cdk-nag refuses AwsSolutions-IAM5[Resource::{MODEL_ARN}] on the "
        'statements of the file; fix: narrow the statement, or add {"id": "<rule>", "reason": "..."} to the '
        'file\'s "acknowledge"'
    )
