"""Fixtures for the receive path's unit tests.

AWS is moto's in-process ``mock_aws`` (no server, no network); the ledger, inbox, outbox and
topic come from ``wait_service.resources`` exactly as the stack creates them. Time is a
``FakeClock``. Helpers and sample events: ``service_events.py`` and ``tests/events/``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws
from service_events import Aws, FakeClock, LambdaContext, load_handler

from wait_service.http.api import WaitApi, build_api
from wait_service.resources import create_resources
from wait_service.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def aws() -> Iterator[Aws]:
    with mock_aws():
        clients: dict[str, Any] = {
            name: boto3.client(name, region_name="us-east-1")
            for name in ("dynamodb", "sqs", "sns", "scheduler")
        }
        # botocore names a stream's account in its endpoint's host, which in-process moto does not
        # route; the plain regional endpoint is the same API.
        clients["dynamodbstreams"] = boto3.client(
            "dynamodbstreams", region_name="us-east-1", config=Config(account_id_endpoint_mode="disabled")
        )
        resources = create_resources(
            clients["dynamodb"], clients["sqs"], clients["sns"], prefix="u-", scheduler=clients["scheduler"]
        )
        settings = Settings.from_env(
            resources.env() | {"AGENT_WAIT_REPLY_URL": "https://api.example/questions/{question_id}/reply"}
        )
        yield Aws(
            clients["dynamodb"],
            clients["sqs"],
            clients["sns"],
            resources,
            settings,
            clients["scheduler"],
            streams=clients["dynamodbstreams"],
        )


@pytest.fixture
def api(aws: Aws, clock: FakeClock) -> WaitApi:
    return build_api(aws.settings, dynamodb=aws.dynamodb, sqs=aws.sqs, clock=clock)


@pytest.fixture
def context() -> LambdaContext:
    return LambdaContext()


@pytest.fixture
def call(api: WaitApi, context: LambdaContext) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Resolve an event through the api handler module, with the api fixture injected."""
    handler = load_handler("api")

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        return handler.handle(event, context, service=api)

    return invoke
