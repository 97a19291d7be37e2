"""``agent-wait dlq``: look into the stack's dead-letter queues and send their messages back to work.

Every DLQ comes from ``wait_service.resources.dead_letter_queues()`` (the specs the stack and the
local stack are built from), found by name: ``<stack name>-<queue name>``. How a message goes back
depends on what the DLQ holds:

- a queue's DLQ (``inbox``, ``outbox``): the message is sent back to its queue as it was: body,
  message attributes and, on a FIFO queue, its ``MessageGroupId`` and ``MessageDeduplicationId``
  (so a redrive run twice is still one message), then deleted from the DLQ;
- a Lambda on-failure destination (``lifecycle``): the record's ``requestPayload`` is invoked
  again, asynchronously, on the stack's own function (never on a function the record names
  otherwise), then the record is deleted. Deployed, that is Lambda's ``Invoke`` with
  ``InvocationType=Event``; on the local stack, which has no Lambda service, a one-shot schedule
  due now, which the local clock fires into the same handler.
- the timers' DLQ (``timers``, EventBridge Scheduler's): the body is the timer's input; the
  lifecycle function is invoked with it again, the same way.
- the ledger stream's DLQ (``ledger-stream``): the record says where the failed batch is in the
  ledger's stream (``DDBStreamBatchInfo``), not what it held. The records are read back from the
  stream (``GetShardIterator`` at ``startSequenceNumber``, ``GetRecords`` up to
  ``endSequenceNumber``) and handed, in the event Lambda's mapping builds, to the stack's own
  dispatcher function with a synchronous ``Invoke``, so its consumers run with its role and
  settings. The stream keeps records 24 hours: past that they are gone and the message is refused.
  The local stack's dispatcher runs inside the ``agent-wait local`` process, which serves Lambda's
  ``Invoke`` for it on 127.0.0.1 (its ``lambda:`` line): with ``--lambda-endpoint-url`` the same
  call reaches it; without, the message is refused and kept.

SQS drops a FIFO message whose deduplication id it saw less than five minutes ago, so a message
sent that recently is refused (with the time from which it can go) rather than lost.

Looking (``list``, ``show``) receives the messages and makes them visible again at once; it
changes nothing but their receive count.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from agent_wait_cli.local.streams import lambda_record
from wait_service.resources import LOCAL_ACCOUNT, TIMERS, DeadLetterSpec, dead_letter_queues

if TYPE_CHECKING:
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient
    from mypy_boto3_sqs import SQSClient

# SQS FIFO's deduplication interval.
DEDUPLICATION_WINDOW_SECONDS = 300
# How long a look hides the messages it has seen, so that the next receive returns others.
PEEK_SECONDS = 30
# GetRecords calls one stream batch may take to read back (a batch is at most 10,000 records).
STREAM_PAGES = 100
# What DynamoDB Streams answers once a position is past its 24 hours (or the stream is gone).
STREAM_GONE = ("TrimmedDataAccessException", "ExpiredIteratorException", "ResourceNotFoundException")


class DlqError(Exception):
    """A DLQ operation that cannot be done; the message is one line for the operator."""


class Invoker(Protocol):
    """Invokes a function asynchronously, as Lambda's ``Event`` invocation type does."""

    def invoke(self, function_name: str, payload: Any) -> None: ...


class BatchInvoker(Protocol):
    """Invokes a stream consumer synchronously with a stream event; returns what the function returned."""

    def invoke_batch(self, function_name: str, event: Mapping[str, Any]) -> Any: ...


@dataclass
class LambdaInvoker:
    """Deployed: ``lambda:InvokeFunction`` with ``InvocationType=Event`` (retries and destination apply)."""

    client: Any

    def invoke(self, function_name: str, payload: Any) -> None:
        response = self.client.invoke(
            FunctionName=function_name, InvocationType="Event", Payload=json.dumps(payload).encode()
        )
        if int(response.get("StatusCode", 202)) != 202:
            raise DlqError(f"Lambda did not queue the invocation of {function_name}: {response}")

    def invoke_batch(self, function_name: str, event: Mapping[str, Any]) -> Any:
        """``InvocationType=RequestResponse``: the function's answer, or :class:`DlqError` if it raised."""
        response = self.client.invoke(
            FunctionName=function_name,
            InvocationType="RequestResponse",
            Payload=json.dumps(event, default=_lambda_json).encode(),
        )
        body = response["Payload"].read() if response.get("Payload") is not None else b""
        try:
            answer = json.loads(body) if body else None
        except ValueError:
            answer = body.decode(errors="replace")
        if response.get("FunctionError"):
            message = str(answer.get("errorMessage", "") if isinstance(answer, Mapping) else answer)
            message = (message.splitlines() or [""])[0]
            kind = answer.get("errorType", "Error") if isinstance(answer, Mapping) else "Error"
            raise DlqError(f"{function_name} failed ({response['FunctionError']}): {kind}: {message}")
        return answer


@dataclass
class LocalInvoker:
    """The local stack: a schedule due now in the timers' group; the local clock invokes the handler.

    The local stack's only way into its lifecycle handler from another process is the one AWS uses
    for timers: Scheduler. The clock retries and dead-letters it as Lambda does an ``Event`` invoke.
    """

    client: Any
    prefix: str
    now: Callable[[], float] = time.time

    def invoke(self, function_name: str, payload: Any) -> None:
        body = json.dumps(payload, sort_keys=True)
        digest = hashlib.sha256(f"{body}|{self.now()}".encode()).hexdigest()[:40]
        region = self.client.meta.region_name
        moment = datetime.fromtimestamp(self.now(), UTC).strftime("%Y-%m-%dT%H:%M:%S")
        self.client.create_schedule(
            Name=f"redrive-{digest}",
            GroupName=self.prefix + TIMERS.name,
            ScheduleExpression=f"at({moment})",
            FlexibleTimeWindow={"Mode": "OFF"},
            ActionAfterCompletion="DELETE",
            Target={
                "Arn": f"arn:aws:lambda:{region}:{LOCAL_ACCOUNT}:function:{function_name}",
                "RoleArn": f"arn:aws:iam::{LOCAL_ACCOUNT}:role/{self.prefix}scheduler",
                "Input": body,
            },
        )


@dataclass(frozen=True)
class DeadLetter:
    """One message in a DLQ (as received: :attr:`receipt` deletes or releases it)."""

    dlq: DeadLetterSpec
    message_id: str
    body: str
    receipt: str
    attributes: Mapping[str, str] = field(default_factory=dict)
    message_attributes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def sent_at(self) -> float | None:
        sent = self.attributes.get("SentTimestamp")
        return int(sent) / 1000 if sent and sent.isdigit() else None

    @property
    def group(self) -> str | None:
        return self.attributes.get("MessageGroupId")

    @property
    def deduplication_id(self) -> str | None:
        return self.attributes.get("MessageDeduplicationId")

    def payload(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return self.body

    def record(self) -> Mapping[str, Any]:
        """The Lambda destination record (``lambda-destination`` DLQs); ``{}`` if it is not one."""
        value = self.payload()
        return value if isinstance(value, Mapping) and "requestPayload" in value else {}

    def work(self) -> Any:
        """What the message asks for: a queue message's body, a record's ``requestPayload``."""
        if self.dlq.redrive == "lambda-destination":
            return self.record().get("requestPayload")
        return self.payload()

    def error(self) -> str | None:
        """Why it failed, when the message says (a destination record's response, Scheduler's
        ``ERROR_CODE``/``ERROR_MESSAGE`` attributes)."""
        code, message = (
            str(self.message_attributes.get(name, {}).get("StringValue", ""))
            for name in ("ERROR_CODE", "ERROR_MESSAGE")
        )
        if code or message:
            return f"{code or 'Error'}: {message}".strip()
        record = self.record()
        response = record.get("responsePayload")
        if isinstance(response, Mapping) and (response.get("errorType") or response.get("errorMessage")):
            return f"{response.get('errorType', 'Error')}: {response.get('errorMessage', '')}".strip()
        context = record.get("requestContext")
        if isinstance(context, Mapping) and context.get("condition"):
            return str(context["condition"])
        return None


@dataclass(frozen=True)
class Outcome:
    """What a redrive did with one message: ``redriven`` or ``refused`` (with why)."""

    letter: DeadLetter
    status: str
    detail: str = ""


class DeadLetters:
    """The DLQs of one stack: list, show and redrive their messages.

    Parameters
    ----------
    sqs:
        boto3 SQS client (on moto's endpoint for the local stack).
    prefix:
        ``<stack name>-``, the prefix of every queue and function name.
    invoker:
        Invokes a function again for a ``lambda-destination`` DLQ.
    now:
        Seconds since the epoch; injected by tests.
    streams, batch_invoker:
        DynamoDB Streams client and synchronous invoker for the ledger stream's DLQ; without them
        (the local stack) its messages are refused.
    specs:
        The DLQs; every one the resources define by default.

    Examples
    --------
    >>> invoker = LambdaInvoker(boto3.client("lambda"))  # doctest: +SKIP
    >>> dlqs = DeadLetters(boto3.client("sqs"), "agent-wait-", invoker)  # doctest: +SKIP
    >>> [(letter.dlq.name, letter.message_id) for letter in dlqs.messages()]  # doctest: +SKIP
    [('inbox', '5f0c...')]
    """

    def __init__(
        self,
        sqs: SQSClient,
        prefix: str,
        invoker: Invoker,
        *,
        now: Callable[[], float] = time.time,
        specs: Sequence[DeadLetterSpec] | None = None,
        streams: DynamoDBStreamsClient | None = None,
        batch_invoker: BatchInvoker | None = None,
    ) -> None:
        self.sqs = sqs
        self.streams = streams
        self.batch_invoker = batch_invoker
        self.prefix = prefix
        self.invoker = invoker
        self.now = now
        self.specs = tuple(specs if specs is not None else dead_letter_queues())
        self._urls: dict[str, str | None] = {}

    def url(self, queue_name: str) -> str | None:
        """The URL of ``<prefix><queue_name>``, or ``None`` when the stack has no such queue."""
        if queue_name not in self._urls:
            try:
                self._urls[queue_name] = self.sqs.get_queue_url(QueueName=self.prefix + queue_name)[
                    "QueueUrl"
                ]
            except self.sqs.exceptions.QueueDoesNotExist:
                self._urls[queue_name] = None
        return self._urls[queue_name]

    def queues(self) -> list[tuple[DeadLetterSpec, str | None, int]]:
        """Each DLQ, its URL (``None``: not deployed) and its approximate number of messages."""
        found = []
        for spec in self.specs:
            url = self.url(spec.queue_name)
            count = 0
            if url is not None:
                attributes = self.sqs.get_queue_attributes(
                    QueueUrl=url,
                    AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
                )["Attributes"]
                count = sum(int(value) for value in attributes.values())
            found.append((spec, url, count))
        return found

    def messages(self, name: str | None = None) -> list[DeadLetter]:
        """Every message of every DLQ (or of DLQ ``name``), made visible again before returning."""
        letters = self._receive_all(name)
        self._release(letters)
        return letters

    def find(self, message_id: str) -> DeadLetter:
        """The message ``message_id`` (as :meth:`messages` lists it)."""
        for letter in self.messages():
            if letter.message_id == message_id:
                return letter
        raise DlqError(f"no message {message_id} in any dead-letter queue of {self.prefix.rstrip('-')}")

    def redrive(self, message_ids: Sequence[str] | None = None, *, name: str | None = None) -> list[Outcome]:
        """Send back the messages ``message_ids`` (every message when ``None``), in their order.

        A message that cannot go (in its deduplication window, or not understood) stays in its DLQ.
        """
        letters = self._receive_all(name)
        wanted = set(message_ids) if message_ids is not None else None
        if wanted is not None:
            missing = wanted - {letter.message_id for letter in letters}
            if missing:
                self._release(letters)
                raise DlqError(
                    f"no message {', '.join(sorted(missing))} in any dead-letter queue of "
                    f"{self.prefix.rstrip('-')}"
                )
        outcomes: list[Outcome] = []
        keep: list[DeadLetter] = []
        for letter in letters:
            if wanted is not None and letter.message_id not in wanted:
                keep.append(letter)
                continue
            try:
                self._send_back(letter)
            except DlqError as exc:
                outcomes.append(Outcome(letter, "refused", str(exc)))
                keep.append(letter)
                continue
            dlq_url = self.url(letter.dlq.queue_name)
            assert dlq_url is not None
            self.sqs.delete_message(QueueUrl=dlq_url, ReceiptHandle=letter.receipt)
            outcomes.append(Outcome(letter, "redriven", self._target(letter)))
        self._release(keep)
        return outcomes

    # -- inside -------------------------------------------------------------------------------

    def _target(self, letter: DeadLetter) -> str:
        if letter.dlq.redrive == "queue":
            return f"sent to {self.prefix}{letter.dlq.source}"
        return f"invoked {self.prefix}{letter.dlq.source}"

    def _send_back(self, letter: DeadLetter) -> None:
        spec = letter.dlq
        if spec.redrive == "stream-batch":
            self._replay_batch(letter)
            return
        if spec.redrive == "lambda-destination":
            self._reinvoke(letter)
            return
        if spec.redrive == "scheduler-target":
            work = letter.payload()
            if not isinstance(work, Mapping) or "question_id" not in work:
                raise DlqError("not a timer's input (no question_id)")
            self.invoker.invoke(self.prefix + spec.source, work)
            return
        url = self.url(spec.source)
        if url is None:
            raise DlqError(f"the queue {self.prefix}{spec.source} does not exist")
        kwargs: dict[str, Any] = {"QueueUrl": url, "MessageBody": letter.body}
        if letter.message_attributes:
            kwargs["MessageAttributes"] = dict(letter.message_attributes)
        if spec.source.endswith(".fifo"):
            if not letter.group or not letter.deduplication_id:
                raise DlqError("a FIFO message without its group or deduplication id")
            sent = letter.sent_at
            if sent is not None and self.now() < sent + DEDUPLICATION_WINDOW_SECONDS:
                after = _iso(sent + DEDUPLICATION_WINDOW_SECONDS)
                raise DlqError(
                    f"sent at {_iso(sent)}: SQS would drop it as a duplicate of itself until {after}; "
                    "redrive it after that"
                )
            kwargs["MessageGroupId"] = letter.group
            kwargs["MessageDeduplicationId"] = letter.deduplication_id
        self.sqs.send_message(**kwargs)

    def _reinvoke(self, letter: DeadLetter) -> None:
        record = letter.record()
        if not record:
            raise DlqError("not a Lambda destination record (no requestPayload)")
        function = self.prefix + letter.dlq.source
        context = record.get("requestContext")
        arn = str(context.get("functionArn", "")) if isinstance(context, Mapping) else ""
        # `...:function:<name>` or `...:function:<name>:<qualifier>`: only the stack's own function.
        named = arn.split(":function:", 1)[1].split(":", 1)[0] if ":function:" in arn else function
        if named != function:
            raise DlqError(f"the record names function {named!r}, not {function!r}: not invoked")
        self.invoker.invoke(function, record["requestPayload"])

    def _replay_batch(self, letter: DeadLetter) -> None:
        """Read a failed stream batch back and hand it to the stack's dispatcher, synchronously."""
        payload = letter.payload()
        info = payload.get("DDBStreamBatchInfo") if isinstance(payload, Mapping) else None
        if not isinstance(info, Mapping):
            raise DlqError("not a stream batch's on-failure record (no DDBStreamBatchInfo)")
        arn, shard = str(info.get("streamArn", "")), str(info.get("shardId", ""))
        start, end = str(info.get("startSequenceNumber", "")), str(info.get("endSequenceNumber", ""))
        if not (start.isdigit() and end.isdigit() and shard and int(start) <= int(end)):
            raise DlqError(f"no readable position in the record (shard {shard!r}, {start!r} to {end!r})")
        # `arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>`: only a table of the
        # stack (the operator policy lets the reads reach the ledger's stream alone).
        table = arn.split(":table/", 1)[1].split("/stream/", 1)[0] if ":table/" in arn else ""
        if not arn.startswith("arn:") or not table.startswith(self.prefix):
            raise DlqError(f"the record names stream {arn!r}, not one of {self.prefix.rstrip('-')}: not read")
        if self.streams is None or self.batch_invoker is None:
            raise DlqError(
                "the local stack's dispatcher runs inside the `agent-wait local` process: pass "
                "--lambda-endpoint-url (its `lambda:` line) to hand the batch to it; not redriven"
            )
        records = self._read_batch(arn, shard, start, end)
        region = arn.split(":")[3]
        event = {"Records": [{**lambda_record(r, arn), "awsRegion": region} for r in records]}
        function = self.prefix + letter.dlq.source
        answer = self.batch_invoker.invoke_batch(function, event)
        failures = answer.get("batchItemFailures") if isinstance(answer, Mapping) else None
        if failures:
            named = ", ".join(str(f.get("itemIdentifier")) for f in failures if isinstance(f, Mapping))
            raise DlqError(f"{function} failed again on records {named}: kept")

    def _read_batch(self, arn: str, shard: str, start: str, end: str) -> list[dict[str, Any]]:
        """The records ``start``..``end`` of ``shard``; :class:`DlqError` when the stream has them no more."""
        from botocore.exceptions import ClientError

        assert self.streams is not None
        gone = (
            f"the ledger stream no longer has records {start} to {end} (it keeps them 24 hours): not redriven"
        )
        records: list[dict[str, Any]] = []
        try:
            iterator: str | None = self.streams.get_shard_iterator(
                StreamArn=arn, ShardId=shard, ShardIteratorType="AT_SEQUENCE_NUMBER", SequenceNumber=start
            )["ShardIterator"]
            for _ in range(STREAM_PAGES):
                if not iterator:
                    break
                page = self.streams.get_records(ShardIterator=iterator, Limit=1000)
                batch = [dict(record) for record in page.get("Records", [])]
                past = False
                for record in batch:
                    number = int(record["dynamodb"]["SequenceNumber"])
                    if number > int(end):
                        past = True
                        break
                    records.append(record)
                    past = number == int(end)
                if past or (not batch and records):
                    break
                iterator = page.get("NextShardIterator")
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in STREAM_GONE:
                raise DlqError(f"{gone} ({code})") from None
            raise
        # A trimmed position reads from the oldest record kept, past the batch's first.
        if not records or records[0]["dynamodb"]["SequenceNumber"] != start:
            raise DlqError(gone)
        return records

    def _receive_all(self, name: str | None) -> list[DeadLetter]:
        specs = [spec for spec in self.specs if name is None or spec.name == name]
        if name is not None and not specs:
            known = ", ".join(spec.name for spec in self.specs)
            raise DlqError(f"no dead-letter queue named {name!r} (known: {known})")
        letters: list[DeadLetter] = []
        for spec in specs:
            url = self.url(spec.queue_name)
            if url is None:
                continue
            seen: set[str] = set()
            while True:
                batch = self.sqs.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=10,
                    VisibilityTimeout=PEEK_SECONDS,
                    WaitTimeSeconds=0,
                    AttributeNames=["All"],
                    MessageAttributeNames=["All"],
                ).get("Messages", [])
                fresh = [m for m in batch if m["MessageId"] not in seen]
                if not fresh:
                    break
                for message in fresh:
                    seen.add(message["MessageId"])
                    letters.append(
                        DeadLetter(
                            dlq=spec,
                            message_id=message["MessageId"],
                            body=message.get("Body", ""),
                            receipt=message["ReceiptHandle"],
                            attributes={str(k): v for k, v in message.get("Attributes", {}).items()},
                            message_attributes=dict(message.get("MessageAttributes", {})),
                        )
                    )
        return letters

    def _release(self, letters: Sequence[DeadLetter]) -> None:
        """Make messages received by a look visible again at once."""
        for letter in letters:
            url = self.url(letter.dlq.queue_name)
            if url is None:
                continue
            try:
                self.sqs.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=letter.receipt, VisibilityTimeout=0
                )
            except self.sqs.exceptions.ReceiptHandleIsInvalid:
                pass  # deleted meanwhile


def summary(letter: DeadLetter) -> str:
    """One line on what a dead letter asks for.

    Examples
    --------
    >>> spec = next(s for s in dead_letter_queues() if s.name == "inbox")
    >>> summary(DeadLetter(spec, "m1", '{"thread_id": "t-1", "question_id": "q-1"}', "r"))
    'resume thread=t-1 question=q-1'
    """
    work = letter.work()
    if not isinstance(work, Mapping):
        return json.dumps(work, default=str)[:80]
    if letter.dlq.redrive == "stream-batch":
        info = work.get("DDBStreamBatchInfo") or {}
        if isinstance(info, Mapping):
            return (
                f"stream records {info.get('startSequenceNumber')}..{info.get('endSequenceNumber')} "
                f"({info.get('batchSize')})"
            )
    if letter.dlq.redrive in ("lambda-destination", "scheduler-target") and "timer" in work:
        return f"timer {work.get('timer')} n={work.get('n')} question={work.get('question_id')}"
    if "thread_id" in work and "question_id" in work:
        return f"resume thread={work['thread_id']} question={work['question_id']}"
    if "thread_id" in work:
        return f"start thread={work['thread_id']}"
    if "question_id" in work:
        return f"{work.get('type', 'message')} question={work['question_id']}"
    return json.dumps(work, default=str)[:80]


def _lambda_json(value: Any) -> Any:
    """What boto3 returns that JSON has not, as Lambda writes it in a stream event."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()  # a binary attribute (`B`, `BS`)
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, set):
        return sorted(value)
    return str(value)  # Decimal


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso(seconds: float | None) -> str | None:
    """Seconds since the epoch as ISO 8601 UTC (``None`` stays ``None``)."""
    return None if seconds is None else _iso(seconds)
