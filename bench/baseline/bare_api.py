"""The bare baseline of the api: a validated Powertools resolver with the api's routes and models.

Same routes, methods, parameter annotations and pydantic models as ``wait_service.http.api``, and the same
two boto3 clients, but none of our code: no ledger, services, error mapping or observability. Its
reply route makes the same AWS calls as ours (get the question, record the answer: the resume follows
from the ledger's stream, outside the request), so the benchmark's ratios show what our code adds on
top of the framework.
``bench.__main__`` checks that its routes still match the api's.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query
from pydantic import BaseModel, ConfigDict, Field, JsonValue

JSON = "application/json"
QuestionStatus = Literal[
    "pending",
    "raised",
    "delivered",
    "answered",
    "resumed",
    "expired",
    "escalated",
    "revoked",
    "resume_failed",
]


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: JsonValue = Field(default_factory=dict)


class RunAccepted(BaseModel):
    thread_id: str
    status: Literal["queued"] = "queued"


class ThreadView(BaseModel):
    thread_id: str
    status: str
    pending: list[str] = Field(default_factory=list)
    output: JsonValue = None
    error: str | None = None
    updated_at: str | None = None
    deferred_runs: int = 0


class LifecycleStage(BaseModel):
    stage: str
    at: str
    actor: str | None = None


class QuestionView(BaseModel):
    question_id: str
    thread_id: str
    status: str
    digest: str
    question: JsonValue = None
    policy: dict[str, JsonValue] = Field(default_factory=dict)
    source: dict[str, JsonValue] | None = None
    created_at: str | None = None
    expires_at: str | None = None
    updated_at: str | None = None
    lifecycle: list[LifecycleStage] = Field(default_factory=list)
    answer: JsonValue = None
    answered_by: str | None = None
    answered_at: str | None = None
    reason: str | None = None


class QuestionPage(BaseModel):
    items: list[QuestionView]
    next: str | None = None


class ReplyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: JsonValue
    reason: str | None = Field(default=None, max_length=4096)


class ReplyAccepted(BaseModel):
    question_id: str
    status: Literal["answered"] = "answered"


class RevokeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=4096)


class DelegateRequest(BaseModel):
    to: str = Field(min_length=1, max_length=2048)
    reason: str = Field(min_length=1, max_length=1000)


class ExtendRequest(BaseModel):
    by_seconds: int | None = Field(default=None, ge=1)
    until: str | None = None
    reason: str = Field(min_length=1, max_length=1000)


class ErrorBody(BaseModel):
    error: str
    message: str
    question_id: str | None = None
    thread_id: str | None = None


def build_app(
    dynamodb: Any, sqs: Any, *, table: str = "ledger", queue_url: str = "inbox"
) -> APIGatewayRestResolver:
    """The bare resolver over ``dynamodb`` and ``sqs``."""
    app = APIGatewayRestResolver(enable_validation=True)
    errors: dict[int, Any] = {
        code: {"description": "error", "content": {JSON: {"model": ErrorBody}}} for code in (404, 409)
    }

    @app.post("/threads/<thread_id>/runs", responses={202: {"description": "queued"}, **errors})
    def start_run(
        thread_id: Annotated[str, Path(min_length=1, max_length=100)],
        request: Annotated[RunRequest, Body()],
        idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
    ) -> Response[RunAccepted]:
        sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps({"thread_id": thread_id}))
        return Response(status_code=202, content_type=JSON, body=RunAccepted(thread_id=thread_id))

    @app.get("/threads/<thread_id>", responses=errors)
    def get_thread(thread_id: Annotated[str, Path(min_length=1)]) -> ThreadView:
        item = dynamodb.get_item(TableName=table, Key={"dedupe_key": {"S": f"thread#{thread_id}"}})
        return ThreadView(
            thread_id=thread_id, status=str(item.get("Item", {}).get("run_status", {}).get("S"))
        )

    @app.get("/questions")
    def list_questions(
        status: Annotated[QuestionStatus | None, Query()] = None,
        thread_id: Annotated[str | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=100)] = 50,
        next_token: Annotated[str | None, Query(alias="next")] = None,
    ) -> QuestionPage:
        dynamodb.query(TableName=table, Limit=limit)
        return QuestionPage(items=[])

    @app.get("/questions/<question_id>", responses=errors)
    def get_question(question_id: Annotated[str, Path(min_length=1)]) -> Response[QuestionView]:
        item = dynamodb.get_item(TableName=table, Key={"dedupe_key": {"S": f"question#{question_id}"}})
        view = QuestionView(question_id=question_id, thread_id="", status="", digest=str(len(item)))
        return Response(status_code=200, content_type=JSON, body=view)

    @app.post("/questions/<question_id>/reply", responses={202: {"description": "recorded"}, **errors})
    def reply(
        question_id: Annotated[str, Path(min_length=1)],
        request: Annotated[ReplyRequest, Body()],
        if_match: Annotated[str | None, Header(alias="If-Match")] = None,
    ) -> Response[ReplyAccepted]:
        key = {"dedupe_key": {"S": f"question#{question_id}"}}
        question = dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
        dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET #s = :s, answer = :a",
            ConditionExpression="#s IN (:r, :d)",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={
                ":s": {"S": "answered"},
                ":a": {"S": json.dumps(request.answer)},
                ":r": {"S": "raised"},
                ":d": {"S": "delivered"},
            },
        )
        assert question
        return Response(status_code=202, content_type=JSON, body=ReplyAccepted(question_id=question_id))

    @app.post("/questions/<question_id>/revoke", responses={200: {"description": "revoked"}, **errors})
    def revoke(
        question_id: Annotated[str, Path(min_length=1)],
        request: Annotated[RevokeRequest, Body()],
    ) -> Response[QuestionView]:
        key = {"dedupe_key": {"S": f"question#{question_id}"}}
        dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET #s = :s",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":s": {"S": "revoked"}},
        )
        view = QuestionView(question_id=question_id, thread_id="", status="revoked", digest="")
        return Response(status_code=200, content_type=JSON, body=view)

    @app.post("/questions/<question_id>/delegate", responses={200: {"description": "delegated"}, **errors})
    def delegate(
        question_id: Annotated[str, Path(min_length=1)],
        request: Annotated[DelegateRequest, Body()],
    ) -> Response[QuestionView]:
        dynamodb.update_item(
            TableName=table,
            Key={"dedupe_key": {"S": f"question#{question_id}"}},
            UpdateExpression="ADD delegated_to :to",
            ExpressionAttributeValues={":to": {"SS": [request.to]}},
        )
        view = QuestionView(question_id=question_id, thread_id="", status="", digest="")
        return Response(status_code=200, content_type=JSON, body=view)

    @app.post("/questions/<question_id>/extend", responses={200: {"description": "extended"}, **errors})
    def extend(
        question_id: Annotated[str, Path(min_length=1)],
        request: Annotated[ExtendRequest, Body()],
    ) -> Response[QuestionView]:
        dynamodb.update_item(
            TableName=table,
            Key={"dedupe_key": {"S": f"question#{question_id}"}},
            UpdateExpression="SET expires_at = :e",
            ExpressionAttributeValues={":e": {"S": request.until or str(request.by_seconds)}},
        )
        view = QuestionView(question_id=question_id, thread_id="", status="", digest="")
        return Response(status_code=200, content_type=JSON, body=view)

    @app.get("/stats")
    def stats(
        since: Annotated[str | None, Query()] = None,
        until: Annotated[str | None, Query()] = None,
        function: Annotated[str | None, Query()] = None,
        responder: Annotated[str | None, Query()] = None,
    ) -> dict[str, Any]:
        dynamodb.query(TableName=table, Limit=100)
        return {"since": since, "until": until}

    @app.get("/inbox", include_in_schema=False, enable_validation=False)
    def inbox() -> Response[str]:
        return Response(status_code=200, content_type="text/html", body="<!doctype html>")

    @app.get("/inbox/config", include_in_schema=False, enable_validation=False)
    def inbox_config() -> Response[str]:
        return Response(status_code=200, content_type=JSON, body="{}")

    @app.get("/openapi.json", include_in_schema=False, enable_validation=False)
    def openapi() -> Response[str]:
        return Response(status_code=200, content_type=JSON, body=app.get_openapi_json_schema())

    return app


def routes(app: APIGatewayRestResolver) -> set[tuple[str, str]]:
    """(method, path) of every route of a Powertools resolver."""
    found: set[tuple[str, str]] = set()
    for route in app._static_routes + app._dynamic_routes:  # noqa: SLF001 - Powertools keeps no public list
        found.add((route.method, route.path))
    return found
