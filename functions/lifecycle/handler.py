"""The lifecycle Lambda: one question timer in (expiry, escalation, reminder), one step out.

EventBridge Scheduler invokes it with the schedule's input, a ``TimerEvent``
(``{"question_id", "timer": "expire" | "remind", "n"}``). Every step is a conditional write in
the ledger, so a timer that fires late, twice, or after an answer changes nothing; an error fails
the invocation so Lambda's asynchronous retries fire the step again. Settings are read once per
cold start; ``build_service`` is the seam tests replace (or they call :func:`handle` with their
own service).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from wait_service.init_phase import loading

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from wait_service.lifecycle.unanswered import LifecycleService


def build_service() -> LifecycleService:
    """The lifecycle service for this function's environment."""
    return build_lifecycle(Settings.from_env(os.environ))


# The init phase, with the garbage collector off (see the runner's handler).
with loading():
    from wait_service.lifecycle.timers import parse_timer_event
    from wait_service.lifecycle.unanswered import build_lifecycle
    from wait_service.observability import logger, metrics, tracer
    from wait_service.settings import FunctionService, Settings

    # Built in Lambda's init phase when configured; ``build_service`` stays the seam tests replace.
    _service = FunctionService(lambda: build_service())
    _service.warm(os.environ)


def service() -> LifecycleService:
    return _service.get()


def handle(event: Any, context: Any, service: LifecycleService) -> dict[str, str]:
    """Act on one timer with ``service``; returns ``{"question_id", "outcome"}``."""
    timer = parse_timer_event(event)
    logger.append_keys(question_id=timer.question_id, timer=timer.timer, n=timer.n)
    return {"question_id": timer.question_id, "outcome": service.handle(timer)}


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, str]:
    return handle(event, context, service())
