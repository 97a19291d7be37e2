"""The thread routes: queue a run (``POST /threads/{thread_id}/runs``), read a thread."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Header

from wait_service.http.api_models import JSON, RouteContext, RunAccepted, RunRequest, ThreadIdPath, ThreadView
from wait_service.http.openapi_doc import responses
from wait_service.limits import check_numbers
from wait_service.runs.idempotent_starts import IDEMPOTENCY_HEADER, IDEMPOTENCY_KEY_PATTERN
from wait_service.runs.input_schema import check_input


def register_thread_routes(app: APIGatewayRestResolver, api: RouteContext) -> None:
    """``POST /threads/{thread_id}/runs`` and ``GET /threads/{thread_id}``."""

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
        check_input(request.input, api.input_schema)
        # Who asked for the run: its questions record it (separation of duties).
        started_by = api._caller()
        if api.starts is None:
            queued = api.runs.start(thread_id, request.input, started_by=started_by)
        else:
            queued = api.starts.start(
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
        return ThreadView.of(api.ledger.get_thread(thread_id))
