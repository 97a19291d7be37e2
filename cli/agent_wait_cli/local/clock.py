"""The local stack's clock: fires due EventBridge Scheduler schedules into the lifecycle handler.

moto stores schedules but never fires them. :class:`ScheduleClock` does what the service does on
AWS for the one-shot ``at()`` schedules of the question timers: when a schedule's time has come it
invokes the target (the same lifecycle handler the deployment runs) with the schedule's input, then
deletes the schedule (``ActionAfterCompletion: DELETE``). A handler that raises is invoked again
on the next tick, up to three times in all, as Lambda retries an asynchronous invocation; after the
last, ``on_failure`` gets the Lambda on-failure destination record (:func:`destination_record`)
that the deployed function sends to its DLQ.

It polls every quarter second, so a timer fires within a second of its time; tests call
:meth:`ScheduleClock.fire_due` with their own ``now``.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_scheduler import EventBridgeSchedulerClient

__all__ = ["ScheduleClock", "parse_at"]

logger = logging.getLogger("agent_wait_cli.local")

Handler = Callable[[Any, Any], Any]
# Lambda invokes an asynchronous event up to three times (the first try and two retries).
MAX_ATTEMPTS = 3
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")


def parse_at(expression: str) -> datetime | None:
    """The moment of a one-shot ``at(...)`` expression (UTC), or ``None`` for any other kind.

    Examples
    --------
    >>> parse_at("at(2026-11-30T10:00:05)")
    datetime.datetime(2026, 11, 30, 10, 0, 5, tzinfo=datetime.timezone.utc)
    >>> parse_at("rate(5 minutes)") is None
    True
    """
    match = _AT.match(expression.strip())
    if match is None:
        return None
    return datetime.fromisoformat(match.group(1)).replace(tzinfo=UTC)


def destination_record(
    payload: Any, error: BaseException, function_arn: str, attempts: int, now: datetime | None = None
) -> dict[str, Any]:
    """The record Lambda sends to an on-failure destination when an async invocation failed every try.

    Examples
    --------
    >>> record = destination_record({"question_id": "q"}, ValueError("no"), "arn:...:function:f", 3)
    >>> record["requestPayload"], record["requestContext"]["condition"]
    ({'question_id': 'q'}, 'RetriesExhausted')
    >>> record["responsePayload"]["errorType"]
    'ValueError'
    """
    moment = now or datetime.now(UTC)
    return {
        "version": "1.0",
        "timestamp": moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z",
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "functionArn": f"{function_arn}:$LATEST",
            "condition": "RetriesExhausted",
            "approximateInvokeCount": attempts,
        },
        "requestPayload": payload,
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "responsePayload": {
            "errorMessage": str(error),
            "errorType": type(error).__name__,
            "stackTrace": traceback.format_tb(error.__traceback__),
        },
    }


def _order(payload: Any) -> tuple[str, int]:
    if not isinstance(payload, dict):
        return ("", 0)
    n = payload.get("n")
    return (str(payload.get("timer", "")), n if isinstance(n, int) else 0)


@dataclass
class _Schedule:
    at: datetime
    input: Any
    attempts: int = 0


class ScheduleClock:
    """Fire the schedules of one group into ``handler`` when they are due.

    Parameters
    ----------
    scheduler:
        A boto3 ``scheduler`` client on the local moto server.
    group:
        The schedule group the stack's timers live in.
    handler:
        The lifecycle Lambda handler, ``handler(event, context)``.
    context_factory:
        Builds the Lambda context of each invocation.
    now:
        Current UTC time; injected by tests.
    on_fire:
        Called with ``(input, result or exception)`` after each invocation (the event lines).
    on_failure:
        Called with ``(input, exception, attempts)`` when the last attempt failed (the DLQ).
    interval:
        Seconds between two looks at the schedules.

    Examples
    --------
    >>> clock = ScheduleClock(scheduler, "agent-wait-timers", lifecycle.handler)  # doctest: +SKIP
    >>> clock.fire_due()  # doctest: +SKIP
    1
    """

    def __init__(
        self,
        scheduler: EventBridgeSchedulerClient,
        group: str,
        handler: Handler,
        *,
        context_factory: Callable[[], Any] | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_fire: Callable[[Any, Any], None] | None = None,
        on_failure: Callable[[Any, BaseException, int], None] | None = None,
        interval: float = 0.25,
    ) -> None:
        self._scheduler = scheduler
        self._group = group
        self._handler = handler
        self._context_factory = context_factory or (lambda: None)
        self._now = now
        self._on_fire = on_fire
        self._on_failure = on_failure
        self._interval = interval
        self._known: dict[str, _Schedule] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def fire_due(self) -> int:
        """Invoke every schedule whose time has come; returns how many were invoked."""
        self._refresh()
        now = self._now()
        due = sorted(
            ((name, schedule) for name, schedule in self._known.items() if schedule.at <= now),
            # Timers due in the same second fire in their own order (reminder 1 before reminder 2).
            key=lambda entry: (entry[1].at, _order(entry[1].input)),
        )
        for name, schedule in due:
            schedule.attempts += 1
            try:
                result: Any = self._handler(schedule.input, self._context_factory())
            except Exception as exc:
                logger.warning("timer %s failed (attempt %d): %s", name, schedule.attempts, exc)
                result = exc
                if schedule.attempts < MAX_ATTEMPTS:
                    self._report(schedule.input, result)
                    continue
                if self._on_failure is not None:
                    # Before the schedule is deleted: a failure to dead-letter fires it again.
                    self._on_failure(schedule.input, exc, schedule.attempts)
            self._report(schedule.input, result)
            self._delete(name)
        return len(due)

    def _refresh(self) -> None:
        """Learn new schedules (one ``GetSchedule`` each) and forget deleted ones."""
        names: set[str] = set()
        paginator = self._scheduler.get_paginator("list_schedules")
        for page in paginator.paginate(GroupName=self._group):
            names |= {summary["Name"] for summary in page.get("Schedules", [])}
        for name in list(self._known):
            if name not in names:
                del self._known[name]
        for name in names - set(self._known):
            try:
                schedule = self._scheduler.get_schedule(Name=name, GroupName=self._group)
            except self._scheduler.exceptions.ResourceNotFoundException:
                continue
            at = parse_at(schedule["ScheduleExpression"])
            if at is None:
                continue
            target_input = schedule.get("Target", {}).get("Input")
            self._known[name] = _Schedule(at=at, input=json.loads(target_input) if target_input else {})

    def _delete(self, name: str) -> None:
        self._known.pop(name, None)
        try:
            self._scheduler.delete_schedule(Name=name, GroupName=self._group)
        except self._scheduler.exceptions.ResourceNotFoundException:
            pass  # deleted meanwhile (the runner disarms the timers of a decided question)

    def _report(self, payload: Any, result: Any) -> None:
        if self._on_fire is None:
            return
        try:
            self._on_fire(payload, result)
        except Exception:
            logger.exception("clock watcher raised")

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self.fire_due()
            except Exception:
                if self._stop.is_set():
                    break
                logger.exception("firing the due schedules of %s failed", self._group)
            self._stop.wait(self._interval)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name="local-schedule-clock", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
        self._thread = None
