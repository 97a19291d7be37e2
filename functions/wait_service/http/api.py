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

import threading
from functools import partial
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

from agent_wait import exact_json
from agent_wait.errors import AgentWaitError, ResponderNotAllowedError
from wait_service.answer_limits import MAX_ANSWER_BYTES, check_answer_size, check_reply_fits
from wait_service.answers.authority import AuthorityService
from wait_service.answers.replies import ANONYMOUS, ReplyService
from wait_service.channels.signing import SignatureRejectedError, is_signed_path, is_signed_route
from wait_service.clients import CLIENT_CONFIG
from wait_service.constants import SLACK_INTERACTIONS_PATH
from wait_service.http import errors_http, openapi_doc
from wait_service.http.api_models import (
    ANSWER_FITS_ANY_QUESTION_BYTES,
    JSON,
    QuestionStatus,
    QuestionView,
    ReplyRequest,
    is_local,
    principal_of,
)
from wait_service.http.openapi_doc import ErrorBody
from wait_service.http.request_gate import Gated, body_size, gate, route_shapes
from wait_service.http.routes_answers import register_answer_routes, register_authority_routes
from wait_service.http.routes_pages import register_page_routes, register_stats_route
from wait_service.http.routes_questions import register_question_routes
from wait_service.http.routes_threads import register_thread_routes
from wait_service.ledger import Clock, Ledger, utcnow
from wait_service.limits import MAX_BODY_BYTES, loads
from wait_service.observability import logger
from wait_service.runs.idempotent_starts import IdempotentStarts
from wait_service.runs.input_schema import read_input_schema
from wait_service.runs.starts import RunService

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

    from wait_service.channels.signing import SignedRequests
    from wait_service.channels.slack import SlackInteractions
    from wait_service.http.inbox_page import InboxSignIn
    from wait_service.settings import Settings
    from wait_service.stream.analytics import StatsService


__all__ = [
    "JSON",
    "MAX_BODY_BYTES",
    "ErrorBody",
    "QuestionStatus",
    "QuestionView",
    "WaitApi",
    "body_size",
    "build_api",
    "is_local",
    "principal_of",
]
# Powertools' resolvers keep the request being resolved in a class attribute shared by every
# instance in the process, so two requests resolved at once would read each other's event.
# Lambda never does that (one request per process at a time); anything that calls the api from
# several threads (the local gateway, tests) is held to the same rule here.
_ONE_REQUEST_AT_A_TIME = threading.Lock()


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
        # Registered in this order (the OpenAPI document lists the routes as they come).
        register_thread_routes(self.app, self)
        register_question_routes(self.app, self)
        register_answer_routes(self.app, self)
        register_stats_route(self.app, self)
        register_authority_routes(self.app, self)
        register_page_routes(self.app, self)


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
        dynamodb = boto3.client("dynamodb", config=CLIENT_CONFIG)
    ledger = Ledger.from_settings(settings, dynamodb, clock=clock)
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
