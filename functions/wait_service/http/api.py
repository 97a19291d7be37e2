"""The HTTP api: a Powertools REST resolver over the ledger, the reply service and the inbox.

It validates and records: one ledger write per request is the commit, and what must follow it
(the start or resume message) follows from the ledger's stream (``wait_service.stream.ledger_stream``),
so the api sends no message itself. It never runs a graph and never imports LangGraph, so its
cold start stays small (``tests/unit/service/test_api_imports.py`` holds it to that).

Routes: ``POST /threads/{thread_id}/runs``, ``GET /threads/{thread_id}``, ``GET /questions``,
``GET /questions/{question_id}``, ``POST /questions/{question_id}/reply``,
``POST /questions/{question_id}/revoke``, ``POST /questions/{question_id}/delegate``,
``POST /questions/{question_id}/extend`` (``wait_service.answers.authority``), ``GET /stats``
(``wait_service.stream.analytics``), ``GET /openapi.json``, and the inbox page (``GET /inbox``,
``GET /inbox/config``: ``wait_service.http.inbox_page``).
"""

from __future__ import annotations

import ipaddress
import threading
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any, Literal

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, JsonValue, model_validator

from agent_wait import Policy, exact_json
from agent_wait.errors import AgentWaitError, AnswerInvalidError, ResponderNotAllowedError
from wait_service.answer_limits import (
    DYNAMODB_ITEM_BYTES,
    MAX_ANSWER_BYTES,
    check_answer_size,
    check_reply_fits,
)
from wait_service.answers.audit import audit_of
from wait_service.answers.authority import AuthorityService, current_authority, delegates_of, quorum_summary
from wait_service.answers.replies import ANONYMOUS, ReplyService, etag_for
from wait_service.channels.signing import SignatureRejectedError, is_signed_path, is_signed_route
from wait_service.constants import SLACK_INTERACTIONS_PATH
from wait_service.http import errors_http, openapi_doc
from wait_service.http.openapi_doc import ErrorBody, responses
from wait_service.http.page_tokens import list_page
from wait_service.http.request_gate import Gated, body_size, gate, route_shapes
from wait_service.ledger import Clock, Ledger, QuestionRecord, RunStatus, ThreadRecord, utcnow
from wait_service.limits import (
    MAX_BODY_BYTES,
    THREAD_ID_MAX,
    THREAD_ID_PATTERN,
    ExactJson,
    check_numbers,
    loads,
    number_problem,
)
from wait_service.observability import logger
from wait_service.runs.idempotent_starts import IDEMPOTENCY_HEADER, IDEMPOTENCY_KEY_PATTERN, IdempotentStarts
from wait_service.runs.input_schema import check_input, read_input_schema
from wait_service.runs.starts import RunService
from wait_service.stream.analytics import StatsView, parse_window

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

    from wait_service.channels.signing import SignedRequests
    from wait_service.channels.slack import SlackInteractions
    from wait_service.http.inbox_page import InboxSignIn
    from wait_service.settings import Settings
    from wait_service.stream.analytics import StatsService

JSON = "application/json"
__all__ = ["MAX_BODY_BYTES", "ErrorBody", "WaitApi", "body_size", "build_api"]
# Powertools' resolvers keep the request being resolved in a class attribute shared by every
# instance in the process, so two requests resolved at once would read each other's event.
# Lambda never does that (one request per process at a time); anything that calls the api from
# several threads (the local gateway, tests) is held to the same rule here.
_ONE_REQUEST_AT_A_TIME = threading.Lock()
# `pending` lists every question still waiting for an answer (raised, delivered or escalated);
# the others are the statuses of `wait_service.ledger.statuses` (a test holds the two together).
# An answer this large or less fits beside any question item the runner can write (the item's other
# attributes stay far below the rest of DynamoDB's 400 KB), so only a larger one costs a read of
# its question before the reply service runs.
ANSWER_FITS_ANY_QUESTION_BYTES = DYNAMODB_ITEM_BYTES // 4
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


ThreadIdPath = Annotated[
    str,
    Path(
        pattern=THREAD_ID_PATTERN,
        min_length=1,
        max_length=THREAD_ID_MAX,
        description="letters, digits and . _ : - (1 to 80), after percent-decoding",
    ),
]

# -- request and response models -----------------------------------------------------------


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: ExactJson = Field(default_factory=dict, description="the graph's input")


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
    attempt: int | None = Field(
        default=None, description="while retrying: the attempt that failed (the inbox allows 5)"
    )
    output_omitted: int | None = Field(
        default=None,
        description="the size in bytes of an output too large for the ledger (`output` is null): "
        "the whole output is in the thread's checkpoint",
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
            attempt=record.attempt if record.run_status == "retrying" else None,
            output_omitted=record.output_omitted,
        )


class LifecycleStage(BaseModel):
    stage: str
    at: str
    actor: str | None = None
    detail: JsonValue = Field(
        default=None, description="the sink (delivered), route (escalated), number (reminded) or reason"
    )


class CallView(BaseModel):
    function: str
    args: dict[str, ExactJson] = Field(default_factory=dict)


class ReceiptView(BaseModel):
    ran: bool = Field(description="whether the function's body ran")
    args: dict[str, ExactJson] | None = Field(default=None, description="the arguments it ran with")
    outcome: Literal["returned", "raised"] | None = None
    error: str | None = None
    at: str


class AuditView(BaseModel):
    """What was proposed, what was authorized (and the JSON Patch between them), by whom, and what ran."""

    proposed: CallView | None = None
    authorized: CallView | None = None
    diff: list[dict[str, ExactJson]] = Field(
        default_factory=list, description="RFC 6902 JSON Patch from proposed to authorized args"
    )
    answered_by: str | None = None
    if_match: str | None = Field(default=None, description="the tag the responder sent")
    answered_at: str | None = None
    receipt: ReceiptView | None = None
    requested_by: str | None = Field(default=None, description="who started the run that raised it")
    delegations: list[dict[str, ExactJson]] = Field(
        default_factory=list, description="each hand-over: {to, by, reason, at}"
    )
    extensions: list[dict[str, ExactJson]] = Field(
        default_factory=list, description="each move of the expiry: {from, to, seconds, by, reason, at}"
    )


class QuorumView(BaseModel):
    """Where a quorum stands: ``summary`` reads "2 of 3 approvals"; ``votes`` says who voted how."""

    summary: str
    approvals: int
    approvals_required: int
    rejections: int
    rejections_required: int
    votes: list[dict[str, ExactJson]] = Field(default_factory=list)

    @classmethod
    def of(cls, record: QuestionRecord) -> QuorumView | None:
        required = record.policy.get("approvals_required")
        if required is None:
            return None
        rejections_required = int(record.policy.get("rejections_required") or 1)
        return cls(
            summary=quorum_summary(record) or "",
            approvals=len(record.approvers),
            approvals_required=int(required),
            rejections=len(record.rejecters),
            rejections_required=rejections_required,
            votes=[dict(v) for v in record.votes],
        )


class QuestionView(BaseModel):
    question_id: str
    thread_id: str
    status: str
    digest: str
    question: ExactJson = None
    policy: dict[str, JsonValue] = Field(default_factory=dict)
    policy_version: int | None = Field(
        default=None,
        description="the version of the policy store's override the question was raised under "
        "(null: the policy in the agent's code)",
    )
    source: dict[str, JsonValue] | None = None
    created_at: str | None = None
    expires_at: str | None = None
    updated_at: str | None = None
    lifecycle: list[LifecycleStage] = Field(default_factory=list)
    answer: ExactJson = None
    answered_by: str | None = None
    answered_at: str | None = None
    reason: str | None = None
    escalation: int = Field(default=0, description="the escalation rung the question is on (0: none)")
    route: str | None = Field(default=None, description="the route of that rung (null: not escalated)")
    responders: list[str] = Field(
        default_factory=list,
        description="who may answer on that rung: the policy's responders, joined or replaced by the "
        "rungs' own (empty: any authenticated caller); delegates are listed apart",
    )
    resumed_at: str | None = None
    error: str | None = Field(default=None, description="why the resume failed (resume_failed)")
    requested_by: str | None = Field(default=None, description="who started the run that raised it")
    delegates: list[str] = Field(
        default_factory=list, description="principals a responder delegated this question to"
    )
    quorum: QuorumView | None = Field(default=None, description="a quorum question's count and votes")
    audit: AuditView | None = None

    @classmethod
    def of(cls, record: QuestionRecord) -> QuestionView:
        # The view's fields are the record's public ones, by name; the audit is assembled.
        view = cls.model_validate(record, from_attributes=True)
        view.audit = AuditView.model_validate(audit_of(record))
        view.quorum = QuorumView.of(record)
        authority = current_authority(record, Policy.model_validate(record.policy))
        view.route, view.responders = authority.route, list(authority.responders)
        view.delegates = list(delegates_of(record, authority))
        return view


class QuestionPage(BaseModel):
    items: list[QuestionView]
    next: str | None = Field(default=None, description="pass as ?next= for the following page")


class ReplyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: ExactJson = Field(description="the answer; its shape depends on the policy's kind")
    reason: str | None = Field(default=None, max_length=4096)


class RevokeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=4096, description="why the question is withdrawn")


class DelegateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to: str = Field(
        min_length=1,
        max_length=1024,
        # Explicit ranges: Python's and JSON Schema's (ECMA) `\s` disagree on some characters.
        pattern=r"^[^\x00-\x20\x7f-\xa0]+$",
        description="the principal who may answer this question too (no spaces or control characters)",
    )
    reason: str = Field(min_length=1, max_length=4096, description="why it is handed over")


def _one_of_by_seconds_or_until(schema: dict[str, Any]) -> None:
    """The document says what the model checks: exactly one of the two, and neither is null."""
    for name in ("by_seconds", "until"):
        field = schema["properties"][name]
        [value] = [option for option in field.pop("anyOf") if option.get("type") != "null"]
        field.update(value)
        field.pop("default", None)
    schema["oneOf"] = [{"required": ["by_seconds"]}, {"required": ["until"]}]


class ExtendRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_one_of_by_seconds_or_until)

    by_seconds: int | None = Field(
        default=None,
        gt=0,
        le=366 * 86400,
        description="move the expiry this many seconds later (at most a year)",
    )
    until: AwareDatetime | None = Field(
        default=None, description="or move it to this moment (with a timezone)"
    )
    reason: str = Field(min_length=1, max_length=4096, description="why more time is needed")

    @model_validator(mode="after")
    def _one_of(self) -> ExtendRequest:
        if (self.by_seconds is None) == (self.until is None):
            raise ValueError("give exactly one of by_seconds and until")
        return self


class ReplyAccepted(BaseModel):
    question_id: str
    status: Literal["answered", "voted"] = Field(
        default="answered", description="voted: a quorum vote was counted; the question waits for more"
    )


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


# -- the app -------------------------------------------------------------------------------


class WaitApi:
    """The api: routes bound to a ledger, a reply service and a run service.

    Parameters
    ----------
    ledger, replies, runs:
        The services the routes call.
    starts:
        Idempotent starts (``Idempotency-Key``) over ``runs``.
    input_schema:
        The graph's input JSON schema (``wait_service.runs.input_schema``); ``None`` takes any input.
    max_answer_bytes:
        The largest answer (compact JSON) the deployment can always store; larger ones get 413
        before anything is recorded (``wait_service.answer_limits``).
    title, version:
        Shown in ``GET /openapi.json``.

    Examples
    --------
    >>> api = WaitApi(ledger, ReplyService(ledger), RunService(ledger))  # doctest: +SKIP
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
        signed: SignedRequests | None = None,
        slack: SlackInteractions | None = None,
        starts: IdempotentStarts | None = None,
        input_schema: dict[str, Any] | None = None,
        inbox_sign_in: InboxSignIn | None = None,
        stats: StatsService | None = None,
    ) -> None:
        self.ledger = ledger
        # The approval analytics (`GET /stats`); None when the deployment keeps no counters.
        self.stats = stats
        self.replies = replies
        self.runs = runs
        # Delegation and extension share the reply service's ledger and clock.
        self.authority = AuthorityService(ledger, clock=getattr(replies, "_clock", utcnow))
        self.signed = signed
        self.slack = slack
        # Without it (tests of other routes) an Idempotency-Key is not honoured.
        self.starts = starts
        self.input_schema = input_schema
        self.inbox_sign_in = inbox_sign_in
        self.max_answer_bytes = min(max_answer_bytes, MAX_ANSWER_BYTES)
        self.title = title
        self.version = version
        self._openapi: str | None = None
        # The body the gate read for the request being resolved: the resolver takes it from here
        # rather than parsing the same text again.
        self._gated: Gated | None = None
        # Bodies are read with exact numbers (Decimal) and written back with every digit.
        self.app = APIGatewayRestResolver(
            enable_validation=True,
            json_body_deserializer=self._read_body,
            serializer=partial(exact_json.dumps, separators=(",", ":")),
        )
        errors_http.register(self.app)
        self._routes()
        self._shapes = route_shapes(self.app)

    def resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """Handle one API Gateway REST proxy event.

        Signed routes (``/signed/...``) and Slack's interactions are verified first, over the raw
        body, before anything else reads the request; then the request gate (method, thread id,
        size, content type, JSON) runs, so the resolver only ever parses a body it can read.
        """
        path = str(event.get("path") or "")
        if is_signed_path(path):
            return self._resolve_signed(event, context)
        if path == SLACK_INTERACTIONS_PATH and self.slack is not None:
            return self.slack.handle(event)
        try:
            gated = gate(self._shapes, event)
        except AgentWaitError as error:
            return errors_http.proxy_error(error)
        with _ONE_REQUEST_AT_A_TIME:
            self._gated = gated
            try:
                return self.app.resolve(gated.event, context)
            finally:
                self._gated = None

    def _read_body(self, text: str) -> Any:
        gated = self._gated
        if gated is not None and gated.text is not None and (text is gated.text or text == gated.text):
            return gated.body
        return loads(text)

    def _resolve_signed(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        if self.signed is None:
            return errors_http.proxy_error(
                SignatureRejectedError("unknown_key", "this api has no signing keys configured")
            )
        try:
            key_id = self.signed.authenticate(event)
        except SignatureRejectedError as exc:
            logger.info("signed request refused", extra={"error": exc.code})
            return errors_http.proxy_error(exc)
        inner = self.signed.unsigned_event(event, key_id)
        if not is_signed_route(str(inner.get("httpMethod") or ""), str(inner["path"])):
            return errors_http.not_found_proxy()
        return self.resolve(inner, context)

    def openapi_json(self) -> str:
        # The routes never change once built: generate the document once per instance.
        if self._openapi is None:
            self._openapi = openapi_doc.finish(
                self.app.get_openapi_schema(title=self.title, version=self.version),
                input_schema=self.input_schema,
            )
        return self._openapi

    def _principal(self) -> str:
        event = self.app.current_event.raw_event
        principal = principal_of(event)
        if principal is not None:
            return principal
        if is_local(event):
            return ANONYMOUS
        raise ResponderNotAllowedError("the request carries no authenticated principal", principal=None)

    def _caller(self) -> str | None:
        """The caller's principal when the request carries one (as :meth:`_principal`), else ``None``."""
        try:
            return self._principal()
        except ResponderNotAllowedError:
            return None

    def _check_answer_fits(self, question_id: str, request: ReplyRequest) -> None:
        """Refuse (413) an answer no store on its way could hold, before anything is recorded."""
        if check_answer_size(request.answer, self.max_answer_bytes) > ANSWER_FITS_ANY_QUESTION_BYTES:
            check_reply_fits(self.ledger.get_question(question_id), request.answer, reason=request.reason)

    def _routes(self) -> None:
        app = self.app

        @app.post(
            "/threads/<thread_id>/runs",
            summary="Queue a run of the graph on a thread",
            responses=responses(
                {202: {"description": "queued", "content": {JSON: {"model": RunAccepted}}}},
                {
                    400: None,
                    409: "thread_waiting: the thread waits on questions (`pending` lists them); "
                    "idempotency_in_progress: a request with this Idempotency-Key is being handled",
                    413: None,
                    415: None,
                    422: "invalid_input: the input does not fit the graph's input schema (`field` names "
                    "where); idempotency_conflict: this Idempotency-Key was used with a different body",
                    503: None,
                },
            ),
        )
        def start_run(
            thread_id: ThreadIdPath,
            request: Annotated[RunRequest, Body()],
            idempotency_key: Annotated[
                str | None,
                Header(
                    alias=IDEMPOTENCY_HEADER,
                    pattern=IDEMPOTENCY_KEY_PATTERN,
                    description="repeat within 24 h with the same body: the first response, no new run",
                ),
            ] = None,
        ) -> Response[RunAccepted]:
            check_numbers(request.input, "input")
            check_input(request.input, self.input_schema)
            # Who asked for the run: its questions record it (separation of duties).
            started_by = self._caller()
            if self.starts is None:
                queued = self.runs.start(thread_id, request.input, started_by=started_by)
            else:
                queued = self.starts.start(
                    thread_id,
                    request.input,
                    key=idempotency_key,
                    context=app.lambda_context,
                    started_by=started_by,
                )
            return Response(status_code=202, content_type=JSON, body=RunAccepted(thread_id=queued.thread_id))

        @app.get(
            "/threads/<thread_id>",
            summary="The status of a thread's last run",
            responses=responses(
                {200: {"description": "the thread", "content": {JSON: {"model": ThreadView}}}},
                {400: None, 404: "thread_not_found: unknown thread", 503: None},
            ),
        )
        def get_thread(thread_id: ThreadIdPath) -> ThreadView:
            return ThreadView.of(self.ledger.get_thread(thread_id))

        @app.get(
            "/questions",
            summary="List questions by status and/or thread, newest first",
            responses=responses(
                {200: {"description": "one page", "content": {JSON: {"model": QuestionPage}}}},
                {400: None, 503: None},
            ),
        )
        def list_questions(
            status: Annotated[QuestionStatus | None, Query()] = None,
            thread_id: Annotated[
                str | None, Query(pattern=THREAD_ID_PATTERN, min_length=1, max_length=THREAD_ID_MAX)
            ] = None,
            limit: Annotated[int, Query(ge=1, le=100)] = 50,
            next_token: Annotated[str | None, Query(alias="next", min_length=1, max_length=4096)] = None,
        ) -> QuestionPage:
            page = list_page(
                self.ledger, status=status, thread_id=thread_id, limit=limit, next_token=next_token
            )
            return QuestionPage(items=[QuestionView.of(q) for q in page.items], next=page.next)

        @app.get(
            "/questions/<question_id>",
            summary="A question, its policy, digest (also the ETag), status and lifecycle",
            responses=responses(
                {
                    200: {
                        "description": "the question",
                        "headers": {
                            "ETag": {
                                "description": "the question's digest; send it back as If-Match",
                                "schema": {"type": "string"},
                            }
                        },
                        "content": {JSON: {"model": QuestionView}},
                    }
                },
                {404: "question_not_found: unknown question", 503: None},
            ),
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
            responses=responses(
                {
                    200: {
                        "description": "the same answer again",
                        "content": {JSON: {"model": ReplyAccepted}},
                    },
                    202: {
                        "description": "recorded; the resume follows from the ledger, certain (a quorum "
                        "vote that does not decide yet: status voted, no resume)",
                        "content": {JSON: {"model": ReplyAccepted}},
                    },
                },
                {
                    400: None,
                    403: "responder_not_allowed: the principal may not answer (or its approval does not "
                    "count toward the quorum); requester_cannot_approve: the principal started the run",
                    404: "question_not_found: unknown question",
                    409: "answer_conflict: a different answer stands (`standing_answer`), or a quorum vote "
                    "came after the decision; already_voted: a quorum counts one vote per principal",
                    410: None,
                    412: None,
                    413: None,
                    415: None,
                    422: "invalid_answer: the answer does not fit the policy, or holds a number "
                    "DynamoDB cannot store; `field` names it",
                    428: None,
                    503: None,
                },
            ),
        )
        def reply(
            question_id: Annotated[str, Path(min_length=1)],
            request: Annotated[ReplyRequest, Body()],
            if_match: Annotated[
                str | None,
                Header(
                    alias="If-Match",
                    description="the question's digest (its ETag), when the policy binds answers to it",
                ),
            ] = None,
        ) -> Response[ReplyAccepted]:
            problem = number_problem(request.answer, "answer")
            if problem is not None:
                raise AnswerInvalidError(
                    f"{problem[0]}: {problem[1]}", field=problem[0], question_id=question_id
                )
            self._check_answer_fits(question_id, request)
            outcome = self.replies.reply(
                question_id,
                request.answer,
                principal=self._principal(),
                if_match=if_match,
                reason=request.reason,
            )
            return Response(
                status_code=202 if outcome.created else 200,
                content_type=JSON,
                body=ReplyAccepted(question_id=outcome.question_id, status=outcome.status),
            )

        @app.post(
            "/questions/<question_id>/revoke",
            summary="Withdraw an open question; the thread is resumed with a rejection",
            responses=responses(
                {200: {"description": "revoked", "content": {JSON: {"model": QuestionView}}}},
                {
                    400: None,
                    403: None,
                    404: "question_not_found: unknown question",
                    409: "answer_conflict: already answered or expired (`standing_answer`)",
                    410: "question_closed: already revoked (`standing_answer`)",
                    413: None,
                    415: None,
                    503: None,
                },
            ),
        )
        def revoke(
            question_id: Annotated[str, Path(min_length=1)],
            request: Annotated[RevokeRequest, Body()],
        ) -> Response[QuestionView]:
            record = self.replies.revoke(question_id, request.reason, principal=self._principal())
            return Response(
                status_code=200,
                content_type=JSON,
                body=QuestionView.of(record),
                headers={"ETag": etag_for(record.digest)},
            )

        self._stats_route()

        @app.post(
            "/questions/<question_id>/delegate",
            summary="Hand an open question to another principal, who may then answer it too",
            responses=responses(
                {200: {"description": "delegated", "content": {JSON: {"model": QuestionView}}}},
                {
                    400: None,
                    403: "responder_not_allowed: only a responder of the question may delegate it",
                    404: "question_not_found: unknown question",
                    409: "question_decided: the question is decided (`status`); already_responder: "
                    "`to` may answer it already",
                    413: None,
                    415: None,
                    422: "invalid_delegation: `to` is the caller, an STS session ARN, or the run's "
                    "starter under requester_cannot_approve (`field`: to)",
                    503: None,
                },
            ),
        )
        def delegate(
            question_id: Annotated[str, Path(min_length=1)],
            request: Annotated[DelegateRequest, Body()],
        ) -> Response[QuestionView]:
            record = self.authority.delegate(
                question_id, request.to, reason=request.reason, principal=self._principal()
            )
            return Response(
                status_code=200,
                content_type=JSON,
                body=QuestionView.of(record),
                headers={"ETag": etag_for(record.digest)},
            )

        @app.post(
            "/questions/<question_id>/extend",
            summary="Move an open question's expiry later, within its policy's max_extension",
            responses=responses(
                {200: {"description": "extended", "content": {JSON: {"model": QuestionView}}}},
                {
                    400: None,
                    403: "responder_not_allowed: only a responder of the question may extend it",
                    404: "question_not_found: unknown question",
                    409: "question_decided: the question is decided or past its expiry (`status`)",
                    413: None,
                    415: None,
                    422: "invalid_extension: past the policy's max_extension, no extension allowed, no "
                    "expiry to move, or not later (`field`: by_seconds or until)",
                    503: None,
                },
            ),
        )
        def extend(
            question_id: Annotated[str, Path(min_length=1)],
            request: Annotated[ExtendRequest, Body()],
        ) -> Response[QuestionView]:
            record = self.authority.extend(
                question_id,
                reason=request.reason,
                principal=self._principal(),
                by_seconds=request.by_seconds,
                until=request.until,
            )
            return Response(
                status_code=200,
                content_type=JSON,
                body=QuestionView.of(record),
                headers={"ETag": etag_for(record.digest)},
            )

        @app.get("/openapi.json", include_in_schema=False, enable_validation=False)
        def openapi() -> Response[str]:
            return Response(status_code=200, content_type=JSON, body=self.openapi_json())

        @app.get("/inbox", include_in_schema=False, enable_validation=False)
        def inbox() -> Response[str]:
            from wait_service.http.inbox_page import HTML, page_headers, page_html

            headers = page_headers(self.inbox_sign_in)
            return Response(status_code=200, content_type=HTML, body=page_html(), headers=headers)

        @app.get("/inbox/config", include_in_schema=False, enable_validation=False)
        def inbox_config() -> Response[dict[str, str]]:
            from wait_service.http.inbox_page import page_config

            local = self.inbox_sign_in is None and is_local(app.current_event.raw_event)
            body = page_config(self.inbox_sign_in, local=local)
            return Response(
                status_code=200, content_type=JSON, body=body, headers={"Cache-Control": "no-store"}
            )

    def _stats_route(self) -> None:
        app = self.app

        @app.get(
            "/stats",
            summary="Approval analytics: outcomes, time to answer, edits by day, function, responder, rung",
            responses=responses(
                {200: {"description": "the window's figures", "content": {JSON: {"model": StatsView}}}},
                {
                    400: None,
                    422: "invalid_window: a date that is not YYYY-MM-DD, until before since, or a window "
                    "over 366 days; `field` names the parameter",
                    503: None,
                },
            ),
        )
        def get_stats(
            since: Annotated[
                str | None,
                Query(
                    max_length=40, description="first day (UTC), YYYY-MM-DD; default: six days before until"
                ),
            ] = None,
            until: Annotated[
                str | None, Query(max_length=40, description="last day (UTC), YYYY-MM-DD; default: today")
            ] = None,
            function: Annotated[
                str | None, Query(min_length=1, max_length=256, description="only this function's questions")
            ] = None,
            responder: Annotated[
                str | None,
                Query(min_length=1, max_length=2048, description="only what this principal decided"),
            ] = None,
        ) -> StatsView:
            first, last = parse_window(since, until, today=self.ledger._clock().date())
            if self.stats is None:
                raise errors_http.ServiceUnavailableError(
                    "this deployment keeps no analytics (AGENT_WAIT_STATS_TABLE is not set)"
                )
            figures = self.stats.stats(since=first, until=last, function=function, responder=responder)
            return StatsView.model_validate(figures)


def build_api(
    settings: Settings,
    *,
    dynamodb: DynamoDBClient | None = None,
    sqs: SQSClient | None = None,
    secretsmanager: Any = None,
    clock: Clock = utcnow,
) -> WaitApi:
    """The api wired to the resources named by ``settings`` (clients injectable for tests).

    Examples
    --------
    >>> api = build_api(Settings.from_env(os.environ))  # doctest: +SKIP
    """
    from wait_service.channels.signing import build_signed_requests

    if dynamodb is None:
        import boto3

        # One client for the ledger, the signed routes' replay guard and idempotent starts: a
        # client of their own would cost each of them milliseconds of every cold start.
        dynamodb = boto3.client("dynamodb")
    ledger = Ledger(
        settings.require("ledger_table"),
        dynamodb,
        clock=clock,
        ttl_days=settings.ledger_ttl_days,
        listing_shards=settings.listing_shards,
    )
    replies = ReplyService(ledger, clock=clock)
    signed = build_signed_requests(
        settings.signing_keys,
        settings.require("ledger_table"),
        secretsmanager=secretsmanager,
        dynamodb=dynamodb,
    )
    slack = None
    if settings.slack_signing_secret:
        # Only a deployment with Slack loads the Slack module.
        from wait_service.channels.slack import build_slack_interactions

        slack = build_slack_interactions(settings, replies, secretsmanager=secretsmanager)
    runs = RunService(ledger)
    starts = IdempotentStarts(runs, ledger.table_name, dynamodb=dynamodb)
    inbox_sign_in = None
    if settings.inbox_client_id and settings.inbox_domain:
        from wait_service.http.inbox_page import InboxSignIn

        inbox_sign_in = InboxSignIn(
            settings.inbox_client_id, settings.inbox_domain, audience=settings.jwt_audience
        )
    return WaitApi(
        ledger,
        replies,
        runs,
        starts=starts,
        input_schema=read_input_schema(settings.input_schema),
        signed=signed,
        slack=slack,
        inbox_sign_in=inbox_sign_in,
        max_answer_bytes=settings.max_answer_bytes,
        stats=_stats_service(settings, dynamodb),
    )


def _stats_service(settings: Settings, dynamodb: DynamoDBClient) -> StatsService | None:
    if not settings.stats_table:
        return None
    from wait_service.stream.analytics import StatsService, StatsStore

    return StatsService(StatsStore(settings.stats_table, dynamodb))
