"""The runner's secrets: read with Powertools Parameters into the environment before the graph is built."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from service_events import load_handler

from wait_service.runs.secrets import SecretUnavailableError, export_secrets, secret_getter
from wait_service.settings import Settings

ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:"
API_KEY, DB = ARN + "team/api-AbC123", ARN + "team/db"


def _client() -> Any:
    return boto3.client(
        "secretsmanager", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x"
    )


def test_each_secret_is_read_once_through_powertools_and_set_in_the_environment() -> None:
    client = _client()
    with Stubber(client) as stub:
        stub.add_response("get_secret_value", {"SecretString": "sk-123"}, {"SecretId": API_KEY})
        stub.add_response("get_secret_value", {"SecretBinary": b"hunter2"}, {"SecretId": DB})
        environ = {"UNRELATED": "kept"}
        get = secret_getter(client=client)

        names = export_secrets({"DB_PASSWORD": DB, "API_KEY": API_KEY}, environ, get=get)

        assert names == ["API_KEY", "DB_PASSWORD"]
        assert environ == {"UNRELATED": "kept", "API_KEY": "sk-123", "DB_PASSWORD": "hunter2"}
        # Cached: a second read within max_age makes no call (the stub has no response left).
        assert get(API_KEY) == "sk-123"
        stub.assert_no_pending_responses()


def test_a_secret_that_cannot_be_read_fails_naming_the_variable_and_arn_never_a_value() -> None:
    client = _client()
    with Stubber(client) as stub:
        stub.add_response("get_secret_value", {"SecretString": "sk-123"}, {"SecretId": API_KEY})
        stub.add_client_error("get_secret_value", "AccessDeniedException", "not allowed", 400)
        environ: dict[str, str] = {}
        with pytest.raises(SecretUnavailableError) as raised:
            export_secrets({"API_KEY": API_KEY, "DB_PASSWORD": DB}, environ, get=secret_getter(client=client))

    message = str(raised.value)
    assert "DB_PASSWORD" in message and DB in message and "AccessDenied" in message
    assert "sk-123" not in message


def test_no_secrets_means_no_call_and_no_change() -> None:
    environ = {"A": "1"}
    assert export_secrets({}, environ, get=lambda arn: pytest.fail("no read expected")) == []
    assert environ == {"A": "1"}


def test_no_secrets_leaves_powertools_parameters_unloaded() -> None:
    """Without secrets the runner's init does not load Powertools Parameters (nor its clients)."""
    code = (
        "import sys; from wait_service.runs.secrets import export_secrets; "
        "assert export_secrets({}, {}) == []; "
        "sys.exit('aws_lambda_powertools.utilities.parameters' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_runner_gets_names_and_arns_from_its_settings() -> None:
    mapping = {"API_KEY": API_KEY}
    settings = Settings.from_env({"AGENT_WAIT_RUNNER_SECRETS": json.dumps(mapping)})
    assert settings.runner_secrets == mapping
    assert Settings.from_env({}).runner_secrets == {}


def test_the_runner_handler_exports_secrets_before_it_builds_the_graph(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = load_handler("runner")
    order: list[str] = []
    monkeypatch.setenv("AGENT_WAIT_RUNNER_SECRETS", json.dumps({"API_KEY": API_KEY}))
    monkeypatch.setattr(
        runner, "export_secrets", lambda secrets, environ: order.append(f"secrets {sorted(secrets)}")
    )
    monkeypatch.setattr(runner, "runner_clients", lambda settings: _Clients())

    def build_runner(settings: Settings, **clients: Any) -> str:
        order.append("graph")
        return "runner"

    monkeypatch.setattr(runner, "build_runner", build_runner)

    assert runner.build_service() == "runner"
    assert order == ["secrets ['API_KEY']", "graph"]


class _Clients:
    def as_kwargs(self) -> dict[str, Any]:
        return {}
