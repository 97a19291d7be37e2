"""The api Lambda: API Gateway REST proxy events in, the api's responses out.

Settings are read from the environment once per cold start; ``build_service`` is the seam tests
replace (or they call :func:`handle` with their own service).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from wait_service.init_phase import loading

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from wait_service.http.api import WaitApi


def build_service() -> WaitApi:
    """The api for this function's environment."""
    return build_api(Settings.from_env(os.environ))


# The init phase, with the garbage collector off: what it builds lives as long as the environment.
with loading():
    from aws_lambda_powertools.logging import correlation_paths

    from wait_service.http.api import build_api
    from wait_service.observability import logger, metrics, tracer
    from wait_service.runs.snapstart import register_hooks
    from wait_service.settings import FunctionService, Settings

    # Built in Lambda's init phase when configured; ``build_service`` stays the seam tests replace.
    _service = FunctionService(lambda: build_service())
    _service.warm(os.environ)
    # With SnapStart: pools emptied before the snapshot, randomness reseeded in each restored copy.
    register_hooks(os.environ)


def service() -> WaitApi:
    return _service.get()


def handle(event: dict[str, Any], context: Any, service: WaitApi) -> dict[str, Any]:
    """Resolve one event with ``service``."""
    return service.resolve(event, context)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(event, context, service())
