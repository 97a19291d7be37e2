"""Every AWS call of a process, counted with botocore's event system, and DynamoDB's request units.

:class:`CallRecorder` registers ``before-parameter-build``, ``before-call`` and ``after-call``
handlers on every botocore client created while it is installed (it wraps
``botocore.session.Session.create_client``, so the handlers' own clients are counted whatever
session made them; retries of a call are not counted again). Each call becomes a
:class:`Call`: service, action, the function it ran in (a context variable the caller sets around
each handler invocation), and for DynamoDB the partition keys it touched and the request units it
cost, computed from the item sizes by DynamoDB's published rules:

- item size: attribute names plus values (strings and binaries their bytes, a number about one
  byte per two significant digits plus one, booleans and nulls one byte, lists and maps three
  bytes plus one per element);
- writes: 1 WRU per started KiB of the larger of the item before and after (2 in a transaction);
  a failed condition still costs the stored item's size; each global secondary index the item is
  in before or after costs its own writes, sized by what the index projects (a key change is a
  delete and a put);
- reads: 1 RRU per started 4 KiB (a query sums the items it read before rounding); eventually
  consistent reads (every index read) cost half; a projection does not shrink a read.

The API parameters are taken at ``before-parameter-build`` (after boto3's resource layer has
turned Python values into DynamoDB's wire types). The images before and after a write are read
with a separate, unrecorded client (``ConsistentRead``) around the call, so the sizes are the
stored items', not estimates; the time those reads take is added to ``hook_seconds`` for the
caller to take off the invocation's duration.
"""

from __future__ import annotations

import contextvars
import math
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

# The function (api, runner, lifecycle...) the current thread is running, set by the caller.
current_function: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "current_function", default=None
)
# The sample question (its thread id) the current invocation works for, when known.
current_question: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "current_question", default=None
)


@dataclass
class HookTime:
    """One invocation's meter: the recorder's own time in it (its image reads, for the caller to take
    off), the CPU its fan-out's worker threads spent for it, and the AWS calls it made, in order."""

    wall: float = 0.0
    cpu: float = 0.0  # the recorder's own CPU seconds, on any thread working for the invocation
    worker_cpu: float = 0.0  # CPU seconds of pool threads running work the invocation submitted
    calls: list[str] = field(default_factory=list)  # "service.Action" of each call it made
    # Each call as (name, sent, answered) on the perf_counter clock: which calls ran at once.
    timed: list[tuple[str, float, float]] = field(default_factory=list)


hook_seconds: contextvars.ContextVar[HookTime | None] = contextvars.ContextVar("hook_seconds", default=None)

KIB = 1024
READ_UNIT = 4 * KIB


# -- item sizes ---------------------------------------------------------------------------------


def _number_size(text: str) -> int:
    digits = text.lstrip("+-").lower().split("e")[0].replace(".", "").strip("0")
    return max(1, math.ceil(len(digits) / 2)) + 1


def value_size(value: dict[str, Any]) -> int:
    """Size in bytes of one AttributeValue (``{"S": ...}``, ``{"N": ...}``, ...).

    Examples
    --------
    >>> value_size({"S": "abc"}), value_size({"N": "12345"}), value_size({"BOOL": True})
    (3, 4, 1)
    >>> value_size({"M": {"a": {"S": "xy"}}})  # 3 + (1 + len("a") + 2)
    7
    """
    (kind, inner), *_ = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        return _number_size(str(inner))
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in inner)
    if kind == "NS":
        return sum(_number_size(str(n)) for n in inner)
    if kind == "BS":
        return sum(len(b) for b in inner)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in inner.items())
    raise ValueError(f"unknown attribute type {kind!r}")


def item_size(item: dict[str, Any] | None) -> int:
    """Size in bytes of an item in DynamoDB's wire format (0 for no item).

    Examples
    --------
    >>> item_size({"pk": {"S": "q-1"}, "n": {"N": "7"}})  # (2 + 3) + (1 + 2)
    8
    """
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(v) for name, v in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / KIB))


def read_units(size: int, *, consistent: bool) -> float:
    units = max(1, math.ceil(size / READ_UNIT))
    return float(units) if consistent else units / 2


# -- tables -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexShape:
    name: str
    partition_key: str
    sort_key: str | None
    projection: str  # ALL | KEYS_ONLY | INCLUDE
    non_key_attributes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableShape:
    """A table's keys, indexes and stream, as ``DescribeTable`` reports them."""

    name: str
    partition_key: str
    sort_key: str | None
    indexes: tuple[IndexShape, ...] = ()
    stream: str | None = None

    @classmethod
    def from_description(cls, table: dict[str, Any]) -> TableShape:
        def keys(schema: list[dict[str, str]]) -> tuple[str, str | None]:
            hash_key = next(k["AttributeName"] for k in schema if k["KeyType"] == "HASH")
            range_key = next((k["AttributeName"] for k in schema if k["KeyType"] == "RANGE"), None)
            return hash_key, range_key

        pk, sk = keys(table["KeySchema"])
        indexes = []
        for index in table.get("GlobalSecondaryIndexes", []):
            ipk, isk = keys(index["KeySchema"])
            projection = index.get("Projection", {})
            indexes.append(
                IndexShape(
                    index["IndexName"],
                    ipk,
                    isk,
                    projection.get("ProjectionType", "ALL"),
                    tuple(projection.get("NonKeyAttributes", ())),
                )
            )
        stream = table.get("StreamSpecification") or {}
        return cls(
            table["TableName"],
            pk,
            sk,
            tuple(indexes),
            stream.get("StreamViewType") if stream.get("StreamEnabled") else None,
        )

    def key_of(self, item: dict[str, Any]) -> dict[str, Any]:
        names = [self.partition_key] + ([self.sort_key] if self.sort_key else [])
        return {n: item[n] for n in names if n in item}

    def index(self, name: str) -> IndexShape:
        return next(i for i in self.indexes if i.name == name)

    def projected(self, index: IndexShape, item: dict[str, Any]) -> dict[str, Any]:
        """The index entry an item makes: what the index projects of it."""
        if index.projection == "ALL":
            return dict(item)
        names = {self.partition_key, index.partition_key}
        names |= {n for n in (self.sort_key, index.sort_key) if n}
        if index.projection == "INCLUDE":
            names |= set(index.non_key_attributes)
        return {n: v for n, v in item.items() if n in names}

    @staticmethod
    def in_index(index: IndexShape, item: dict[str, Any] | None) -> bool:
        if not item or index.partition_key not in item:
            return False
        return index.sort_key is None or index.sort_key in item


def key_text(value: dict[str, Any] | None) -> str:
    """A partition key value as text (``S``, ``N`` or ``B``)."""
    if not value:
        return "?"
    (_, inner), *_ = value.items()
    return inner.hex() if isinstance(inner, bytes) else str(inner)


# -- calls --------------------------------------------------------------------------------------


@dataclass
class Usage:
    """Request units charged to one partition (``table`` or ``table/index``) by one call."""

    where: str
    partition: str
    wru: float = 0.0
    rru: float = 0.0
    item_bytes: int = 0


@dataclass
class Call:
    service: str
    action: str
    function: str
    question: str | None
    target: str = ""  # table, queue name, topic, schedule group
    ok: bool = True
    usage: list[Usage] = field(default_factory=list)
    billable: int = 1  # requests as billed (64 KiB chunks for SQS and SNS)
    messages: int = 0  # messages received (ReceiveMessage) or sent (Publish, SendMessageBatch, PublishBatch)
    schedule_lifetime: float | None = None  # CreateSchedule: seconds from now to its at() time
    at: float = field(default_factory=time.time)

    @property
    def name(self) -> str:
        return f"{self.service}.{self.action}"


_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")
_KEY_EQ = re.compile(r"(#?[A-Za-z0-9_.\-]+)\s*=\s*(:[A-Za-z0-9_]+)")


def _metered(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a pool thread's work for an invocation, adding the CPU it spends to the invocation's meter."""
    started = time.thread_time()
    try:
        return fn(*args, **kwargs)
    finally:
        spent = hook_seconds.get()
        if spent is not None:
            spent.worker_cpu += time.thread_time() - started


def _payload_chunks(*texts: Any) -> int:
    size = sum(len(str(t).encode()) for t in texts if t is not None)
    return max(1, math.ceil(size / (64 * KIB)))


class CallRecorder:
    """Count every AWS call made by clients created while installed.

    Parameters
    ----------
    side_client:
        Builds the unrecorded DynamoDB client that reads images around writes (called once, with
        recording suspended).

    Examples
    --------
    >>> recorder = CallRecorder(lambda: boto3.client("dynamodb"))  # doctest: +SKIP
    >>> with recorder.installed():  # doctest: +SKIP
    ...     run_the_stack()
    >>> recorder.calls  # doctest: +SKIP
    """

    def __init__(self, side_client: Any) -> None:
        self._make_side = side_client
        self._side: Any = None
        self._tables: dict[str, TableShape] = {}
        self._lock = threading.Lock()
        self._local = threading.local()
        self.calls: list[Call] = []

    # -- installing -----------------------------------------------------------------------------

    @contextmanager
    def installed(self) -> Iterator[CallRecorder]:
        import botocore.session

        original = botocore.session.Session.create_client
        recorder = self

        def create_client(session: Any, *args: Any, **kwargs: Any) -> Any:
            client = original(session, *args, **kwargs)
            if not getattr(recorder._local, "suspended", False):
                recorder.attach(client)
            return client

        # A fan-out's worker threads (the composite announcer's pool) work for the invocation that
        # submitted them: they run in a copy of its context, so their calls are counted as its.
        original_submit = ThreadPoolExecutor.submit

        def submit(executor: Any, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            return original_submit(executor, contextvars.copy_context().run, _metered, fn, *args, **kwargs)

        botocore.session.Session.create_client = create_client  # type: ignore[method-assign,assignment]
        ThreadPoolExecutor.submit = submit  # type: ignore[method-assign]
        try:
            yield self
        finally:
            botocore.session.Session.create_client = original  # type: ignore[method-assign]
            ThreadPoolExecutor.submit = original_submit  # type: ignore[method-assign]

    def attach(self, client: Any) -> None:
        """Record ``client``'s calls (clients created while installed are attached already)."""
        # The API parameters, after boto3's own handlers (more specific event names run first) have
        # turned a resource's Python values into DynamoDB's wire types.
        client.meta.events.register("before-parameter-build", self._params)
        client.meta.events.register("before-call", self._before)
        client.meta.events.register("after-call", self._after)

    @contextmanager
    def suspended(self) -> Iterator[None]:
        previous = getattr(self._local, "suspended", False)
        self._local.suspended = True
        try:
            yield
        finally:
            self._local.suspended = previous

    def side(self) -> Any:
        with self._lock:
            if self._side is None:
                with self.suspended():
                    self._side = self._make_side()
            return self._side

    def table(self, name: str) -> TableShape:
        with self._lock:
            shape = self._tables.get(name)
        if shape is None:
            description = self.side().describe_table(TableName=name)["Table"]
            shape = TableShape.from_description(description)
            with self._lock:
                self._tables[name] = shape
        return shape

    def tables(self) -> dict[str, TableShape]:
        with self._lock:
            return dict(self._tables)

    def clear(self) -> None:
        with self._lock:
            self.calls = []

    # -- the hooks ------------------------------------------------------------------------------

    @staticmethod
    def _params(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["capacity_params"] = params

    @contextmanager
    def _timed(self) -> Iterator[None]:
        started = time.perf_counter()
        started_cpu = time.thread_time()
        try:
            yield
        finally:
            spent = hook_seconds.get()
            if spent is not None:
                with self._lock:
                    spent.wall += time.perf_counter() - started
                    spent.cpu += time.thread_time() - started_cpu

    def _before(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        if getattr(self._local, "suspended", False) or "capacity_params" not in context:
            return
        with self._timed():
            self._open(model, context)

    def _open(self, model: Any, context: dict[str, Any]) -> None:
        params = context["capacity_params"]
        service = model.service_model.service_name
        call = Call(
            service=service,
            action=model.name,
            function=current_function.get() or "local stack",
            question=current_question.get(),
        )
        context["capacity_call"] = call
        if service == "dynamodb":
            context["capacity_before"] = self._images(model.name, params)
        # After the recorder's own reads: from here the request is the handler's.
        context["capacity_sent"] = time.perf_counter()

    def _after(
        self, http_response: Any, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any
    ) -> None:
        call: Call | None = context.pop("capacity_call", None)
        if call is None:
            return
        answered = time.perf_counter()
        with self._timed():
            self._close(call, http_response, parsed, context)
        spent = hook_seconds.get()
        if spent is not None:
            sent = float(context.pop("capacity_sent", answered))
            with self._lock:
                spent.timed.append((call.name, sent, answered))

    def _close(self, call: Call, http_response: Any, parsed: dict[str, Any], context: dict[str, Any]) -> None:
        params = context.pop("capacity_params", {})
        call.ok = getattr(http_response, "status_code", 200) < 300
        try:
            if call.service == "dynamodb":
                before = context.pop("capacity_before", [])
                self._dynamodb(call, params, parsed, before)
            elif call.service == "sqs":
                self._sqs(call, params, parsed)
            elif call.service == "sns":
                call.target = str(params.get("TopicArn") or params.get("TargetArn") or "").rsplit(":", 1)[-1]
                if call.action == "PublishBatch":
                    entries = params.get("PublishBatchRequestEntries", [])
                    call.messages = len(entries)
                    call.billable = _payload_chunks(
                        *(part for e in entries for part in (e.get("Message"), e.get("MessageAttributes")))
                    )
                else:
                    call.messages = 1
                    call.billable = _payload_chunks(params.get("Message"), params.get("MessageAttributes"))
            elif call.service == "scheduler":
                self._scheduler(call, params)
        finally:
            spent = hook_seconds.get()
            with self._lock:
                self.calls.append(call)
                if spent is not None:
                    spent.calls.append(call.name)

    # -- SQS and Scheduler ----------------------------------------------------------------------

    @staticmethod
    def _sqs(call: Call, params: dict[str, Any], parsed: dict[str, Any]) -> None:
        call.target = str(params.get("QueueUrl", "")).rsplit("/", 1)[-1]
        if call.action == "SendMessage":
            call.billable = _payload_chunks(params.get("MessageBody"), params.get("MessageAttributes"))
        elif call.action == "SendMessageBatch":
            entries = params.get("Entries", [])
            call.messages = len(entries)
            call.billable = _payload_chunks(
                *(part for e in entries for part in (e.get("MessageBody"), e.get("MessageAttributes")))
            )
        elif call.action == "ReceiveMessage":
            messages = parsed.get("Messages") or []
            call.messages = len(messages)
            call.billable = _payload_chunks(*(m.get("Body") for m in messages))

    @staticmethod
    def _scheduler(call: Call, params: dict[str, Any]) -> None:
        call.target = str(params.get("GroupName") or "default")
        if call.action == "CreateSchedule":
            match = _AT.match(str(params.get("ScheduleExpression", "")).strip())
            if match:
                from datetime import UTC, datetime

                at = datetime.fromisoformat(match.group(1)).replace(tzinfo=UTC).timestamp()
                call.schedule_lifetime = max(0.0, at - call.at)

    # -- DynamoDB -------------------------------------------------------------------------------

    def _writes(self, action: str, params: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
        """(kind, table, key) of every item a write touches; kind is put/update/delete/check."""
        if action in ("PutItem", "UpdateItem", "DeleteItem"):
            table = params["TableName"]
            key = params["Key"] if "Key" in params else self.table(table).key_of(params["Item"])
            return [(action, table, key)]
        if action == "TransactWriteItems":
            found = []
            for entry in params.get("TransactItems", []):
                (kind, body), *_ = entry.items()
                table = body["TableName"]
                key = body["Key"] if "Key" in body else self.table(table).key_of(body["Item"])
                found.append((kind, table, key))
            return found
        if action == "BatchWriteItem":
            found = []
            for table, requests in params.get("RequestItems", {}).items():
                for request in requests:
                    if "PutRequest" in request:
                        found.append(("Put", table, self.table(table).key_of(request["PutRequest"]["Item"])))
                    else:
                        found.append(("Delete", table, request["DeleteRequest"]["Key"]))
            return found
        return []

    def _get(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        try:
            item: dict[str, Any] | None = (
                self.side().get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
            )
        except Exception:  # a table the side client cannot read: the sizes stay unknown (0)
            return None
        return item

    def _images(self, action: str, params: dict[str, Any]) -> list[dict[str, Any] | None]:
        return [self._get(table, key) for _, table, key in self._writes(action, params)]

    def _dynamodb(
        self, call: Call, params: dict[str, Any], parsed: dict[str, Any], before: list[dict[str, Any] | None]
    ) -> None:
        action = call.action
        writes = self._writes(action, params)
        if writes:
            call.target = ",".join(sorted({t for _, t, _ in writes}))
            factor = 2 if action.startswith("Transact") else 1
            for (kind, table, key), old in zip(writes, before, strict=True):
                new = self._get(table, key) if call.ok else old
                self._charge_write(call, table, kind, key, old, new, factor)
            return
        if action in ("GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"):
            self._charge_read(call, params, parsed)

    def _charge_write(
        self,
        call: Call,
        table: str,
        kind: str,
        key: dict[str, Any],
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
        factor: int,
    ) -> None:
        shape = self.table(table)
        size = max(item_size(old), item_size(new))
        partition = key_text(key.get(shape.partition_key))
        call.usage.append(Usage(table, partition, wru=factor * write_units(size), item_bytes=size))
        if not call.ok or kind in ("ConditionCheck",):
            return
        for index in shape.indexes:
            self._charge_index(call, shape, index, old, new)

    @staticmethod
    def _charge_index(
        call: Call,
        shape: TableShape,
        index: IndexShape,
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
    ) -> None:
        where = f"{shape.name}/{index.name}"
        was, now = shape.in_index(index, old), shape.in_index(index, new)
        old_entry = shape.projected(index, old) if was and old else {}
        new_entry = shape.projected(index, new) if now and new else {}

        def put(entry: dict[str, Any]) -> None:
            size = item_size(entry)
            call.usage.append(
                Usage(where, key_text(entry.get(index.partition_key)), wru=write_units(size), item_bytes=size)
            )

        if was and now:
            same_keys = all(
                old_entry.get(k) == new_entry.get(k) for k in (index.partition_key, index.sort_key) if k
            )
            if same_keys:
                if old_entry != new_entry:
                    size = max(item_size(old_entry), item_size(new_entry))
                    partition = key_text(new_entry.get(index.partition_key))
                    call.usage.append(Usage(where, partition, wru=write_units(size), item_bytes=size))
                return
            put(old_entry)  # the delete of the old entry, sized as it was
            put(new_entry)
        elif was:
            put(old_entry)
        elif now:
            put(new_entry)

    def _charge_read(self, call: Call, params: dict[str, Any], parsed: dict[str, Any]) -> None:
        action = call.action
        if action == "GetItem":
            table = params["TableName"]
            call.target = table
            shape = self.table(table)
            item = self._get(table, params["Key"]) if "ProjectionExpression" in params else parsed.get("Item")
            size = item_size(item)
            consistent = bool(params.get("ConsistentRead"))
            partition = key_text(params["Key"].get(shape.partition_key))
            call.usage.append(
                Usage(table, partition, rru=read_units(size, consistent=consistent), item_bytes=size)
            )
        elif action in ("Query", "Scan"):
            table = params["TableName"]
            call.target = table
            shape = self.table(table)
            index_name = params.get("IndexName")
            index = shape.index(index_name) if index_name else None
            items = parsed.get("Items") or []
            sizes = 0
            for item in items:
                full = self._get(table, shape.key_of(item)) or item
                sizes += item_size(shape.projected(index, full) if index else full)
            consistent = bool(params.get("ConsistentRead")) and index is None
            where = f"{table}/{index_name}" if index_name else table
            hash_key = index.partition_key if index else shape.partition_key
            partition = "(scan)" if action == "Scan" else self._query_partition(params, hash_key)
            call.usage.append(
                Usage(where, partition, rru=read_units(sizes, consistent=consistent), item_bytes=sizes)
            )
        elif action == "BatchGetItem":
            for table, request in params.get("RequestItems", {}).items():
                shape = self.table(table)
                found = {
                    key_text(i.get(shape.partition_key)): i
                    for i in (parsed.get("Responses") or {}).get(table, [])
                }
                for key in request.get("Keys", []):
                    partition = key_text(key.get(shape.partition_key))
                    size = item_size(found.get(partition))
                    consistent = bool(request.get("ConsistentRead"))
                    call.usage.append(
                        Usage(table, partition, rru=read_units(size, consistent=consistent), item_bytes=size)
                    )
            call.target = ",".join(sorted(params.get("RequestItems", {})))
        elif action == "TransactGetItems":
            tables = []
            for entry, response in zip(
                params.get("TransactItems", []), parsed.get("Responses") or [{}] * 100, strict=False
            ):
                body = entry["Get"]
                shape = self.table(body["TableName"])
                tables.append(shape.name)
                size = item_size(response.get("Item"))
                partition = key_text(body["Key"].get(shape.partition_key))
                call.usage.append(
                    Usage(shape.name, partition, rru=2 * read_units(size, consistent=True), item_bytes=size)
                )
            call.target = ",".join(sorted(set(tables)))

    @staticmethod
    def _query_partition(params: dict[str, Any], hash_key: str) -> str:
        names = params.get("ExpressionAttributeNames") or {}
        values = params.get("ExpressionAttributeValues") or {}
        for name, placeholder in _KEY_EQ.findall(str(params.get("KeyConditionExpression", ""))):
            if names.get(name, name) == hash_key and placeholder in values:
                return key_text(values[placeholder])
        legacy = (params.get("KeyConditions") or {}).get(hash_key)
        if legacy and legacy.get("AttributeValueList"):
            return key_text(legacy["AttributeValueList"][0])
        return "?"


def round_trips(timed: list[tuple[str, float, float]]) -> tuple[tuple[str, ...], ...]:
    """Calls grouped into the round trips a caller waited for one after another.

    Calls whose time on the wire overlaps (sent before another was answered) were made at once
    and cost one round trip; the rest follow each other.

    Examples
    --------
    >>> round_trips([("a", 0.0, 1.0), ("b", 0.5, 2.0), ("c", 2.5, 3.0)])
    (('a', 'b'), ('c',))
    """
    rounds: list[list[str]] = []
    until = float("-inf")
    for name, sent, answered in sorted(timed, key=lambda call: call[1]):
        if rounds and sent < until:
            rounds[-1].append(name)
            until = max(until, answered)
        else:
            rounds.append([name])
            until = answered
    return tuple(tuple(names) for names in rounds)
