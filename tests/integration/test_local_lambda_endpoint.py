"""The local stack's Lambda endpoint, driven by boto3's own ``lambda`` client over loopback."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError

from agent_wait_cli.dlq import DlqError, LambdaInvoker
from agent_wait_cli.local.lambda_endpoint import LambdaEndpoint

if TYPE_CHECKING:
    from collections.abc import Iterator


class Failing(Exception):
    pass


def echo(event: dict[str, Any], context: Any) -> Any:
    return {"got": event, "context": context}


def crash(event: dict[str, Any], context: Any) -> Any:
    raise Failing("the inbox is down\nsecond line")


@pytest.fixture
def endpoint() -> Iterator[LambdaEndpoint]:
    served = LambdaEndpoint({"stack-echo": (echo, lambda: "ctx"), "stack-crash": (crash, lambda: None)})
    served.start()
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture
def client(endpoint: LambdaEndpoint) -> Any:
    return boto3.client(
        "lambda",
        endpoint_url=endpoint.url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def test_a_request_response_invoke_returns_the_functions_result(client: Any) -> None:
    response = client.invoke(FunctionName="stack-echo", Payload=json.dumps({"Records": [1, "é"]}).encode())

    assert response["StatusCode"] == 200 and "FunctionError" not in response
    assert json.loads(response["Payload"].read()) == {"got": {"Records": [1, "é"]}, "context": "ctx"}


def test_a_function_named_by_its_arn_is_found(client: Any) -> None:
    arn = "arn:aws:lambda:us-east-1:000000000000:function:stack-echo"
    response = client.invoke(FunctionName=arn, Payload=b"{}")
    assert json.loads(response["Payload"].read())["got"] == {}


def test_a_function_that_raises_is_a_function_error_as_lambda_reports_it(client: Any) -> None:
    response = client.invoke(FunctionName="stack-crash", Payload=b"{}")

    assert (response["StatusCode"], response["FunctionError"]) == (200, "Unhandled")
    error = json.loads(response["Payload"].read())
    assert (error["errorType"], error["errorMessage"]) == ("Failing", "the inbox is down\nsecond line")
    # and the redrive's invoker turns it into one line
    with pytest.raises(DlqError, match=r"^stack-crash failed \(Unhandled\): Failing: the inbox is down$"):
        LambdaInvoker(client).invoke_batch("stack-crash", {"Records": []})


def test_an_unknown_function_is_resource_not_found_naming_what_runs(client: Any) -> None:
    with pytest.raises(ClientError) as raised:
        client.invoke(FunctionName="stack-runner", Payload=b"{}")
    error = raised.value.response["Error"]
    assert error["Code"] == "ResourceNotFoundException"
    assert "stack-runner" in error["Message"] and "stack-crash, stack-echo" in error["Message"]


@pytest.mark.parametrize("kind", ["Event", "DryRun"])
def test_other_invocation_types_are_refused_not_played(client: Any, kind: str) -> None:
    with pytest.raises(ClientError) as raised:
        client.invoke(FunctionName="stack-echo", InvocationType=kind, Payload=b"{}")
    assert raised.value.response["Error"]["Code"] == "InvalidParameterValueException"


def test_a_body_that_is_not_json_is_refused(client: Any) -> None:
    with pytest.raises(ClientError) as raised:
        client.invoke(FunctionName="stack-echo", Payload=b"{not json")
    assert raised.value.response["Error"]["Code"] == "InvalidRequestContentException"


def test_invocations_from_many_callers_each_get_their_own_answer(client: Any) -> None:
    answers: dict[int, Any] = {}

    def call(number: int) -> None:
        response = client.invoke(FunctionName="stack-echo", Payload=json.dumps({"n": number}).encode())
        answers[number] = json.loads(response["Payload"].read())["got"]["n"]

    threads = [threading.Thread(target=call, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == {n: n for n in range(8)}
