"""A signed, retried webhook announcer, and the helpers to sign and verify its requests.

The request is ``POST <url>`` with the envelope JSON as body and these headers:

- ``X-Wait-Signature: v0=<hex>``: HMAC-SHA256 of ``v0:{timestamp}:{raw_body}`` with the secret;
- ``X-Wait-Request-Timestamp: <unix seconds>``;
- ``X-Wait-Dedupe-Key: wait.created:<question_id>``: consumers deduplicate on it;
- ``X-Wait-Key-Id: <key id>`` when a key id is configured (lets a receiver rotate secrets).

A receiver verifies with :func:`verify` over the exact raw body bytes, rejecting timestamps
more than five minutes from its clock. Stdlib only.

Examples
--------
>>> body = b'{"type":"wait.created"}'
>>> signature = sign("s3cret", 1700000000, body)
>>> verify("s3cret", body, "1700000000", signature, now=1700000100)
True
>>> verify("s3cret", body, "1700000000", signature, now=1700000400)
False
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING

from agent_wait.announce.base import BaseAnnounce
from agent_wait.errors import WebhookDeliveryError

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

SIGNATURE_HEADER = "X-Wait-Signature"
TIMESTAMP_HEADER = "X-Wait-Request-Timestamp"
DEDUPE_HEADER = "X-Wait-Dedupe-Key"
KEY_ID_HEADER = "X-Wait-Key-Id"
TOLERANCE_SECONDS = 300

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


def _key(secret: str | bytes) -> bytes:
    return secret.encode("utf-8") if isinstance(secret, str) else secret


def sign(secret: str | bytes, timestamp: int | str, body: bytes) -> str:
    """``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{body}``.

    Examples
    --------
    >>> sign("k", 1, b"{}").startswith("v0=")
    True
    """
    base = b"v0:" + str(timestamp).encode("ascii") + b":" + body
    return "v0=" + hmac.new(_key(secret), base, hashlib.sha256).hexdigest()


def verify(
    secret: str | bytes,
    body: bytes,
    timestamp: str | int | None,
    signature: str | None,
    *,
    now: float | None = None,
    tolerance: int = TOLERANCE_SECONDS,
) -> bool:
    """Whether ``signature`` signs ``body`` at ``timestamp`` with ``secret``.

    Rejects a missing or malformed timestamp, one more than ``tolerance`` seconds from ``now``
    (replay protection), and a signature that differs (compared in constant time). ``body`` must
    be the raw request bytes, not a re-serialized copy.

    Examples
    --------
    >>> verify("k", b"{}", "1", sign("k", 1, b"{}"), now=1)
    True
    >>> verify("k", b"{ }", "1", sign("k", 1, b"{}"), now=1)
    False
    """
    if timestamp is None or signature is None:
        return False
    try:
        sent_at = int(timestamp)
    except (TypeError, ValueError):
        return False
    current = time.time() if now is None else now
    if abs(current - sent_at) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, sent_at, body), signature)


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
        self._secret = _key(secret)
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

    def request_for(self, envelope: Envelope, body: bytes) -> urllib.request.Request:
        """The signed request for one attempt, stamped with the current clock."""
        timestamp = int(self._clock())
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign(self._secret, timestamp, body),
            TIMESTAMP_HEADER: str(timestamp),
            DEDUPE_HEADER: envelope.dedupe_key,
        }
        if self.key_id is not None:
            headers[KEY_ID_HEADER] = self.key_id
        return urllib.request.Request(self.url, data=body, headers=headers, method="POST")

    def deliver(self, envelope: Envelope) -> None:
        body = envelope.to_json().encode("utf-8")
        last_error = ""
        attempt = 0
        while attempt < self.max_attempts:
            attempt += 1
            if attempt > 1:
                self._sleep(self.delay_before(attempt))
            try:
                status = self._opener(self.request_for(envelope, body), self.timeout)
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
