"""The api's pages: the analytics (``GET /stats``), the OpenAPI document, the inbox page."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from wait_service.http import errors_http
from wait_service.http.api_models import JSON, RouteContext, is_local
from wait_service.http.openapi_doc import responses
from wait_service.stream.analytics import StatsView, parse_window

# The window's days are documented as dates, so a client (and a generator of requests) knows a
# value that is not one is refused; parse_window answers it invalid_window, naming the parameter.
DAY = {"format": "date"}


def register_stats_route(app: APIGatewayRestResolver, api: RouteContext) -> None:
    """``GET /stats`` (``wait_service.stream.analytics``)."""

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
                max_length=40,
                description="first day (UTC), YYYY-MM-DD; default: six days before until",
                json_schema_extra=DAY,
            ),
        ] = None,
        until: Annotated[
            str | None,
            Query(
                max_length=40, description="last day (UTC), YYYY-MM-DD; default: today", json_schema_extra=DAY
            ),
        ] = None,
        function: Annotated[
            str | None, Query(min_length=1, max_length=256, description="only this function's questions")
        ] = None,
        responder: Annotated[
            str | None,
            Query(min_length=1, max_length=2048, description="only what this principal decided"),
        ] = None,
    ) -> StatsView:
        first, last = parse_window(since, until, today=api.ledger._clock().date())
        if api.stats is None:
            raise errors_http.ServiceUnavailableError(
                "this deployment keeps no analytics (AGENT_WAIT_STATS_TABLE is not set)"
            )
        figures = api.stats.stats(since=first, until=last, function=function, responder=responder)
        return StatsView.model_validate(figures)


def register_page_routes(app: APIGatewayRestResolver, api: RouteContext) -> None:
    """``GET /openapi.json``, ``GET /inbox`` and ``GET /inbox/config``."""

    @app.get("/openapi.json", include_in_schema=False, enable_validation=False)
    def openapi() -> Response[str]:
        return Response(status_code=200, content_type=JSON, body=api.openapi_json())

    @app.get("/inbox", include_in_schema=False, enable_validation=False)
    def inbox() -> Response[str]:
        from wait_service.http.inbox_page import HTML, page_headers, page_html

        headers = page_headers(api.inbox_sign_in)
        return Response(status_code=200, content_type=HTML, body=page_html(), headers=headers)

    @app.get("/inbox/config", include_in_schema=False, enable_validation=False)
    def inbox_config() -> Response[dict[str, str]]:
        from wait_service.http.inbox_page import page_config

        local = api.inbox_sign_in is None and is_local(app.current_event.raw_event)
        body = page_config(api.inbox_sign_in, local=local)
        return Response(status_code=200, content_type=JSON, body=body, headers={"Cache-Control": "no-store"})
