"""Context keys of a user's agent, checked before anything is built: each error names its key."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
import pytest

from infra.bundling import tree_hash
from infra.config import ConfigError, StackConfig
from infra.constants import REPO_ROOT
from infra.functions import RUNNER_SOURCES, runner_sources
from infra.requirements import cache_key, pip_command
from infra.runner_config import acknowledged_findings, runner_policy, secret_grant

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.infra

_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:"


def _config(**context: Any) -> StackConfig:
    return StackConfig.from_context(context.get)


def test_defaults_keep_the_sample_and_the_runner_size() -> None:
    config = _config()
    assert (config.graph_source, config.graph_requirements, config.runner_policy) == (None, None, None)
    assert (config.runner_environment, config.runner_secrets) == ({}, {})
    assert (config.runner_memory, config.runner_timeout) == (1024, 120)
    assert runner_sources(config) == (RUNNER_SOURCES, ("demo.py",))


def test_relative_paths_are_taken_from_the_project_root_and_absolute_ones_as_they_are(tmp_path: Path) -> None:
    assert _config(graph_source="examples").graph_source == REPO_ROOT / "examples"
    assert _config(graph_source=str(tmp_path)).graph_source == tmp_path.resolve()
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("inflection==0.5.1\n")
    assert _config(graph_requirements=str(requirements)).graph_requirements == requirements.resolve()


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"graph_source": "/nonexistent/agent"}, "context graph_source: folder /nonexistent/agent not found"),
        (
            {"graph_requirements": "/x/requirements.txt"},
            "context graph_requirements: file /x/requirements.txt not found",
        ),
        ({"runner_policy": "/x/y.json"}, "context runner_policy: file /x/y.json not found"),
        ({"runner_policy": {"Statement": []}}, "context runner_policy: expected the path of a JSON file"),
        ({"runner_environment": "{MODEL_ID: x}"}, "context runner_environment: not JSON"),
        ({"runner_environment": '["MODEL_ID"]'}, "context runner_environment: expected a JSON object"),
        ({"runner_environment": '{"RETRIES": 3}'}, "context runner_environment: RETRIES must be a string"),
        ({"runner_environment": '{"AWS_REGION": "x"}'}, "context runner_environment: AWS_REGION is reserved"),
        ({"runner_environment": {"_HANDLER": "x"}}, "context runner_environment: _HANDLER is reserved"),
        ({"runner_environment": {"LAMBDA_TASK_ROOT": "x"}}, "LAMBDA_TASK_ROOT is reserved"),
        ({"runner_environment": {"AGENT_WAIT_GRAPH": "x"}}, "AGENT_WAIT_GRAPH is reserved"),
        ({"runner_environment": {"POWERTOOLS_SERVICE_NAME": "x"}}, "POWERTOOLS_SERVICE_NAME is reserved"),
        ({"runner_environment": {"1ABC": "x"}}, "must start with a letter"),
        ({"runner_secrets": "not json"}, "context runner_secrets: not JSON"),
        (
            {"runner_secrets": '{"API_KEY": "sk-123"}'},
            'context runner_secrets: API_KEY="sk-123" is not a Secrets Manager',
        ),
        ({"runner_secrets": {"AWS_SECRET_ACCESS_KEY": _ARN + "a"}}, "AWS_SECRET_ACCESS_KEY is reserved"),
        (
            {"runner_environment": {"API_KEY": "x"}, "runner_secrets": {"API_KEY": _ARN + "a"}},
            "runner_environment and runner_secrets both set API_KEY",
        ),
        (
            {"runner_memory": "64"},
            "context runner_memory='64': expected a whole number of MB from 128 to 10240",
        ),
        ({"runner_memory": "10241"}, "context runner_memory"),
        (
            {"runner_timeout": "0"},
            "context runner_timeout='0': expected a whole number of seconds from 1 to 900",
        ),
        ({"runner_timeout": "901"}, "context runner_timeout"),
        ({"runner_timeout": "2m"}, "context runner_timeout"),
    ],
)
def test_a_bad_value_is_refused_naming_its_key(context: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=None) as raised:
        _config(**context)
    assert message in str(raised.value)


def test_values_from_cdk_json_objects_and_from_inline_json_are_the_same() -> None:
    inline = _config(runner_environment='{"MODEL_ID": "m"}', runner_secrets=json.dumps({"K": _ARN + "k"}))
    objects = _config(runner_environment={"MODEL_ID": "m"}, runner_secrets={"K": _ARN + "k"})
    assert (inline.runner_environment, inline.runner_secrets) == (
        objects.runner_environment,
        objects.runner_secrets,
    )
    assert (_config(runner_memory=2048).runner_memory, _config(runner_timeout="900").runner_timeout) == (
        2048,
        900,
    )


def _policy_file(tmp_path: Path, document: Any) -> str:
    path = tmp_path / "policy.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{not json", "not JSON"),
        ({"Statements": []}, "unknown field(s) Statements"),
        ({"Statement": []}, "Statement must be a non-empty list"),
        ({"Statement": [{"Action": "s3:GetObject"}]}, "Statement[0] needs an Action and a Resource"),
        (
            {"Statement": [{"Action": "s3:GetObject", "Resource": "*", "Principal": {"AWS": "*"}}]},
            "Statement[0] names a Principal",
        ),
        (
            {
                "Statement": [{"Action": "s3:GetObject", "Resource": "*"}],
                "acknowledge": [{"id": "AwsSolutions-IAM5"}],
            },
            'acknowledge[0] (AwsSolutions-IAM5) needs a "reason"',
        ),
    ],
)
def test_a_malformed_policy_file_is_refused_naming_the_key_and_file(
    tmp_path: Path, document: Any, message: str
) -> None:
    path = _policy_file(tmp_path, document)
    with pytest.raises(ConfigError) as raised:
        _config(runner_policy=path)
    assert str(raised.value).startswith(f"context runner_policy: {path}")
    assert message in str(raised.value)


def test_a_bare_rule_acknowledges_each_wildcard_of_the_file_only(tmp_path: Path) -> None:
    document = {
        "Statement": [
            {"Action": ["s3:GetObject", "s3:List*"], "Resource": ["arn:aws:s3:::docs/*", "arn:aws:s3:::docs"]}
        ],
        "acknowledge": [{"id": "AwsSolutions-IAM5", "reason": "the docs bucket, read only"}],
    }
    policy = runner_policy(_policy_file(tmp_path, document))
    assert policy is not None
    assert acknowledged_findings(policy) == [
        ("AwsSolutions-IAM5", "the docs bucket, read only"),
        ("AwsSolutions-IAM5[Action::s3:List*]", "the docs bucket, read only"),
        ("AwsSolutions-IAM5[Resource::arn:aws:s3:::docs/*]", "the docs bucket, read only"),
    ]


def test_a_secret_is_granted_exactly() -> None:
    assert secret_grant(_ARN + "prod/openai-AbC123") == _ARN + "prod/openai-AbC123"
    assert secret_grant(_ARN + "prod/openai") == _ARN + "prod/openai-??????"


def test_a_build_with_a_bad_key_fails_before_anything_is_built() -> None:
    from app import build_app

    with pytest.raises(ConfigError, match="context runner_policy: file /x/y.json not found"):
        build_app(cdk.App(context={"runner_policy": "/x/y.json"}))


def test_the_user_folder_may_not_replace_the_runner_own_files(tmp_path: Path) -> None:
    (tmp_path / "handler.py").write_text("def handler(event, context): ...\n")
    with pytest.raises(ConfigError, match=r"context graph_source: .*handler.py"):
        runner_sources(_config(graph_source=str(tmp_path)))
    (tmp_path / "handler.py").unlink()
    (tmp_path / "wait_service").mkdir()
    (tmp_path / "wait_service" / "mine.py").write_text("")
    with pytest.raises(ConfigError, match=r"context graph_source: .*'wait_service'"):
        runner_sources(_config(graph_source=str(tmp_path)))


def test_the_asset_hash_follows_the_user_files_and_ignores_their_clutter(tmp_path: Path) -> None:
    (tmp_path / "my_agent").mkdir()
    (tmp_path / "my_agent" / "graph.py").write_text("A = 1\n")
    sources, exclude = runner_sources(_config(graph_source=str(tmp_path)))
    before = tree_hash(sources, exclude)
    for junk in (
        ".venv/x.py",
        ".git/HEAD",
        "my_agent/__pycache__/graph.cpython-311.pyc",
        "node_modules/a.js",
    ):
        (tmp_path / junk).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / junk).write_text("junk")
    assert tree_hash(sources, exclude) == before
    (tmp_path / "my_agent" / "graph.py").write_text("A = 2\n")
    assert tree_hash(sources, exclude) != before


def test_the_graph_layer_key_follows_the_requirements_file_content(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("inflection==0.5.1\n")
    first = cache_key("graph", "lambda", requirements_file=requirements)
    assert first != cache_key("graph", "lambda")
    requirements.write_text("inflection==0.5.0\n")
    assert cache_key("graph", "lambda", requirements_file=requirements) != first
    # One resolve with the runner's pins, for the Lambda platform.
    command = pip_command(["langgraph==1"], tmp_path, "lambda", requirements_file=requirements)
    assert command[-3:] == ["langgraph==1", "-r", str(requirements)]
    assert "--platform" in command


def test_the_app_names_the_key_in_one_line_without_a_traceback(tmp_path: Path) -> None:
    # What `make synth` prints for a malformed value: cdk runs app.py with the context in CDK_CONTEXT_JSON.
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "CDK_OUTDIR": str(tmp_path),
        "CDK_CONTEXT_JSON": json.dumps({"runner_environment": "{MODEL_ID: m}"}),
    }
    done = subprocess.run(
        [sys.executable, "app.py"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip() and "jsii" not in line.lower()]
    assert lines[-1].startswith("agent-wait: context runner_environment: not JSON"), done.stderr
    assert "Traceback" not in done.stderr
