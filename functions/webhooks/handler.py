"""The webhooks Lambda: delivery-queue batches in, signed POSTs out, partial batch failures back.

A failed delivery to be retried is reported in ``batchItemFailures`` once its visibility is set to
the backoff delay (``wait_service.channels.webhooks``); the rest (delivered, skipped, dead-lettered) is
deleted. A batch that failed whole is reported, not raised: a receiver being down is no error here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from wait_service.init_phase import loading

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.typing import LambdaContext


def build_service() -> WebhookDelivery:
    """The delivery service for this function's environment (secrets cached by Powertools)."""
    import boto3

    return WebhookDelivery(
        parse_webhooks(os.environ.get(WEBHOOKS_VARIABLE)),
        sqs=boto3.client("sqs", config=CLIENT_CONFIG),
        dlq_url=os.environ[WEBHOOK_DLQ_VARIABLE],
        get_secret=secret_getter(),
    )


# The init phase, with the garbage collector off (see the runner's handler).
with loading():
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

    from wait_service.channels.webhooks import (
        WEBHOOK_DLQ_VARIABLE,
        WEBHOOKS_VARIABLE,
        WebhookDelivery,
        parse_webhooks,
    )
    from wait_service.clients import CLIENT_CONFIG
    from wait_service.observability import logger, metrics, tracer
    from wait_service.runs.secrets import secret_getter
    from wait_service.settings import FunctionService

    _service = FunctionService(lambda: build_service())
    if os.environ.get(WEBHOOKS_VARIABLE):
        _service.get()


def service() -> WebhookDelivery:
    return _service.get()


def handle(event: dict[str, Any], context: Any, service: WebhookDelivery) -> PartialItemFailureResponse:
    """Deliver one SQS batch with ``service``; returns ``{"batchItemFailures": [...]}``."""
    return process_partial_response(
        event=event,
        record_handler=lambda record: service.process_record(record.raw_event),
        processor=BatchProcessor(EventType.SQS, raise_on_entire_batch_failure=False),
        context=context,
    )


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return handle(event, context, service())
