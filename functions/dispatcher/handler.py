"""The dispatcher Lambda: the ledger's DynamoDB stream in, partial batch failures out.

Lambda's event source mapping hands it batches of the ledger's changes, in order per item. Each
record goes through :class:`wait_service.stream.ledger_stream.LedgerStream` (the outbox dispatcher and
any other consumer of the stream). A record that fails is reported in ``batchItemFailures`` by its
sequence number; the mapping retries from there (splitting the batch on error, a bounded number of
times), then sends the record's metadata to the stream's DLQ. Settings are read once per cold start;
``build_service`` is the seam tests replace (or they call :func:`handle` with their own service).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from wait_service.init_phase import loading

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from wait_service.stream.ledger_stream import LedgerStream


def build_service() -> LedgerStream:
    """The stream's consumers for this function's environment."""
    return build_ledger_stream(Settings.from_env(os.environ))


# The init phase, with the garbage collector off (see the runner's handler).
with loading():
    # Before anything imports pydantic (see the runner's handler).
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

    from wait_service.observability import logger, metrics, tracer
    from wait_service.settings import FunctionService, Settings
    from wait_service.stream.dispatcher import build_ledger_stream

    # Built in Lambda's init phase when configured; ``build_service`` stays the seam tests replace.
    _service = FunctionService(lambda: build_service())
    _service.warm(os.environ)


def service() -> LedgerStream:
    return _service.get()


def handle(event: dict[str, Any], context: Any, service: LedgerStream) -> PartialItemFailureResponse:
    """Process one stream batch with ``service``; returns ``{"batchItemFailures": [...]}``.

    The batch consumers' work (the archive's records) is written once the batch's records are
    handled; a record whose batch work failed is reported like a record that failed itself.
    """
    try:
        response = process_partial_response(
            event=event,
            record_handler=service.process_record,
            processor=BatchProcessor(event_type=EventType.DynamoDBStreams),
            context=context,
        )
    finally:
        unwritten = service.finish_batch()
    reported = {failure["itemIdentifier"] for failure in response["batchItemFailures"]}
    response["batchItemFailures"] += [
        {"itemIdentifier": sequence} for sequence in unwritten if sequence not in reported
    ]
    return response


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return handle(event, context, service())
