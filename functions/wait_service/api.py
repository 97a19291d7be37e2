"""The HTTP api: a Powertools REST resolver over the ledger, the reply service and the inbox.

It validates, records and enqueues; it never runs a graph and never imports LangGraph, so its
cold start stays small (``tests/unit/service/test_api_imports.py`` holds it to that).

Routes (issue 3): ``POST /threads/{thread_id}/runs``, ``GET /threads/{thread_id}``,
``GET /questions``, ``GET /questions/{question_id}``, ``POST /questions/{question_id}/reply``,
``GET /openapi.json``.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Annotated, Any, Literal

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agent_wait.errors import PayloadTooLargeError, ResponderNotAllowedError
from wait_service import errors_http
from wait_service.inbox import Inbox
from wait_service.ledger import Clock, Ledger, QuestionRecord, RunStatus, ThreadRecord, utcnow
from wait_service.limits import (
    DYNAMODB_ITEM_BYTES,
    MAX_ANSWER_BYTES,
    MAX_BODY_BYTES,
    answer_bytes,
    check_answer_size,
    check_reply_fits,
)
from wait_service.replies import ANONYMOUS, ReplyService, etag_for
from wait_service.runs import RunService

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

    from wait_service.settings import Settings

JSON = "application/json"
# An answer this large or less fits beside any question item the runner can write (the item's other
# attributes stay far below the rest of DynamoDB's 400 KB), so only a larger one costs a read of
# its question before the reply service runs.
ANSWER_FITS_ANY_QUESTION_BYTES = DYNAMODB_ITEM_BYTES // 4
# `pending` lists every question still waiting for an answer (raised, delivered or escalated).
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


# -- request and response models -----------------------------------------------------------


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: JsonValue = Field(default_factory=dict, description="the graph's input")


class RunAccepted(BaseModel):
    thread_id: str
    status: Literal["queued"] = "queued"


class ThreadView(BaseModel):
    thread_id: str
    status: RunStatus
    pending: list[str] = Field(default_factory=list, description="question ids the thread waits on")
    output: JsonValue = Field(default=None, description="final output values of a done run")
    error: str | None = None
    updated_at: str | None = None
    deferred_runs: int = Field(
        default=0, description="runs waiting for the thread's questions to be answered"
    )

    @classmethod
    def of(cls, record: ThreadRecord) -> ThreadView:
        return cls(
            thread_id=record.thread_id,
            status=record.run_status,
            pending=record.pending,
            output=record.output,
            error=record.error,
            updated_at=record.updated_at,
            deferred_runs=len(record.deferred),
        )


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

    @classmethod
    def of(cls, record: QuestionRecord) -> QuestionView:
        # The view's fields are the record's public ones, by name.
        return cls.model_validate(record, from_attributes=True)


class QuestionPage(BaseModel):
    items: list[QuestionView]
    next: str | None = Field(default=None, description="pass as ?next= for the following page")


class ReplyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: JsonValue = Field(description="the answer; its shape depends on the policy's kind")
    reason: str | None = Field(default=None, max_length=4096)


class ReplyAccepted(BaseModel):
    question_id: str
    status: Literal["answered"] = "answered"


class ErrorBody(BaseModel):
    error: str
    message: str
    question_id: str | None = None
    thread_id: str | None = None


# -- principal -----------------------------------------------------------------------------


def principal_of(event: Mapping[str, Any]) -> str | None:
    """The caller's principal from an API Gateway proxy event's request context.

    IAM (SigV4) caller ARN first, then a JWT subject (REST Cognito ``claims`` or HTTP API
    ``jwt.claims``), then a Lambda authorizer's ``principalId`` (e.g. a signing key id).

    Examples
    --------
    >>> principal_of({"requestContext": {"identity": {"userArn": "arn:aws:iam::1:user/ann"}}})
    'arn:aws:iam::1:user/ann'
    >>> principal_of({"requestContext": {"authorizer": {"jwt": {"claims": {"sub": "u-1"}}}}})
    'u-1'
    >>> principal_of({"requestContext": {}}) is None
    True
    """
    context = event.get("requestContext") or {}
    identity = context.get("identity") or {}
    authorizer = context.get("authorizer") or {}
    candidates = (
        identity.get("userArn"),
        (authorizer.get("claims") or {}).get("sub"),
        ((authorizer.get("jwt") or {}).get("claims") or {}).get("sub"),
        authorizer.get("principalId"),
    )
    return next((str(c) for c in candidates if c), None)


def is_local(event: Mapping[str, Any]) -> bool:
    """Whether the request came from this machine (the local gateway): API Gateway never says so."""
    source_ip = ((event.get("requestContext") or {}).get("identity") or {}).get("sourceIp")
    if not isinstance(source_ip, str):
        return False
    try:
        return ipaddress.ip_address(source_ip).is_loopback
    except ValueError:
        return False


def body_size(event: Mapping[str, Any]) -> int:
    body = event.get("body") or ""
    size = len(body.encode()) if isinstance(body, str) else len(body)
    # A base64 body decodes to three quarters of its length.
    return size * 3 // 4 if event.get("isBase64Encoded") else size


# -- the app -------------------------------------------------------------------------------


class WaitApi:
    """The api: routes bound to a ledger, a reply service and a run service.

    Parameters
    ----------
    ledger, replies, runs:
        The services the routes call.
    max_answer_bytes:
        The largest answer (compact JSON) the deployment can always store; larger ones get 413
        before anything is recorded (``wait_service.limits``).
    title, version:
        Shown in ``GET /openapi.json``.

    Examples
    --------
    >>> api = WaitApi(ledger, ReplyService(ledger, inbox), RunService(ledger, inbox))  # doctest: +SKIP
    >>> api.resolve(event, context)["statusCode"]  # doctest: +SKIP
    202
    """

    def __init__(
        self,
        ledger: Ledger,
        replies: ReplyService,
        runs: RunService,
        *,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        title: str = "agent-wait",
        version: str = "0.1.0",
    ) -> None:
        self.ledger = ledger
        self.replies = replies
        self.runs = runs
        self.max_answer_bytes = min(max_answer_bytes, MAX_ANSWER_BYTES)
        self.title = title
        self.version = version
        self._openapi: str | None = None
        self.app = APIGatewayRestResolver(enable_validation=True)
        errors_http.register(self.app)
        self._routes()

    def resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """Handle one API Gateway REST proxy event; refuse an oversized body before parsing it."""
        if body_size(event) > MAX_BODY_BYTES:
            return errors_http.proxy_error(
                PayloadTooLargeError(f"the body is larger than {MAX_BODY_BYTES} bytes")
            )
        return self.app.resolve(event, context)

    def openapi_json(self) -> str:
        # The routes never change once built: generate the document once per instance.
        if self._openapi is None:
            self._openapi = self.app.get_openapi_json_schema(title=self.title, version=self.version)
        return self._openapi

    def _principal(self) -> str:
        event = self.app.current_event.raw_event
        principal = principal_of(event)
        if principal is not None:
            return principal
        if is_local(event):
            return ANONYMOUS
        raise ResponderNotAllowedError("the request carries no authenticated principal", principal=None)

    def _check_answer_fits(self, question_id: str, request: ReplyRequest) -> None:
        """Refuse (413) an answer no store on its way could hold, before anything is recorded."""
        check_answer_size(request.answer, self.max_answer_bytes)
        if answer_bytes(request.answer) > ANSWER_FITS_ANY_QUESTION_BYTES:
            check_reply_fits(self.ledger.get_question(question_id), request.answer, reason=request.reason)

    def _routes(self) -> None:
        app = self.app

        @app.post(
            "/threads/<thread_id>/runs",
            summary="Queue a run of the graph on a thread",
            responses={
                202: {"description": "queued", "content": {JSON: {"model": RunAccepted}}},
                409: {
                    "description": "the thread waits on questions",
                    "content": {JSON: {"model": ErrorBody}},
                },
            },
        )
        def start_run(
            thread_id: Annotated[str, Path(min_length=1, max_length=100)],
            request: Annotated[RunRequest, Body()],
        ) -> Response[RunAccepted]:
            queued = self.runs.start(thread_id, request.input)
            return Response(status_code=202, content_type=JSON, body=RunAccepted(thread_id=queued.thread_id))

        @app.get(
            "/threads/<thread_id>",
            summary="The status of a thread's last run",
            responses={
                200: {"description": "the thread", "content": {JSON: {"model": ThreadView}}},
                404: {"description": "unknown thread", "content": {JSON: {"model": ErrorBody}}},
            },
        )
        def get_thread(thread_id: Annotated[str, Path(min_length=1)]) -> ThreadView:
            return ThreadView.of(self.ledger.get_thread(thread_id))

        @app.get("/questions", summary="List questions by status and/or thread, newest first")
        def list_questions(
            status: Annotated[QuestionStatus | None, Query()] = None,
            thread_id: Annotated[str | None, Query(min_length=1)] = None,
            limit: Annotated[int, Query(ge=1, le=100)] = 50,
            next_token: Annotated[str | None, Query(alias="next")] = None,
        ) -> QuestionPage:
            page = self.ledger.list_questions(
                status=status, thread_id=thread_id, limit=limit, next_token=next_token
            )
            return QuestionPage(items=[QuestionView.of(q) for q in page.items], next=page.next)

        @app.get(
            "/questions/<question_id>",
            summary="A question, its policy, digest (also the ETag), status and lifecycle",
            responses={
                200: {"description": "the question", "content": {JSON: {"model": QuestionView}}},
                404: {"description": "unknown question", "content": {JSON: {"model": ErrorBody}}},
            },
        )
        def get_question(question_id: Annotated[str, Path(min_length=1)]) -> Response[QuestionView]:
            record = self.ledger.get_question(question_id)
            return Response(
                status_code=200,
                content_type=JSON,
                body=QuestionView.of(record),
                headers={"ETag": etag_for(record.digest)},
            )

        @app.post(
            "/questions/<question_id>/reply",
            summary="Answer a question; the first answer stands",
            responses={
                200: {"description": "the same answer again", "content": {JSON: {"model": ReplyAccepted}}},
                202: {
                    "description": "recorded, resume enqueued",
                    "content": {JSON: {"model": ReplyAccepted}},
                },
                400: {"description": "body is not JSON", "content": {JSON: {"model": ErrorBody}}},
                403: {"description": "responder not allowed", "content": {JSON: {"model": ErrorBody}}},
                404: {"description": "unknown question", "content": {JSON: {"model": ErrorBody}}},
                409: {"description": "a different answer stands", "content": {JSON: {"model": ErrorBody}}},
                410: {"description": "expired or revoked", "content": {JSON: {"model": ErrorBody}}},
                412: {
                    "description": "If-Match differs from the digest",
                    "content": {JSON: {"model": ErrorBody}},
                },
                413: {
                    "description": "body over 256 KiB, or an answer too large to store",
                    "content": {JSON: {"model": ErrorBody}},
                },
                422: {
                    "description": "answer does not fit the policy",
                    "content": {JSON: {"model": ErrorBody}},
                },
                428: {"description": "If-Match required", "content": {JSON: {"model": ErrorBody}}},
            },
        )
        def reply(
            question_id: Annotated[str, Path(min_length=1)],
            request: Annotated[ReplyRequest, Body()],
        ) -> Response[ReplyAccepted]:
            self._check_answer_fits(question_id, request)
            outcome = self.replies.reply(
                question_id,
                request.answer,
                principal=self._principal(),
                if_match=app.current_event.headers.get("If-Match"),
                reason=request.reason,
            )
            return Response(
                status_code=202 if outcome.created else 200,
                content_type=JSON,
                body=ReplyAccepted(question_id=outcome.question_id),
            )

        @app.get("/openapi.json", include_in_schema=False, enable_validation=False)
        def openapi() -> Response[str]:
            return Response(status_code=200, content_type=JSON, body=self.openapi_json())


def build_api(
    settings: Settings,
    *,
    dynamodb: DynamoDBClient | None = None,
    sqs: SQSClient | None = None,
    clock: Clock = utcnow,
) -> WaitApi:
    """The api wired to the resources named by ``settings`` (clients injectable for tests).

    Examples
    --------
    >>> api = build_api(Settings.from_env(os.environ))  # doctest: +SKIP
    """
    ledger = Ledger(
        settings.require("ledger_table"), dynamodb, clock=clock, ttl_days=settings.ledger_ttl_days
    )
    inbox = Inbox(settings.require("inbox_url"), sqs)
    return WaitApi(
        ledger,
        ReplyService(ledger, inbox, clock=clock),
        RunService(ledger, inbox),
        max_answer_bytes=settings.max_answer_bytes,
    )
