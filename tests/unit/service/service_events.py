"""Helpers for the receive path's unit tests: stored sample events, handlers loaded by path, a clock.

Sample API Gateway REST proxy and SQS events live in ``tests/events/``; each helper copies one and
replaces only what a test varies (route, body, headers, identity).
"""

from __future__ import annotations

import copy
import importlib.util
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_wait import Envelope, Policy, Question, build_envelope
from agent_wait.aws import DynamoDbAnnounce

if TYPE_CHECKING:
    from types import ModuleType

    from wait_service.resources import LocalResources
    from wait_service.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
EVENTS = ROOT / "tests" / "events"
START = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


def load_handler(function: str) -> ModuleType:
    """Load ``functions/<function>/handler.py`` by path: both handlers are named ``handler``."""
    path = ROOT / "functions" / function / "handler.py"
    spec = importlib.util.spec_from_file_location(f"{function}_handler_under_test", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeClock:
    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class LambdaContext:
    function_name: str = "agent-wait-test"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:agent-wait-test"
    aws_request_id: str = "0b7f1c2e-test"
    log_group_name: str = "/aws/lambda/agent-wait-test"
    log_stream_name: str = "2026/11/30/[$LATEST]test"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


@dataclass
class Aws:
    """moto clients and the resources created on them."""

    dynamodb: Any
    sqs: Any
    sns: Any
    resources: LocalResources
    settings: Settings
    scheduler: Any = None
    published: list[Envelope] = field(default_factory=list)
    streams: Any = None
    _reader: Any = None

    def dispatch(self) -> int:
        """Hand every ledger change not yet read to the dispatcher, as the stream's mapping does.

        Returns the number of records read. What a recorded reply or start needs on the inbox is
        there afterwards (the api itself sends nothing).
        """
        if self._reader is None:
            from agent_wait_cli.local.streams import StreamReader
            from wait_service.stream.dispatcher import build_ledger_stream

            if self.streams is None:
                raise RuntimeError("the Aws fixture has no dynamodbstreams client")
            service = build_ledger_stream(self.settings, dynamodb=self.dynamodb, sqs=self.sqs, sns=self.sns)
            handler = load_handler("dispatcher")
            self._reader = StreamReader(
                self.streams,
                self.resources.ledger_stream_arn,
                lambda event, context: handler.handle(event, context, service),
                context_factory=LambdaContext,
                max_retry_attempts=0,
                sqs=self.sqs,
                dlq_url=self.resources.stream_dlq_url,
            )
        return int(self._reader.drain())

    def schedules(self) -> dict[str, dict[str, Any]]:
        """The timers' schedules by name: ``{"at": ..., "input": {...}}``."""
        group = self.resources.schedule_group
        found: dict[str, dict[str, Any]] = {}
        for summary in self.scheduler.list_schedules(GroupName=group).get("Schedules", []):
            schedule = self.scheduler.get_schedule(Name=summary["Name"], GroupName=group)
            found[summary["Name"]] = {
                "at": schedule["ScheduleExpression"],
                "input": json.loads(schedule["Target"]["Input"]),
                "after": schedule.get("ActionAfterCompletion"),
            }
        return found

    def outbox(self) -> list[dict[str, Any]]:
        """Drain the outbox: every envelope (any type) in the order it was sent."""
        bodies: list[dict[str, Any]] = []
        while got := self.sqs.receive_message(
            QueueUrl=self.resources.outbox_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
        ).get("Messages", []):
            for message in got:
                bodies.append(json.loads(message["Body"]))
                self.sqs.delete_message(
                    QueueUrl=self.resources.outbox_url, ReceiptHandle=message["ReceiptHandle"]
                )
        return bodies

    def subscribed(self) -> list[tuple[dict[str, Any], dict[str, str]]]:
        """Drain the topic's subscriber queue: (envelope, SNS message attributes) pairs."""
        found: list[tuple[dict[str, Any], dict[str, str]]] = []
        while got := self.sqs.receive_message(
            QueueUrl=self.resources.subscriber_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
        ).get("Messages", []):
            for message in got:
                attributes = {
                    name: value.get("StringValue", "")
                    for name, value in (message.get("MessageAttributes") or {}).items()
                }
                found.append((json.loads(message["Body"]), attributes))
                self.sqs.delete_message(
                    QueueUrl=self.resources.subscriber_url, ReceiptHandle=message["ReceiptHandle"]
                )
        return found

    def raise_question(
        self,
        thread_id: str = "t-1",
        question_id: str = "q-1",
        *,
        policy: Policy | None = None,
        question: Any = None,
        now: datetime = START,
    ) -> Envelope:
        """Record a question in the ledger the way the runner's fan-out does."""
        envelope = build_envelope(
            thread_id,
            Question(
                question_id=question_id,
                question=question
                if question is not None
                else {"function": "issue_refund", "args": {"customer": "c-17", "amount": 40}},
                policy=policy or Policy(kind="approval"),
            ),
            reply_url="https://api.example/questions/{question_id}/reply",
            now=now,
        )
        DynamoDbAnnounce(self.resources.ledger_table, client=self.dynamodb).deliver(envelope)
        self.published.append(envelope)
        return envelope

    def inbox_messages(self) -> list[dict[str, Any]]:
        """Every visible inbox message body (received and left in flight), once the dispatcher ran."""
        if self.streams is not None:
            self.dispatch()
        bodies: list[dict[str, Any]] = []
        while True:
            got = self.sqs.receive_message(
                QueueUrl=self.resources.inbox_url, MaxNumberOfMessages=10, AttributeNames=["All"]
            ).get("Messages", [])
            if not got:
                return bodies
            bodies += [json.loads(m["Body"]) | {"_attributes": m["Attributes"]} for m in got]


def api_event(
    template: str,
    *,
    path: str,
    resource: str,
    path_parameters: dict[str, str] | None = None,
    method: str | None = None,
    query: dict[str, str] | None = None,
    body: str | None = None,
    headers: dict[str, str | None] | None = None,
    identity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A copy of a stored API Gateway REST proxy event with its route, body and headers replaced.

    A header given as ``None`` is removed.
    """
    event = copy.deepcopy(load_event(template))
    event["path"] = path
    event["resource"] = resource
    event["requestContext"]["resourcePath"] = resource
    event["requestContext"]["path"] = "/prod" + path
    event["pathParameters"] = path_parameters
    if method:
        event["httpMethod"] = method
        event["requestContext"]["httpMethod"] = method
    event["queryStringParameters"] = query
    event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()} if query else None
    if body is not None:
        event["body"] = body
    for name, value in (headers or {}).items():
        if value is None:
            event["headers"].pop(name, None)
            event["multiValueHeaders"].pop(name, None)
        else:
            event["headers"][name] = value
            event["multiValueHeaders"][name] = [value]
    if identity is not None:
        event["requestContext"]["identity"] = identity
    return event


def reply_event(
    question_id: str,
    answer: Any = None,
    *,
    if_match: str | None = None,
    body: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """``POST /questions/{id}/reply`` from ``tests/events/reply.json``; no ``If-Match`` unless given."""
    return api_event(
        "reply.json",
        path=f"/questions/{question_id}/reply",
        resource="/questions/{question_id}/reply",
        path_parameters={"question_id": question_id},
        body=body if body is not None else json.dumps({"answer": answer}),
        headers={"If-Match": if_match} | kwargs.pop("headers", {}),
        **kwargs,
    )


def get_event(
    path: str, resource: str, path_parameters: dict[str, str] | None = None, **kw: Any
) -> dict[str, Any]:
    return api_event("get_question.json", path=path, resource=resource, path_parameters=path_parameters, **kw)


def start_event(thread_id: str, input: Any = None, *, body: str | None = None) -> dict[str, Any]:
    return api_event(
        "start_run.json",
        path=f"/threads/{thread_id}/runs",
        resource="/threads/{thread_id}/runs",
        path_parameters={"thread_id": thread_id},
        body=body if body is not None else json.dumps({"input": input}),
    )


def body_of(response: dict[str, Any]) -> Any:
    return json.loads(response["body"])


def header(response: dict[str, Any], name: str) -> str | None:
    """A response header from ``headers`` or ``multiValueHeaders`` (the REST resolver uses the latter)."""
    for key, value in (response.get("headers") or {}).items():
        if key.lower() == name.lower():
            return str(value)
    for key, values in (response.get("multiValueHeaders") or {}).items():
        if key.lower() == name.lower() and values:
            return str(values[0])
    return None
