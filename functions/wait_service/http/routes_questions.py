"""The question routes: list questions (``GET /questions``) and read one."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from wait_service.answers.replies import etag_for
from wait_service.http.api_models import JSON, QuestionPage, QuestionStatus, QuestionView, RouteContext
from wait_service.http.openapi_doc import responses
from wait_service.http.page_tokens import list_page
from wait_service.limits import THREAD_ID_MAX, THREAD_ID_PATTERN


def register_question_routes(app: APIGatewayRestResolver, api: RouteContext) -> None:
    """``GET /questions`` and ``GET /questions/{question_id}``."""

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
        page = list_page(api.ledger, status=status, thread_id=thread_id, limit=limit, next_token=next_token)
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
        record = api.ledger.get_question(question_id)
        return Response(
            status_code=200,
            content_type=JSON,
            body=QuestionView.of(record),
            headers={"ETag": etag_for(record.digest)},
        )
