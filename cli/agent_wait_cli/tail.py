"""``agent-wait tail``: print envelopes as they arrive on an SQS queue.

The queue is the outbox (FIFO) or any queue subscribed to the ``wait-created`` topic, with raw
delivery or without (an SNS notification wrapper is unwrapped).
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from agent_wait.envelope import EVENT_TYPES
from agent_wait.events import RESOLUTION_TYPES
from agent_wait_cli import render
from agent_wait_cli.client import ApiConnectionError, UsageError, is_loopback

if TYPE_CHECKING:
    import argparse


def unwrap(body: str) -> Any:
    """The envelope in a message body: raw JSON, or inside an SNS notification.

    Examples
    --------
    >>> unwrap('{"Type": "Notification", "Message": "{\\\\"type\\\\": \\\\"wait.created\\\\"}"}')
    {'type': 'wait.created'}
    >>> unwrap('{"type": "wait.created"}')
    {'type': 'wait.created'}
    """
    try:
        value = json.loads(body)
    except ValueError:
        return body
    if (
        isinstance(value, Mapping)
        and value.get("Type") == "Notification"
        and isinstance(value.get("Message"), str)
    ):
        try:
            return json.loads(value["Message"])
        except ValueError:
            return value["Message"]
    return value


def endpoint_for(queue_url: str, endpoint_url: str | None) -> str | None:
    """The SQS endpoint to call: given, or the queue URL's origin when it is on loopback (moto).

    Examples
    --------
    >>> endpoint_for("http://127.0.0.1:5000/123456789012/agent-wait-outbox.fifo", None)
    'http://127.0.0.1:5000'
    >>> endpoint_for("https://sqs.eu-west-1.amazonaws.com/1/q", None) is None
    True
    """
    if endpoint_url:
        return endpoint_url
    if is_loopback(queue_url):
        parts = urllib.parse.urlsplit(queue_url)
        return f"{parts.scheme}://{parts.netloc}"
    return None


def check_queue_url(queue_url: str) -> str:
    """``queue_url`` if it looks like an SQS queue URL; a :class:`UsageError` saying what to pass otherwise.

    Examples
    --------
    >>> check_queue_url("http://127.0.0.1:5000/123456789012/agent-wait-subscriber")
    'http://127.0.0.1:5000/123456789012/agent-wait-subscriber'
    >>> check_queue_url("agent-wait-outbox.fifo")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agent_wait_cli.client.UsageError: --queue-url 'agent-wait-outbox.fifo' is not a queue URL: ...
    """
    parts = urllib.parse.urlsplit(queue_url)
    segments = [s for s in parts.path.split("/") if s]
    if parts.scheme not in {"http", "https"} or not parts.netloc or len(segments) != 2:
        raise UsageError(
            f"--queue-url {queue_url!r} is not a queue URL: pass the full URL, like the "
            "http://127.0.0.1:PORT/123456789012/agent-wait-subscriber that `agent-wait local` prints, "
            "or https://sqs.REGION.amazonaws.com/ACCOUNT/NAME"
        )
    return queue_url


KNOWN_TYPES: tuple[str, ...] = (*EVENT_TYPES, *RESOLUTION_TYPES)


def parse_types(values: list[str] | None) -> frozenset[str] | None:
    """The event types ``--type`` asked for (repeated or comma separated); ``None``: every type.

    Examples
    --------
    >>> sorted(parse_types(["wait.answered,thread.failed", "wait.created"]))
    ['thread.failed', 'wait.answered', 'wait.created']
    >>> parse_types(None) is None
    True
    >>> parse_types(["wait.anwsered"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agent_wait_cli.client.UsageError: --type 'wait.anwsered' is not an event type; one of wait.created, ...
    """
    if not values:
        return None
    types = {part.strip() for value in values for part in value.split(",") if part.strip()}
    for type_ in sorted(types):
        if type_ not in KNOWN_TYPES:
            raise UsageError(f"--type {type_!r} is not an event type; one of {', '.join(KNOWN_TYPES)}")
    return frozenset(types)


def follow(
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
    *,
    client: Any = None,
    stop: threading.Event | None = None,
    sleep: Callable[[float], Any] | None = None,
) -> int:
    """Receive, print and (unless ``--peek``) delete envelopes until stopped."""
    stop = stop or threading.Event()
    sleep = sleep or stop.wait
    check_queue_url(args.queue_url)
    types = parse_types(getattr(args, "type", None))
    endpoint = endpoint_for(args.queue_url, args.endpoint_url)
    local = endpoint is not None and is_loopback(endpoint)
    if client is None:
        try:
            import boto3
        except ImportError:
            raise UsageError("tail needs boto3: pip install 'agent-wait[aws]'") from None
        kwargs: dict[str, Any] = {"endpoint_url": endpoint}
        region = args.region or _region_of(args.queue_url)
        if region:
            kwargs["region_name"] = region
        if local:
            # moto accepts any credentials; never send real ones to a local endpoint.
            kwargs |= {"aws_access_key_id": "local", "aws_secret_access_key": "local"}
            kwargs.setdefault("region_name", "us-east-1")
        client = boto3.client("sqs", **kwargs)
    # Long polls would hold the local moto server (one request at a time) for their whole wait.
    wait_seconds = 0 if local else 20
    seen: set[str] = set()
    printed = 0
    while not stop.is_set():
        try:
            received = client.receive_message(
                QueueUrl=args.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=wait_seconds
            )
        except Exception as exc:
            raise ApiConnectionError(f"cannot receive from {args.queue_url}: {exc}") from None
        messages = received.get("Messages") or []
        fresh = [m for m in messages if m["MessageId"] not in seen]
        for message in fresh:
            seen.add(message["MessageId"])
            envelope = unwrap(message.get("Body") or "")
            wanted = types is None or (isinstance(envelope, Mapping) and envelope.get("type") in types)
            if not wanted:
                if not args.peek:
                    client.delete_message(QueueUrl=args.queue_url, ReceiptHandle=message["ReceiptHandle"])
                continue
            if args.json:
                out.write(json.dumps(envelope, ensure_ascii=False) + "\n")
            elif isinstance(envelope, Mapping):
                out.write(render.envelope_line(envelope) + "\n")
            else:
                out.write(str(envelope) + "\n")
            out.flush()
            if not args.peek:
                client.delete_message(QueueUrl=args.queue_url, ReceiptHandle=message["ReceiptHandle"])
            printed += 1
            if args.max is not None and printed >= args.max:
                return 0
        if not fresh:
            if args.once:
                return 0
            sleep(1.0 if local else 0.0)
    return 0


def _region_of(queue_url: str) -> str | None:
    host = urllib.parse.urlsplit(queue_url).hostname or ""
    parts = host.split(".")
    if len(parts) >= 4 and parts[0] == "sqs" and parts[-2:] == ["amazonaws", "com"]:
        return parts[1]
    return None
