"""The runner Lambda: inbox FIFO batches in, partial batch failures out.

``SqsFifoPartialProcessor(skip_group_on_error=True)``: a failing record is reported in
``batchItemFailures`` together with every later record of the same thread (message group), so the
queue redelivers that thread's messages in order; other threads in the batch run and are deleted,
so one stuck thread never holds up the rest.
Settings are read once per cold start; ``build_service`` is the seam tests replace (or they call
:func:`handle` with their own service).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from wait_service.init_phase import loading

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from wait_service.runs.runner import RunnerService


def build_service() -> RunnerService:
    """The runner for this function's environment, its clients shared (one session, one per service).

    The deployment's secrets go into the environment first, so the graph finds them when it is built.
    """
    settings = Settings.from_env(os.environ)
    export_secrets(settings.runner_secrets, os.environ)
    return build_runner(settings, **runner_clients(settings).as_kwargs())


# The init phase, with the garbage collector off: what it builds lives as long as the environment.
with loading():
    from wait_service.runs.deferred_imports import defer_unless_tracing

    # Before anything imports LangGraph: with LangSmith tracing off, the LangSmith SDK and the
    # LangGraph Platform SDK, which LangGraph imports but does not use then, run their code only at
    # first use.
    defer_unless_tracing(os.environ)

    # Before anything imports pydantic: imported after it, the batch utility also loads every
    # Powertools parser model (milliseconds of each cold start, for typing only).
    from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response

    from wait_service.observability import logger, metrics, tracer
    from wait_service.runs.checkpointer import runner_clients
    from wait_service.runs.runner import build_runner
    from wait_service.runs.secrets import export_secrets
    from wait_service.runs.snapstart import register_hooks
    from wait_service.settings import FunctionService, Settings

    # Built in Lambda's init phase when configured; ``build_service`` stays the seam tests replace.
    _service = FunctionService(lambda: build_service())
    _service.warm(os.environ)
    # With SnapStart: pools emptied before the snapshot, randomness reseeded in each restored copy.
    register_hooks(os.environ)


def service() -> RunnerService:
    return _service.get()


def handle(event: dict[str, Any], context: Any, service: RunnerService) -> PartialItemFailureResponse:
    """Process one SQS batch with ``service``; returns ``{"batchItemFailures": [...]}``."""
    return process_partial_response(
        event=event,
        record_handler=service.process_record,
        processor=SqsFifoPartialProcessor(skip_group_on_error=True),
        context=context,
    )


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return handle(event, context, service())
