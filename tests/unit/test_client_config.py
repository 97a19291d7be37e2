"""Every boto3 client the functions build skips botocore's client-side parameter check.

The check was about a tenth of a reply's CPU through the api; the services check each request
again (``wait_service.clients``). A client built anywhere in the functions without the shared
configuration would bring it back unnoticed: the scan below finds every place one is built.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ParamValidationError

from wait_service.clients import CLIENT_CONFIG
from wait_service.http.api import build_api
from wait_service.runs.checkpointer import runner_clients
from wait_service.settings import Settings

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"


def _client_calls(tree: ast.AST) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "client"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ]


def _configured(call: ast.Call, keyword: str = "config") -> bool:
    return any(
        k.arg == keyword and isinstance(k.value, ast.Name) and k.value.id == "CLIENT_CONFIG"
        for k in call.keywords
    )


def test_every_client_the_functions_build_has_the_shared_configuration() -> None:
    found, unconfigured = 0, []
    for path in sorted(FUNCTIONS.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for call in _client_calls(tree):
            found += 1
            if not _configured(call):
                unconfigured.append(f"{path.relative_to(FUNCTIONS)}:{call.lineno}")
        # The checkpointer's client is built by its package, with this configuration merged in.
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "DynamoDBSaver":
                found += 1
                if not _configured(node, "boto_config"):
                    unconfigured.append(f"{path.relative_to(FUNCTIONS)}:{node.lineno}")
    assert found >= 10  # the scan finds the places clients are built
    assert unconfigured == []


class _Sent(Exception):
    """The request got past botocore's checks and serializer: it would have gone out."""


def _skips_the_check(client: Any) -> bool:
    """Whether ``client`` sends a request whose parameter has the wrong type (the service would refuse it)."""

    def stop(**_: Any) -> None:
        raise _Sent

    client.meta.events.register("before-send", stop)
    calls = {
        "dynamodb": lambda: client.get_item(TableName="t", Key={"k": {"S": "v"}}, ConsistentRead="yes"),
        "sqs": lambda: client.send_message(QueueUrl="https://sqs/q", MessageBody="m", DelaySeconds="soon"),
        "sns": lambda: client.publish(TopicArn="arn:aws:sns:us-east-1:1:t", Message="m", Subject=5),
    }
    try:
        calls[client.meta.service_model.service_name]()
    except _Sent:
        return True
    except ParamValidationError:
        return False
    finally:
        client.meta.events.unregister("before-send", stop)
    raise AssertionError("the request was neither refused nor sent")


def test_a_default_client_checks_and_the_shared_configuration_does_not() -> None:
    assert not _skips_the_check(boto3.client("dynamodb", region_name="us-east-1"))
    assert _skips_the_check(boto3.client("dynamodb", region_name="us-east-1", config=CLIENT_CONFIG))


def test_the_runners_clients_and_the_checkpointers_skip_the_check() -> None:
    clients = runner_clients(
        Settings(ledger_table="ledger", checkpoint_table="checkpoints", inbox_url="https://sqs/inbox.fifo")
    )
    for client in (clients.dynamodb, clients.sns, clients.sqs):
        assert _skips_the_check(client), client.meta.service_model.service_name
    # The checkpointer's own retries are kept: the configurations are merged, not replaced.
    assert clients.dynamodb.meta.config.retries["mode"] == "adaptive"


def test_the_apis_client_skips_the_check() -> None:
    api = build_api(Settings(ledger_table="ledger"))
    assert _skips_the_check(api.ledger._client)
