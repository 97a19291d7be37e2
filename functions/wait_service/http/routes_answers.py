"""The answer actions on a question: reply, revoke, delegate, extend."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path

from agent_wait.errors import AnswerInvalidError
from wait_service.answers.replies import etag_for
from wait_service.http.api_models import (
    JSON,
    DelegateRequest,
    ExtendRequest,
    QuestionView,
    ReplyAccepted,
    ReplyRequest,
    RevokeRequest,
    RouteContext,
)
from wait_service.http.openapi_doc import responses
from wait_service.limits import number_problem


def register_answer_routes(app: APIGatewayRestResolver, api: RouteContext) -> None:
    """``POST /questions/{question_id}/reply`` and ``.../revoke``."""

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
            raise AnswerInvalidError(f"{problem[0]}: {problem[1]}", field=problem[0], question_id=question_id)
        api._check_answer_fits(question_id, request)
        outcome = api.replies.reply(
            question_id,
            request.answer,
            principal=api._principal(),
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
        record = api.replies.revoke(question_id, request.reason, principal=api._principal())
        return Response(
            status_code=200,
            content_type=JSON,
            body=QuestionView.of(record),
            headers={"ETag": etag_for(record.digest)},
        )


def register_authority_routes(app: APIGatewayRestResolver, api: RouteContext) -> None:
    """``POST /questions/{question_id}/delegate`` and ``.../extend`` (``wait_service.answers.authority``)."""

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
        record = api.authority.delegate(
            question_id, request.to, reason=request.reason, principal=api._principal()
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
        record = api.authority.extend(
            question_id,
            reason=request.reason,
            principal=api._principal(),
            by_seconds=request.by_seconds,
            until=request.until,
        )
        return Response(
            status_code=200,
            content_type=JSON,
            body=QuestionView.of(record),
            headers={"ETag": etag_for(record.digest)},
        )
