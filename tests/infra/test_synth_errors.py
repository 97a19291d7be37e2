"""A mistake at synth ends with one line naming the context key and the fix; a traceback only on request.

Every key of the configuration table (README.md or docs/) and of ``infra.config.CONTEXT_KEYS`` (one field of
``StackConfig`` each) gets a bad value here; the app's entry (``app.main``) runs in this process with
it, and must stop before anything is bundled with exactly one line on stderr.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
import pytest

from app import main
from infra.config import CONTEXT_KEYS
from infra.constants import REPO_ROOT
from infra.errors import DEBUG_VARIABLE, ConfigError, one_line, run
from infra.requirements import build_layer

if TYPE_CHECKING:
    from pathlib import Path

ISSUER = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Abc123"
# A bad value per key, with what it needs beside it to be checked (a key that matters only with
# another one). A key added without an entry here gets ``FALLBACK``.
BAD: dict[str, dict[str, Any]] = {
    "stack_name": {"stack_name": "9lives"},
    "graph": {"graph": "my_agent.graph"},
    "framework": {"framework": "crewai"},
    "agent": {"agent": "my_agent.agent"},
    "auth": {"auth": "saml"},
    "default_ttl": {"default_ttl": "-5"},
    "checkpointer": {"checkpointer": "postgres"},
    "checkpoint_bucket": {"checkpoint_bucket": "maybe"},
    "runner_max_concurrency": {"runner_max_concurrency": "1"},
    "dispatcher_parallelization": {"dispatcher_parallelization": "11"},
    "listing_shards": {"listing_shards": "65"},
    "cognito_user_pool_arn": {"auth": "jwt", "cognito_user_pool_arn": "my-pool"},
    "jwt_issuer": {"auth": "jwt", "jwt_issuer": "https://login.example.com"},
    "jwt_audience": {"auth": "jwt", "jwt_issuer": ISSUER, "jwt_audience": "read answers"},
    "alarm_topic_arn": {"alarm_topic_arn": "on-call"},
    "signing_keys": {"signing_keys": '{"k1": "not-an-arn"}'},
    "slack_channel": {"slack_channel": "#ops"},
    "slack_bot_token_secret": {"slack_channel": "#ops", "slack_bot_token_secret": "xoxb-token"},
    "slack_signing_secret": {"slack_signing_secret": "the-secret"},
    "inbox_client_id": {"inbox_client_id": "abc123"},
    "inbox_domain": {"inbox_domain": "login.example.com"},
    "graph_source": {"graph_source": "/no/such/agent"},
    "graph_requirements": {"graph_requirements": "/no/such/requirements.txt"},
    "runner_policy": {"runner_policy": "/no/such/policy.json"},
    "runner_environment": {"runner_environment": "{MODEL_ID: m}"},
    "runner_secrets": {"runner_secrets": '{"OPENAI_API_KEY": "sk-plain-value"}'},
    "runner_memory": {"runner_memory": "64"},
    "runner_timeout": {"runner_timeout": "1000"},
    "api_gateway_account_role": {"api_gateway_account_role": "sometimes"},
    "deletion_protection": {"deletion_protection": "maybe"},
    "alarm_email": {"alarm_email": "nobody"},
    "tags": {"tags": "team=payments"},
    "waf_acl_arn": {"waf_acl_arn": "my-acl"},
    "kms_key_arn": {"kms_key_arn": "alias/my-key"},
    "subscriber_accounts": {"subscriber_accounts": "12345"},
    "allowed_accounts": {"allowed_accounts": "12345"},
}
TABLE_HEADER = "| key | default | meaning |"
# What no setting accepts: not a number, not a boolean, not JSON, not an ARN, not a path.
FALLBACK = "\u0000 not a valid value"
# Each line says what to do: what is expected, what goes with what, or the fix itself.
FIX = re.compile(r"expected|fix: |set both or neither|needs |must |choose |quote it")


def readme_keys() -> list[str]:
    """The keys of the configuration table (``| key | default | meaning |``) of the README or docs/.

    A row may name two keys set together.
    """
    for doc in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]:
        text = doc.read_text()
        if TABLE_HEADER not in text:
            continue
        keys: list[str] = []
        for line in text.split(TABLE_HEADER, 1)[1].splitlines()[2:]:
            if not line.startswith("|"):
                break
            keys += re.findall(r"`([a-z][a-z0-9_]*)`", line.split("|")[1])
        return keys
    raise AssertionError(f"no configuration table ({TABLE_HEADER}) in README.md or docs/")


DOCUMENTED = sorted(set(readme_keys()) | set(CONTEXT_KEYS))


def test_the_readme_documents_every_key_the_stack_reads() -> None:
    documented = set(readme_keys())
    assert set(CONTEXT_KEYS) - documented == set(), "add these keys to the README's configuration table"
    assert documented - set(CONTEXT_KEYS) == set(), "the README documents keys StackConfig does not read"


def _synth_lines(capsys: pytest.CaptureFixture[str], tmp_path: Path, context: dict[str, Any]) -> list[str]:
    status = main(cdk.App(outdir=str(tmp_path / "cdk.out"), context=context))
    err = capsys.readouterr().err
    assert status == 1, err
    assert "Traceback" not in err
    # Nothing was synthesized or bundled: the mistake stopped the app before.
    assert list((tmp_path / "cdk.out").glob("*")) == []
    return err.splitlines()


@pytest.mark.parametrize("key", DOCUMENTED)
def test_a_bad_value_ends_the_synth_with_one_line_naming_the_key(
    key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    lines = _synth_lines(capsys, tmp_path, BAD.get(key, {key: FALLBACK}))
    assert len(lines) == 1, lines
    assert lines[0].startswith("agent-wait: context "), lines
    assert re.search(rf"\b{key}\b", lines[0]), lines
    assert FIX.search(lines[0]), lines


def test_a_misspelt_key_is_refused_with_the_key_it_resembles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ignored silently, `-c graph_sorce=...` would deploy the sample instead of your agent.
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    lines = _synth_lines(capsys, tmp_path, {"graph_sorce": str(tmp_path), "@aws-cdk/core:x": True})
    assert lines == [
        "agent-wait: context graph_sorce: no such key; fix: did you mean graph_source? "
        "(remove it, or correct its name)"
    ]


def test_a_graph_module_not_found_is_one_line_naming_graph(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    lines = _synth_lines(capsys, tmp_path, {"graph": "no_such_agent.graph:build_graph"})
    assert lines == [
        "agent-wait: context graph='no_such_agent.graph:build_graph': no module named 'no_such_agent' in "
        "the project (examples/, installed packages); fix: set graph_source to the folder that holds "
        "no_such_agent/, or correct graph"
    ]


def test_a_graph_attribute_not_found_is_one_line_naming_graph(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    lines = _synth_lines(capsys, tmp_path, {"graph": "examples.refund_agent:no_such_factory"})
    assert len(lines) == 1, lines
    assert lines[0].startswith("agent-wait: context graph='examples.refund_agent:no_such_factory': ")
    assert "has no attribute 'no_such_factory'; fix: " in lines[0]


def test_an_agent_of_another_framework_than_named_is_one_line_naming_framework(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    context = {"framework": "pydantic_ai", "agent": "examples.refund_agent:build_graph"}
    lines = _synth_lines(capsys, tmp_path, context)
    assert lines == [
        "agent-wait: context framework=pydantic_ai: agent='examples.refund_agent:build_graph' is not a "
        "pydantic_ai agent; fix: set agent to the pydantic_ai object (module:attribute), or framework to "
        "the one it is written in (or unset it to detect it)"
    ]


def test_an_agent_module_not_found_is_one_line_naming_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    lines = _synth_lines(capsys, tmp_path, {"framework": "pydantic_ai", "agent": "no_such_agent:agent"})
    assert lines == [
        "agent-wait: context agent='no_such_agent:agent': no module named 'no_such_agent' in the project "
        "(examples/, installed packages); fix: set graph_source to the folder that holds no_such_agent/, "
        "or correct agent"
    ]


def _agent(folder: Path, body: str) -> Path:
    (folder / "my_agent").mkdir(parents=True)
    (folder / "my_agent" / "__init__.py").write_text("")
    (folder / "my_agent" / "graph.py").write_text(body)
    return folder


def test_an_agent_importing_a_package_not_installed_names_graph_requirements(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    source = _agent(tmp_path / "agent", "import not_installed_package_xyz\n")
    context = {"graph": "my_agent.graph:build_graph", "graph_source": str(source)}
    lines = _synth_lines(capsys, tmp_path, context)
    assert len(lines) == 1, lines
    prefix = "agent-wait: context graph_requirements: the graph 'my_agent.graph:build_graph'"
    assert lines[0].startswith(prefix)
    assert "imports 'not_installed_package_xyz', which is not installed; fix: " in lines[0]


def test_a_graph_source_without_the_graph_module_names_graph(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    source = _agent(tmp_path / "agent", "def build_graph(checkpointer=None): ...\n")
    context = {"graph": "other_agent.graph:build_graph", "graph_source": str(source)}
    lines = _synth_lines(capsys, tmp_path, context)
    assert len(lines) == 1, lines
    assert f"no module named 'other_agent' in graph_source {source}" in lines[0]
    assert "fix: set graph_source to the folder that holds other_agent/" in lines[0]


def test_requirements_pip_cannot_install_end_with_pips_reason_on_one_line(tmp_path: Path) -> None:
    # A line pip cannot parse fails before any download (the first thing a typo in the file does).
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("requests==2.32.3\nno-such-package-agent-wait = 1.0\n")
    with pytest.raises(ConfigError) as raised:
        build_layer("graph", "host", requirements_file=requirements, cache_dir=tmp_path / "cache")
    line = one_line(raised.value)
    assert raised.value.key == "graph_requirements"
    assert "\n" not in line
    assert line.startswith(f"agent-wait: context graph_requirements: pip could not install {requirements}")
    assert "Invalid requirement: 'no-such-package-agent-wait = 1.0'" in line and "; fix: " in line
    # pip's whole output is kept for AGENT_WAIT_DEBUG=1.
    assert "no-such-package-agent-wait" in raised.value.detail


def test_an_unexpected_error_is_one_line_saying_how_to_see_the_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)

    def fails() -> None:
        json.loads("{not json")

    assert run(fails) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("agent-wait: synth failed: JSONDecodeError: "), lines
    assert lines[0].endswith(f"(set {DEBUG_VARIABLE}=1 for the traceback)")
    monkeypatch.setenv(DEBUG_VARIABLE, "1")
    assert run(fails) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "in fails" in err


def _app_py(tmp_path: Path, context: dict[str, Any], **env: str) -> subprocess.CompletedProcess[str]:
    """``python app.py`` as ``cdk synth`` runs it (context in CDK_CONTEXT_JSON)."""
    environment = {k: v for k, v in os.environ.items() if k != DEBUG_VARIABLE}
    environment |= {
        "CDK_OUTDIR": str(tmp_path / "cdk.out"),
        "CDK_CONTEXT_JSON": json.dumps(context),
        "JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION": "1",
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
        **env,
    }
    command = [sys.executable, "app.py"]
    return subprocess.run(
        command, cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


def _ours(stderr: str) -> list[str]:
    """stderr without jsii's Node end-of-life banner (a box of ``!!`` no variable silences)."""
    return [line for line in stderr.splitlines() if "!!" not in line]


def test_app_py_prints_one_line_and_with_debug_the_traceback(tmp_path: Path) -> None:
    context = {"graph_source": "/no/such/agent"}
    done = _app_py(tmp_path, context)
    assert done.returncode == 1
    assert _ours(done.stderr) == [
        "agent-wait: context graph_source: folder /no/such/agent not found; fix: set graph_source to an "
        f"existing folder, absolute or relative to {REPO_ROOT}"
    ]
    debug = _app_py(tmp_path, context, **{DEBUG_VARIABLE: "1"})
    assert debug.returncode == 1
    assert "Traceback (most recent call last):" in debug.stderr
    assert "infra.errors.ConfigError: context graph_source: folder /no/such/agent not found" in debug.stderr
    assert _ours(debug.stderr)[-1] == _ours(done.stderr)[0]


@pytest.mark.skipif(
    shutil.which("make") is None or not (REPO_ROOT / "node_modules" / ".bin" / "cdk").exists(),
    reason="make synth needs make and the aws-cdk CLI (make setup)",
)
def test_make_synth_shows_the_one_line_last_and_fails(tmp_path: Path) -> None:
    # `make synth` filters cdk's output through grep; the line must get through and the status stay.
    environment = {k: v for k, v in os.environ.items() if k != DEBUG_VARIABLE}
    done = subprocess.run(
        ["make", "--no-print-directory", "synth", "CDK_ARGS=-c runner_memory=lots"],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    # make's own "*** ... Error" line (``make[1]:`` when the suite itself runs under make) follows ours.
    make_error = re.compile(r"make(\[\d+\])?: \*\*\*")
    output = [line for line in (done.stdout + done.stderr).splitlines() if not make_error.match(line)]
    ours = "agent-wait: context runner_memory='lots': expected a whole number of MB from 128 to 10240"
    assert output[-1] == ours, output
    assert [line for line in output if line.startswith("agent-wait")] == [ours]
    assert "Traceback" not in done.stdout + done.stderr
