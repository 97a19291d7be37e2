"""A signed, retried webhook announcer.

The request is ``POST <url>`` with the envelope JSON as body and these headers:

- ``X-Wait-Signature: v0=<hex>`` and ``X-Wait-Request-Timestamp: <unix seconds>``: the scheme of
  :mod:`agent_wait.signing`, the same every signed request to agent-wait uses. The signed string
  is ``v0:{timestamp}:POST:{path}::{raw_body}``, where ``path`` is the webhook URL's path (with its
  query string, if any) and the ``If-Match`` slot is empty;
- ``X-Wait-Dedupe-Key: wait.created:<question_id>``: consumers deduplicate on it;
- ``X-Wait-Key-Id: <key id>`` when a key id is configured (lets a receiver rotate secrets).

A receiver verifies with :func:`verify` over the exact raw body bytes and the path it was called
on, rejecting timestamps more than five minutes from its clock. Stdlib only.

Examples
--------
>>> body = b'{"type":"wait.created"}'
>>> signature = sign("s3cret", 1700000000, "POST", "/hooks/agent-wait", body)
>>> verify("s3cret", "1700000000", signature, "POST", "/hooks/agent-wait", body, now=1700000100)
True
>>> verify("s3cret", "1700000000", signature, "POST", "/hooks/agent-wait", body, now=1700000400)
False
"""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING

from agent_wait.announce.base import BaseAnnounce
from agent_wait.errors import WebhookDeliveryError
from agent_wait.signing import KEY_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign, verify

if TYPE_CHECKING:
    from agent_wait.envelope import Envelope

__all__ = [
    "DEDUPE_HEADER",
    "KEY_ID_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "WebhookAnnounce",
    "sign",
    "verify",
]

logger = logging.getLogger("agent_wait")

DEDUPE_HEADER = "X-Wait-Dedupe-Key"

Opener = Callable[[urllib.request.Request, float], int]
"""Sends a request and returns its HTTP status; raises on network errors."""

RETRYABLE_4XX = frozenset({408, 429})
"""Client errors worth retrying (request timeout, too many requests); every other 4xx is permanent."""


def is_permanent(status: int) -> bool:
    """Whether an HTTP ``status`` means retrying the same request cannot succeed.

    Examples
    --------
    >>> [is_permanent(s) for s in (400, 404, 408, 429, 500, 503)]
    [True, True, False, False, False, False]
    """
    return 400 <= status < 500 and status not in RETRYABLE_4XX


def _urlopen_status(request: urllib.request.Request, timeout: float) -> int:
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the URL is the operator's
            return int(response.status)
    except urllib.error.HTTPError as exc:
        # A non-2xx answer is a status for deliver to judge (retry or give up), not a network error.
        return int(exc.code)


class WebhookAnnounce(BaseAnnounce):
    """POST each envelope to ``url``, signed, retrying with exponential backoff.

    A network error or a non-2xx answer (5xx, 408, 429, ...) is retried after
    ``base_delay * 2**(attempt - 2)`` seconds, capped at ``max_delay`` (30 minutes), for at most
    ``max_attempts`` attempts. A 4xx other than 408 and 429 is permanent and not retried: the
    same request would be refused again. Either way ``deliver`` then raises
    :class:`~agent_wait.errors.WebhookDeliveryError`, which ``announce`` logs. Each attempt is
    signed with a fresh timestamp so a late retry still verifies.

    Parameters
    ----------
    url:
        The receiver's URL.
    secret:
        Shared HMAC secret.
    key_id:
        Sent as ``X-Wait-Key-Id`` when given.
    max_attempts, base_delay, max_delay:
        The retry schedule.
    sleep, clock:
        Injected for tests (``time.sleep`` and ``time.time`` by default).
    opener:
        ``opener(request, timeout) -> status``; urllib by default.
    timeout:
        Seconds per attempt.

    Examples
    --------
    >>> from agent_wait.envelope import Question, build_envelope
    >>> sent = []
    >>> hook = WebhookAnnounce(
    ...     "https://example.invalid/hook", "s3cret", opener=lambda req, timeout: sent.append(req) or 204
    ... )
    >>> hook.announce(build_envelope("t1", Question(question_id="q1", question="hi")))
    True
    >>> sent[0].get_header("X-wait-dedupe-key")
    'wait.created:q1'
    """

    def __init__(
        self,
        url: str,
        secret: str | bytes,
        *,
        key_id: str | None = None,
        max_attempts: int = 5,
        base_delay: float = 1.0,
        max_delay: float = 1800.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        opener: Opener | None = None,
        timeout: float = 10.0,
        name: str = "webhook",
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.url = url
        self._secret = secret.encode("utf-8") if isinstance(secret, str) else secret
        self.key_id = key_id
        self.max_attempts = max_attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._sleep = sleep
        self._clock = clock
        self._opener: Opener = opener or _urlopen_status
        self.timeout = timeout
        self.name = name

    def delay_before(self, attempt: int) -> float:
        """Seconds to wait before attempt number ``attempt`` (2, 3, ...).

        Examples
        --------
        >>> [WebhookAnnounce("u", "k").delay_before(n) for n in (2, 3, 4, 5)]
        [1.0, 2.0, 4.0, 8.0]
        """
        return float(min(self.base_delay * 2 ** (attempt - 2), self.max_delay))

    @property
    def signed_path(self) -> str:
        """The path the signature covers: the URL's path, plus ``?query`` when it has one.

        Examples
        --------
        >>> WebhookAnnounce("https://example.invalid/hooks/a?team=1", "k").signed_path
        '/hooks/a?team=1'
        """
        parts = urllib.parse.urlsplit(self.url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    def request_for(self, envelope: Envelope, body: bytes) -> urllib.request.Request:
        """The signed request for one attempt, stamped with the current clock."""
        return self.signed_request(body, envelope.dedupe_key)

    def signed_request(self, body: bytes, dedupe_key: str | None = None) -> urllib.request.Request:
        """The signed ``POST`` of the exact bytes ``body``, stamped with the current clock.

        Examples
        --------
        >>> hook = WebhookAnnounce("https://example.invalid/h", "k", key_id="k1", clock=lambda: 1700000000)
        >>> request = hook.signed_request(b"{}", "wait.created:q1")
        >>> stamp = request.get_header("X-wait-request-timestamp")
        >>> signature = request.get_header("X-wait-signature")
        >>> verify("k", stamp, signature, "POST", "/h", b"{}", now=1700000000)
        True
        >>> request.get_header("X-wait-key-id")
        'k1'
        """
        timestamp = int(self._clock())
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign(self._secret, timestamp, "POST", self.signed_path, body),
            TIMESTAMP_HEADER: str(timestamp),
        }
        if dedupe_key is not None:
            headers[DEDUPE_HEADER] = dedupe_key
        if self.key_id is not None:
            headers[KEY_ID_HEADER] = self.key_id
        return urllib.request.Request(self.url, data=body, headers=headers, method="POST")

    def post(self, body: bytes, dedupe_key: str | None = None) -> int:
        """One signed attempt: the receiver's HTTP status; raises ``OSError`` on a network error.

        For callers that schedule retries themselves (the deployed delivery function retries
        through its queue's visibility, never by sleeping).
        """
        return self._opener(self.signed_request(body, dedupe_key), self.timeout)

    def deliver(self, envelope: Envelope) -> None:
        body = envelope.to_json().encode("utf-8")
        last_error = ""
        attempt = 0
        while attempt < self.max_attempts:
            attempt += 1
            if attempt > 1:
                self._sleep(self.delay_before(attempt))
            try:
                status = self.post(body, envelope.dedupe_key)
            except OSError as exc:  # URLError, timeouts and connection errors are all OSErrors
                last_error = f"{type(exc).__name__}: {exc}"
            else:
                if 200 <= status < 300:
                    return
                last_error = f"HTTP {status}"
                if is_permanent(status):
                    break
            logger.warning(
                "webhook attempt %d/%d for %s failed: %s",
                attempt,
                self.max_attempts,
                envelope.dedupe_key,
                last_error,
                extra={"question_id": envelope.question_id, "attempt": attempt},
            )
        raise WebhookDeliveryError(
            f"webhook {self.url} failed {attempt} times; last error: {last_error}",
            attempts=attempt,
            question_id=envelope.question_id,
            thread_id=envelope.thread_id,
        )
