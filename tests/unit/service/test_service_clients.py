"""The runner's AWS clients: one session, one client per service, the checkpointer sharing DynamoDB's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3

from wait_service.runs.checkpointer import runner_clients
from wait_service.runs.inbox import StartMessage
from wait_service.runs.runner import build_runner

if TYPE_CHECKING:
    from service_events import Aws


def test_ledger_announcers_and_checkpointer_share_one_dynamodb_client(aws: Aws) -> None:
    session = boto3.Session(region_name="us-east-1")
    clients = runner_clients(aws.settings, session=session)
    runner = build_runner(aws.settings, **clients.as_kwargs())

    assert clients.dynamodb is clients.checkpointer.client  # type: ignore[attr-defined]
    assert runner.ledger._client is clients.dynamodb
    sinks = {type(child).__name__: child for child in runner.announce.children}  # type: ignore[attr-defined]
    assert sinks["DynamoDbAnnounce"].client is clients.dynamodb
    assert sinks["SqsAnnounce"].client is clients.sqs is runner.inbox._client  # type: ignore[union-attr]
    assert sinks["SnsAnnounce"].client is clients.sns


def test_the_runner_uses_the_checkpoint_durability_of_its_settings(aws: Aws) -> None:
    seen: list[Any] = []

    class Graph:
        def invoke(self, input: Any, config: Any, *, durability: Any = None) -> Any:
            seen.append(durability)
            return {"done": True}

        def get_state(self, config: Any) -> Any:
            return None

    for durability in ("exit", "sync"):
        settings = aws.settings.model_copy(update={"durability": durability})
        runner = build_runner(settings, dynamodb=aws.dynamodb, sns=aws.sns, sqs=aws.sqs, checkpointer=None)
        runner.graph = Graph()
        runner.run(StartMessage(thread_id=f"t-{durability}", input={}))
    assert seen == ["exit", "sync"]
