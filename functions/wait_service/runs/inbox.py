"""Messages on the inbox FIFO queue and the sender the api uses to enqueue them.

``MessageGroupId = thread_id`` keeps one thread's runs in order and never in two invocations at
once; the deduplication id makes a resend of the same resume harmless (docs/internals.md).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import TYPE_CHECKING, TypedDict

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from ulid import ULID

from agent_wait import exact_json
from wait_service.clients import CLIENT_CONFIG
from wait_service.limits import ExactJson  # noqa: TC001 - pydantic reads it at runtime

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mypy_boto3_sqs import SQSClient


class OutgoingMessage(TypedDict):
    """A message's ``SendMessage`` fields, as :meth:`Inbox.send_batch` takes them."""

    MessageBody: str
    MessageGroupId: str
    MessageDeduplicationId: str


class StartMessage(BaseModel):
    """Start a run of the graph on a thread with ``input``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    thread_id: str = Field(min_length=1)
    # Numbers with a fraction are Decimals: the graph runs with the digits the caller sent.
    input: ExactJson = None
    # Names this run so that a redelivery of the message is recognised by the runner; messages
    # written by hand may leave it out and lose only that protection.
    run_id: str | None = None


class ResumeMessage(BaseModel):
    """Resume a thread parked on ``question_id`` with the answer the ledger holds for it.

    The message says *which* question to resume, never *what* with: the runner reads the answer
    from the ledger when it processes the message, so a message put on the queue by anyone else
    cannot choose the answer. An ``answer`` a message carries is ignored.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    thread_id: str = Field(min_length=1)
    question_id: str = Field(min_length=1)
    answer: JsonValue = Field(default=None, exclude=True, description="ignored: the ledger holds answers")


def parse_message(body: str) -> StartMessage | ResumeMessage:
    """The seed's one ``if``: a message that names a question is a resume, anything else a start.

    Examples
    --------
    >>> parse_message('{"thread_id": "t", "question_id": "q"}')
    ResumeMessage(thread_id='t', question_id='q', answer=None)
    >>> parse_message('{"thread_id": "t", "input": {"amount": 40}}')
    StartMessage(thread_id='t', input={'amount': 40}, run_id=None)

    A body that is not such a message raises :class:`ValueError` (JSON, shape, or nesting deeper
    than the parser goes); the runner consumes it as poison.
    """
    try:
        data = json.loads(body, parse_float=Decimal)
    except RecursionError as exc:
        # A body nested deeper than the parser's stack: not a message, and never one to retry.
        raise ValueError("the body is nested too deeply to be a message") from exc
    if isinstance(data, dict) and "question_id" in data:
        return ResumeMessage.model_validate(data)
    return StartMessage.model_validate(data)


class Inbox:
    """Sends start and resume messages to the inbox FIFO queue.

    Parameters
    ----------
    queue_url:
        ``AGENT_WAIT_INBOX_URL``.
    client:
        A boto3 SQS client; ``None`` creates the default one.

    Examples
    --------
    >>> inbox = Inbox("https://sqs.eu-west-1.amazonaws.com/1/agent-wait-inbox.fifo")  # doctest: +SKIP
    >>> inbox.resume("thread-1", "q-1")  # doctest: +SKIP
    """

    def __init__(self, queue_url: str, client: SQSClient | None = None) -> None:
        if client is None:
            import boto3

            client = boto3.client("sqs", config=CLIENT_CONFIG)
        self.queue_url = queue_url
        self._client = client

    def start(self, thread_id: str, input: JsonValue, *, run_id: str | None = None) -> str:
        """Enqueue a start message; returns its deduplication id (each run is a new one).

        ``run_id`` names the run (a new ULID when omitted); it is also the deduplication id, so a
        run must never be sent twice under one id.
        """
        run_id = run_id or str(ULID())
        message = StartMessage(thread_id=thread_id, input=input, run_id=run_id)
        return self._send(self._message(message, thread_id, f"run:{thread_id}:{run_id}"))

    def start_json(self, thread_id: str, input_json: str, *, run_id: str) -> str:
        """Enqueue the start of run ``run_id`` whose input is the JSON text ``input_json``, as is.

        The dispatcher sends a run's input as the ledger recorded it: the characters go on the
        queue unparsed, so no number is ever read as a float on the way.
        """
        return self._send(self.start_json_message(thread_id, input_json, run_id=run_id))

    def start_json_message(self, thread_id: str, input_json: str, *, run_id: str) -> OutgoingMessage:
        """The request fields of :meth:`start_json`'s message, for :meth:`send_batch`."""
        if not input_json.strip():
            raise ValueError("a start message needs its input as JSON text")
        head = json.dumps({"thread_id": thread_id, "run_id": run_id}, ensure_ascii=False)
        return {
            "MessageBody": f'{head[:-1]}, "input": {input_json}}}',
            "MessageGroupId": thread_id,
            "MessageDeduplicationId": f"run:{thread_id}:{run_id}",
        }

    def resume(self, thread_id: str, question_id: str) -> str:
        """Enqueue the resume for ``question_id``; a resend within the FIFO window is dropped."""
        return self._send(self.resume_message(thread_id, question_id))

    def resume_message(self, thread_id: str, question_id: str) -> OutgoingMessage:
        """The request fields of :meth:`resume`'s message, for :meth:`send_batch`."""
        return self._message(
            ResumeMessage(thread_id=thread_id, question_id=question_id), thread_id, f"resume:{question_id}"
        )

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> None:
        """Send ``messages`` (:meth:`resume_message`, :meth:`start_json_message`) in order, in
        ``SendMessageBatch`` calls that keep each thread's order (:mod:`agent_wait.aws.batches`).

        Raises :class:`agent_wait.aws.batches.PartialDelivery` naming every message not known to
        be sent; the others were.
        """
        # Imported here: only the dispatcher sends in batches, and the runner never loads it.
        from agent_wait.aws.batches import BatchEntry, send_in_batches

        send_in_batches(
            [BatchEntry.of(message, "MessageBody") for message in messages],
            lambda batch: self._client.send_message_batch(QueueUrl=self.queue_url, Entries=batch),
        )

    def delay(self, receipt_handle: str, seconds: int) -> None:
        """Make a received message visible again in ``seconds`` (a retry's backoff)."""
        self._client.change_message_visibility(
            QueueUrl=self.queue_url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds
        )

    def _send(self, message: OutgoingMessage) -> str:
        """Send one message; its deduplication id."""
        self._client.send_message(QueueUrl=self.queue_url, **message)
        return message["MessageDeduplicationId"]

    @staticmethod
    def _message(message: BaseModel, group: str, dedup_id: str) -> OutgoingMessage:
        # SQS caps both ids at 128 characters; thread and question ids are well below it.
        return {
            "MessageBody": exact_json.dumps(
                message.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=False
            ),
            "MessageGroupId": group,
            "MessageDeduplicationId": dedup_id,
        }
