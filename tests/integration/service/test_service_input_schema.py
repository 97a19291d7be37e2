"""Run input checked against the graph's input schema, shipped with the api (no LangGraph there)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from service_events import ROOT, body_of, get_event, load_handler, start_event

from wait_service.http.api import build_api
from wait_service.runs.input_schema import (
    INPUT_SCHEMA_FILE,
    check_input,
    generate_input_schema,
    write_input_schema,
)

if TYPE_CHECKING:
    from pathlib import Path

    from service_events import Aws, FakeClock, LambdaContext

    from wait_service.http.api import WaitApi

GRAPH = "examples.refund_agent:build_graph"


@pytest.fixture(scope="module")
def refund_schema() -> dict[str, Any]:
    schema = generate_input_schema(GRAPH)
    assert schema is not None
    return schema


@pytest.fixture
def checked_api(aws: Aws, clock: FakeClock, tmp_path: Path, refund_schema: dict[str, Any]) -> WaitApi:
    path = tmp_path / INPUT_SCHEMA_FILE
    path.write_text(json.dumps(refund_schema))
    settings = aws.settings.model_copy(update={"input_schema": str(path)})
    return build_api(settings, dynamodb=aws.dynamodb, sqs=aws.sqs, clock=clock)


def call(api: WaitApi, context: LambdaContext, event: dict[str, Any]) -> dict[str, Any]:
    return load_handler("api").handle(event, context, service=api)


def test_the_sample_agent_declares_customer_and_a_positive_amount(refund_schema: dict[str, Any]) -> None:
    assert refund_schema["required"] == ["customer", "amount"]
    assert refund_schema["properties"]["amount"]["exclusiveMinimum"] == 0


@pytest.mark.parametrize(
    ("input", "field"),
    [
        ({}, "input.customer"),
        ({"foo": 1}, "input.customer"),
        ({"customer": "c-17"}, "input.amount"),
        ({"customer": "c-17", "amount": 0}, "input.amount"),
        ({"customer": "c-17", "amount": -5}, "input.amount"),
        ({"customer": "c-17", "amount": "40"}, "input.amount"),
        ({"customer": "", "amount": 40}, "input.customer"),
        ("refund please", "input"),
    ],
)
def test_input_the_graph_cannot_use_is_422_naming_the_field_and_nothing_is_queued(
    aws: Aws, checked_api: WaitApi, context: LambdaContext, input: Any, field: str
) -> None:
    response = call(checked_api, context, start_event("t-7", input))

    assert response["statusCode"] == 422, response["body"]
    body = body_of(response)
    assert (body["error"], body["field"]) == ("invalid_input", field)
    assert aws.inbox_messages() == []


def test_a_start_without_input_is_422_not_a_failed_run(
    aws: Aws, checked_api: WaitApi, context: LambdaContext
) -> None:
    response = call(checked_api, context, start_event("t-7", body="{}"))

    assert response["statusCode"] == 422
    assert body_of(response)["field"] == "input.customer"


def test_input_that_fits_is_queued(aws: Aws, checked_api: WaitApi, context: LambdaContext) -> None:
    response = call(checked_api, context, start_event("t-7", {"customer": "c-17", "amount": 40}))

    assert response["statusCode"] == 202
    assert len(aws.inbox_messages()) == 1


def test_numbers_are_refused_first_with_400(checked_api: WaitApi, context: LambdaContext) -> None:
    response = call(
        checked_api, context, start_event("t-7", body='{"input": {"customer": "c", "amount": NaN}}')
    )

    assert response["statusCode"] == 400


def test_the_document_describes_the_graph_input(checked_api: WaitApi, context: LambdaContext) -> None:
    spec = body_of(call(checked_api, context, get_event("/openapi.json", "/openapi.json")))

    run_input = spec["components"]["schemas"]["RunRequest"]["properties"]["input"]
    assert {"$ref": "#/components/schemas/GraphInput"} in run_input["allOf"]
    assert spec["components"]["schemas"]["GraphInput"]["required"] == ["customer", "amount"]


def test_without_a_schema_any_input_is_taken() -> None:
    check_input({"anything": [1, 2]}, None)


def test_defs_of_the_graph_schema_become_components(aws: Aws, clock: FakeClock, tmp_path: Path) -> None:
    nested = {
        "type": "object",
        "properties": {"item": {"$ref": "#/$defs/Item"}},
        "required": ["item"],
        "$defs": {"Item": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    }
    path = tmp_path / INPUT_SCHEMA_FILE
    path.write_text(json.dumps(nested))
    api = build_api(
        aws.settings.model_copy(update={"input_schema": str(path)}), dynamodb=aws.dynamodb, sqs=aws.sqs
    )

    schemas = json.loads(api.openapi_json())["components"]["schemas"]

    assert schemas["GraphInput"]["properties"]["item"] == {"$ref": "#/components/schemas/GraphInput_Item"}
    assert "GraphInput_Item" in schemas


def test_the_generator_runs_as_a_module_and_rewrites_only_on_change(tmp_path: Path) -> None:
    out = tmp_path / "schema.json"
    subprocess.run(
        [sys.executable, "-m", "wait_service.runs.input_schema", GRAPH, str(out)],
        check=True,
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT}:{ROOT / 'functions'}", "PATH": "/usr/bin:/bin"},
    )
    first = out.stat().st_mtime_ns

    write_input_schema(GRAPH, out)

    assert json.loads(out.read_text())["title"] == "RefundInput"
    assert out.stat().st_mtime_ns == first
