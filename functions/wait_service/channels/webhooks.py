"""Deployed webhooks: events from the topic, POSTed signed to the receivers a deployment names.

Each webhook (context ``webhooks``: ``{"url", "secret_name", "types"}``) has its own standard SQS
delivery queue, subscribed to the topic with raw message delivery and a filter policy on the
``type`` message attribute, so the queue only holds the events that receiver asked for. The
delivery function consumes those queues; for each message it:

1. finds the webhook by the queue the record came from (``eventSourceARN``);
2. skips an event whose ``type`` the webhook did not ask for (the filter policy already should);
   an escalation to a rung that names its own ``event_types`` is published as ``wait.escalated``
   and as each of them (a ``String.Array`` ``type``), so a webhook asking for any of them gets it;
3. POSTs the exact body it received (the envelope JSON as published), signed with the v0 scheme of
   :mod:`agent_wait.signing` (``X-Wait-Key-Id``, ``X-Wait-Request-Timestamp``,
   ``X-Wait-Signature``, through :class:`agent_wait.webhook.WebhookAnnounce`), with the secret read
   from Secrets Manager by ``secret_name`` (Powertools Parameters, cached);
4. on a 2xx, the message is done (deleted by the event source mapping);
5. on a network error, a 5xx, 408 or 429, while attempts remain: sets the message's visibility to
   the backoff delay (``ChangeMessageVisibility``) and reports it as a batch item failure, so SQS
   hands it back after the delay. Attempt ``n`` is the message's ``ApproximateReceiveCount``; the
   delay before attempt ``n + 1`` is ``base * 2**(n - 1)`` seconds capped at 30 minutes, for at
   most 5 attempts: the rule of signed callbacks (exponential backoff, up to 5 attempts, capped at
   30 minutes between tries). Nothing sleeps in the Lambda;
6. after the last attempt, or at once on a permanent answer (a 4xx other than 408 and 429: the
   same request would be refused again), sends the message to the webhooks' dead-letter queue with
   the reason in message attributes, and the message is done. The queue's redrive policy
   (``maxReceiveCount`` = 5) is the safety net when the function itself fails.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_wait.webhook import WebhookAnnounce, is_permanent
from wait_service.constants import (
    WEBHOOK_BASE_DELAY_SECONDS,
    WEBHOOK_MAX_ATTEMPTS,
    WEBHOOK_MAX_DELAY_SECONDS,
    WEBHOOK_REQUEST_TIMEOUT_SECONDS,
)
from wait_service.observability import logger

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from mypy_boto3_sqs import SQSClient

    from agent_wait.webhook import Opener

__all__ = [
    "WEBHOOKS_VARIABLE",
    "WEBHOOK_DLQ_VARIABLE",
    "DeliveryOutcome",
    "Webhook",
    "WebhookDelivery",
    "parse_webhooks",
    "retry_delay",
]

# The function's environment: the webhooks (JSON, secret names only, never values) and the DLQ.
WEBHOOKS_VARIABLE = "AGENT_WAIT_WEBHOOKS"
WEBHOOK_DLQ_VARIABLE = "AGENT_WAIT_WEBHOOK_DLQ_URL"


@dataclass(frozen=True)
class Webhook:
    """One receiver: its delivery queue, URL, secret (by name), key id and event types.

    ``types`` empty means every event the queue receives (the local stack's ``--webhook``).
    """

    queue_url: str
    url: str
    secret_name: str
    key_id: str
    types: tuple[str, ...] = ()

    @property
    def queue_name(self) -> str:
        return self.queue_url.rstrip("/").rsplit("/", 1)[-1]

    def wants(self, event_type: str | None) -> bool:
        return not self.types or event_type in self.types

    def to_dict(self) -> dict[str, Any]:
        return {
            "queue_url": self.queue_url,
            "url": self.url,
            "secret_name": self.secret_name,
            "key_id": self.key_id,
            "types": list(self.types),
        }


def parse_webhooks(value: str | None) -> tuple[Webhook, ...]:
    """The webhooks of ``AGENT_WAIT_WEBHOOKS`` (a JSON list of :meth:`Webhook.to_dict`).

    Examples
    --------
    >>> [hook] = parse_webhooks('[{"queue_url": "https://q/1/agent-wait-webhook-1", "url": "https://r/h",'
    ...                         ' "secret_name": "hooks/r", "key_id": "r", "types": ["wait.created"]}]')
    >>> hook.queue_name, hook.wants("wait.created"), hook.wants("wait.reminder")
    ('agent-wait-webhook-1', True, False)
    """
    if not value:
        return ()
    return tuple(
        Webhook(
            queue_url=str(item["queue_url"]),
            url=str(item["url"]),
            secret_name=str(item["secret_name"]),
            key_id=str(item.get("key_id") or item["secret_name"]),
            types=tuple(str(t) for t in item.get("types") or ()),
        )
        for item in json.loads(value)
    )


def retry_delay(
    attempt: int,
    *,
    base: float = WEBHOOK_BASE_DELAY_SECONDS,
    cap: float = WEBHOOK_MAX_DELAY_SECONDS,
) -> int:
    """Seconds to hide a message after its failed attempt number ``attempt`` (1, 2, ...).

    The library's schedule (:meth:`agent_wait.webhook.WebhookAnnounce.delay_before`) for the next
    attempt, in whole seconds as ``ChangeMessageVisibility`` takes them.

    Examples
    --------
    >>> [retry_delay(n) for n in (1, 2, 3, 4)]
    [300, 600, 1200, 1800]
    """
    hook = WebhookAnnounce("https://example.invalid/", b"-", base_delay=base, max_delay=cap)
    return int(hook.delay_before(attempt + 1))


@dataclass(frozen=True)
class DeliveryOutcome:
    """How one message ended: ``delivered``, ``skipped``, ``retry`` (with ``delay``) or ``dead``."""

    outcome: str
    attempt: int
    error: str = ""
    delay: int | None = None


class RetryLaterError(Exception):
    """A delivery that failed and is retried after its message's new visibility timeout."""


class WebhookDelivery:
    """Delivers SQS records from the delivery queues to their webhooks.

    Parameters
    ----------
    webhooks:
        The configured receivers (:func:`parse_webhooks`).
    sqs:
        boto3 SQS client: ``ChangeMessageVisibility`` on the delivery queues, ``SendMessage`` to the DLQ.
    dlq_url:
        The webhooks' dead-letter queue.
    get_secret:
        ``secret_name -> value`` (Powertools Parameters, cached, in the function).
    opener, clock:
        Injected for tests (urllib and ``time.time`` by default).
    max_attempts, base_delay, max_delay:
        The retry schedule (5 attempts, 300 s doubling, capped at 30 minutes).

    Examples
    --------
    >>> delivery = WebhookDelivery(hooks, sqs=sqs, dlq_url=dlq, get_secret=get)  # doctest: +SKIP
    >>> delivery.process_record(record)  # doctest: +SKIP
    DeliveryOutcome(outcome='delivered', attempt=1, error='', delay=None)
    """

    def __init__(
        self,
        webhooks: Iterable[Webhook],
        *,
        sqs: SQSClient,
        dlq_url: str,
        get_secret: Callable[[str], Any],
        opener: Opener | None = None,
        clock: Callable[[], float] = time.time,
        max_attempts: int = WEBHOOK_MAX_ATTEMPTS,
        base_delay: float = WEBHOOK_BASE_DELAY_SECONDS,
        max_delay: float = WEBHOOK_MAX_DELAY_SECONDS,
        timeout: float = WEBHOOK_REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        self.webhooks = {hook.queue_name: hook for hook in webhooks}
        self.sqs = sqs
        self.dlq_url = dlq_url
        self._get_secret = get_secret
        self._opener = opener
        self._clock = clock
        self.max_attempts = max_attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.timeout = timeout

    def webhook_for(self, record: Mapping[str, Any]) -> Webhook:
        name = str(record.get("eventSourceARN", "")).rsplit(":", 1)[-1]
        try:
            return self.webhooks[name]
        except KeyError:
            raise LookupError(f"no webhook is configured for queue {name!r}") from None

    def announcer(self, hook: Webhook) -> WebhookAnnounce:
        secret = self._get_secret(hook.secret_name)
        if isinstance(secret, bytes):
            secret = secret.decode("utf-8")
        if not isinstance(secret, str) or not secret:
            raise ValueError(f"secret {hook.secret_name!r} of webhook {hook.url} is empty")
        return WebhookAnnounce(
            hook.url,
            secret,
            key_id=hook.key_id,
            clock=self._clock,
            opener=self._opener,
            timeout=self.timeout,
            name=f"webhook {hook.url}",
        )

    def process_record(self, record: Mapping[str, Any]) -> DeliveryOutcome:
        """Deliver one record; raises :class:`RetryLaterError` (after hiding it) to have it retried."""
        hook = self.webhook_for(record)
        body = str(record["body"]).encode("utf-8")
        attempt = int((record.get("attributes") or {}).get("ApproximateReceiveCount") or 1)
        event_type, dedupe_key = _event_fields(record, body)
        log = {"webhook": hook.url, "type": event_type, "dedupe_key": dedupe_key, "attempt": attempt}
        if not any(hook.wants(name) for name in _types_of(record, event_type)):
            logger.info("webhook skips an event type it did not ask for", extra=log)
            return DeliveryOutcome("skipped", attempt)
        permanent = False
        try:
            status = self.announcer(hook).post(body, dedupe_key)
        except OSError as exc:  # URLError, timeouts and refused connections are all OSErrors
            error = f"{type(exc).__name__}: {exc}"
        else:
            if 200 <= status < 300:
                logger.info("webhook delivered", extra=log | {"status": status})
                return DeliveryOutcome("delivered", attempt)
            error = f"HTTP {status}"
            permanent = is_permanent(status)
        if permanent or attempt >= self.max_attempts:
            self.dead_letter(hook, record, attempt=attempt, error=error)
            logger.error(
                "webhook delivery gave up; the event is in the webhooks DLQ", extra=log | {"error": error}
            )
            return DeliveryOutcome("dead", attempt, error)
        delay = retry_delay(attempt, base=self.base_delay, cap=self.max_delay)
        self.sqs.change_message_visibility(
            QueueUrl=hook.queue_url, ReceiptHandle=str(record["receiptHandle"]), VisibilityTimeout=delay
        )
        logger.warning("webhook attempt failed; retried later", extra=log | {"error": error, "delay": delay})
        raise RetryLaterError(f"webhook {hook.url} attempt {attempt} failed ({error}); next in {delay} s")

    def dead_letter(self, hook: Webhook, record: Mapping[str, Any], *, attempt: int, error: str) -> None:
        """Send ``record``'s body to the DLQ with its event attributes and why it is there."""
        attributes: dict[str, Any] = {
            name: {"DataType": "String", "StringValue": str(value["stringValue"])}
            for name, value in (record.get("messageAttributes") or {}).items()
            if isinstance(value, dict) and value.get("stringValue") is not None
        }
        for name, value in (("webhook", hook.url), ("attempts", str(attempt)), ("error", error[:256])):
            attributes[name] = {"DataType": "String", "StringValue": value}
        self.sqs.send_message(
            QueueUrl=self.dlq_url, MessageBody=str(record["body"]), MessageAttributes=attributes
        )


def _event_fields(record: Mapping[str, Any], body: bytes) -> tuple[str | None, str | None]:
    """The event's ``type`` and ``dedupe_key``: from the message attributes, else from the body."""
    attributes = record.get("messageAttributes") or {}

    def attribute(name: str) -> str | None:
        value = attributes.get(name)
        return str(value["stringValue"]) if isinstance(value, dict) and value.get("stringValue") else None

    event_type, dedupe_key = attribute("type"), attribute("dedupe_key")
    listed = _listed_types(attributes.get("type"))
    if listed:
        event_type = listed[0]
    if event_type is None or dedupe_key is None:
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            event_type = event_type or (str(parsed["type"]) if parsed.get("type") else None)
            dedupe_key = dedupe_key or (str(parsed["dedupe_key"]) if parsed.get("dedupe_key") else None)
    return event_type, dedupe_key


def _listed_types(value: Any) -> list[str]:
    """The types of a ``String.Array`` ``type`` attribute (an escalation rung's own event types)."""
    if not isinstance(value, dict) or not str(value.get("dataType") or "").startswith("String.Array"):
        return []
    try:
        parsed = json.loads(str(value.get("stringValue") or ""))
    except ValueError:
        return []
    return [str(name) for name in parsed] if isinstance(parsed, list) else []


def _types_of(record: Mapping[str, Any], event_type: str | None) -> list[str | None]:
    """Every type the event was published as: ``wait.escalated`` and a rung's own event types."""
    listed = _listed_types((record.get("messageAttributes") or {}).get("type"))
    return list(listed) if listed else [event_type]
