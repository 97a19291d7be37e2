"""AWS calls on a timeline: what each call is for, and how many of them run one after another.

:class:`CallTimeline` registers ``before-call`` and ``after-call`` handlers on a boto3 session, so
every client made from it (the checkpointer's own included) records each API call's start and end
(retries are one call). With ``latency`` set, each call first waits that long in the calling
thread, as a call to a remote AWS endpoint would: calls made at once (a fan-out's pool) overlap in
time, calls made one after another do not, whatever the machine's speed.

:func:`in_a_row` turns the recorded intervals into round trips in a row: the longest chain of calls
each of which starts after the previous one ended (the critical path a request waits for, counted
in calls). :func:`classify` files each call under what it is for: ``checkpoint`` (the
checkpointer's table and bucket), ``ledger`` (any call on the ledger table, the announcer's
``PutItem`` of a new question included), ``sink`` (the topic and the outbox queue), ``queue`` (the
inbox queue), ``timer`` (EventBridge Scheduler), or ``other``.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

KINDS = ("checkpoint", "ledger", "sink", "queue", "timer", "other")


@dataclass(frozen=True)
class Targets:
    """The resources a call can be for, as the settings name them."""

    ledger_table: str
    checkpoint_tables: tuple[str, ...] = ()
    checkpoint_bucket: str | None = None
    inbox_url: str | None = None
    outbox_url: str | None = None
    topic_arn: str | None = None


def _tables(action: str, params: Mapping[str, Any]) -> set[str]:
    """Every table a DynamoDB call names (transactions and batches name several)."""
    found = {str(params["TableName"])} if "TableName" in params else set()
    for entry in params.get("TransactItems", []) or []:
        for body in entry.values():
            if isinstance(body, dict) and "TableName" in body:
                found.add(str(body["TableName"]))
    found |= {str(t) for t in (params.get("RequestItems") or {})}
    return found


def classify(service: str, action: str, params: Mapping[str, Any], targets: Targets) -> str:
    """What one call is for: one of :data:`KINDS`.

    Examples
    --------
    >>> t = Targets("ledger", ("checkpoints",), inbox_url="https://q/inbox.fifo",
    ...             outbox_url="https://q/outbox.fifo", topic_arn="arn:aws:sns:us-east-1:1:t")
    >>> classify("dynamodb", "PutItem", {"TableName": "ledger"}, t)
    'ledger'
    >>> classify("dynamodb", "Query", {"TableName": "checkpoints"}, t)
    'checkpoint'
    >>> classify("sqs", "SendMessage", {"QueueUrl": "https://q/outbox.fifo"}, t)
    'sink'
    >>> classify("sqs", "SendMessage", {"QueueUrl": "https://q/inbox.fifo"}, t)
    'queue'
    """
    if service == "dynamodb":
        tables = _tables(action, params)
        if targets.ledger_table in tables:
            return "ledger"
        if tables and tables <= set(targets.checkpoint_tables):
            return "checkpoint"
        return "other"
    if service == "s3":
        bucket = params.get("Bucket")
        return "checkpoint" if bucket is not None and bucket == targets.checkpoint_bucket else "other"
    if service == "sns":
        return "sink"
    if service == "sqs":
        url = params.get("QueueUrl")
        if url is not None and url == targets.outbox_url:
            return "sink"
        if url is not None and url == targets.inbox_url:
            return "queue"
        return "other"
    if service == "scheduler":
        return "timer"
    return "other"


@dataclass(frozen=True)
class TimedCall:
    name: str  # service.Action
    kind: str
    start: float
    end: float


def in_a_row(calls: Iterable[TimedCall]) -> int:
    """The most calls one after another: the longest chain where each starts after the previous ended.

    Calls that overlap in time (made at once) count once; a call that starts exactly when another
    ends follows it.

    Examples
    --------
    >>> c = lambda s, e: TimedCall("x", "other", s, e)
    >>> in_a_row([c(0, 1), c(1, 2), c(2, 3)])  # three in a row
    3
    >>> in_a_row([c(0, 1), c(0.1, 1.1), c(0.2, 1.2), c(1.3, 2)])  # a fan-out of three, then one
    2
    >>> in_a_row([])
    0
    """
    ordered = sorted(calls, key=lambda call: (call.end, call.start))
    # depth[i]: the longest chain ending with ordered[i]. O(n²), n is a few dozen calls.
    depth: list[int] = []
    for i, call in enumerate(ordered):
        before = [depth[j] for j in range(i) if ordered[j].end <= call.start]
        depth.append(1 + max(before, default=0))
    return max(depth, default=0)


def by_kind(calls: Iterable[TimedCall]) -> Counter[str]:
    return Counter(call.kind for call in calls)


def by_name(calls: Iterable[TimedCall]) -> Counter[str]:
    return Counter(call.name for call in calls)


@dataclass
class CallTimeline:
    """Every API call of the clients made from a session, with its start and end (``perf_counter``).

    Parameters
    ----------
    targets:
        To file each call under what it is for.
    latency:
        Seconds each call waits before it is made, as a round trip to AWS would take (0: none).
    """

    targets: Targets
    latency: float = 0.0
    calls: list[TimedCall] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, session: Any) -> None:
        """Record the calls of every client ``session`` (a ``boto3.Session``) creates from now on."""
        session.events.register("before-parameter-build", self._params)
        session.events.register("before-call", self._before)
        session.events.register("after-call", self._after)

    def clear(self) -> list[TimedCall]:
        with self._lock:
            taken, self.calls = self.calls, []
        return taken

    @staticmethod
    def _params(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["timeline_params"] = dict(params)

    def _before(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        service = model.service_model.service_name
        api_params = context.pop("timeline_params", {})
        context["timeline"] = (service, model.name, api_params, time.perf_counter())
        if self.latency:
            time.sleep(self.latency)

    def _after(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        started = context.pop("timeline", None)
        if started is None:
            return
        service, action, api_params, start = started
        kind = classify(service, action, api_params, self.targets)
        call = TimedCall(f"{service}.{action}", kind, start, time.perf_counter())
        with self._lock:
            self.calls.append(call)
