"""Signed requests: one HMAC scheme for every caller that holds a shared secret.

A request is signed with three headers:

- ``X-Wait-Key-Id: <key id>``: which secret signed it (lets a receiver hold several and rotate);
- ``X-Wait-Request-Timestamp: <unix seconds>``;
- ``X-Wait-Signature: v0=<hex>``: HMAC-SHA256, keyed with the secret, of the string

  ``v0:{timestamp}:{METHOD}:{path}:{If-Match or ''}:{raw body}``

``path`` is relative to the API's base URL, without a stage prefix, with the query string when
there is one (``/questions/abc/reply``, ``/questions?status=raised``). Method, path and
``If-Match`` are signed so that nothing can be swapped under a signature: not the route, not the
question, not the digest the answer is bound to. The body is the exact bytes sent, never a
re-serialized copy.

A receiver refuses a timestamp more than five minutes from its clock and compares in constant
time (:func:`verify`); the deployed api also remembers each signature for that window, so a
captured request cannot be replayed. Stdlib only.

Examples
--------
>>> sig = sign("s3cret", 1700000000, "POST", "/questions/q1/reply", b'{"answer":1}', if_match='"d1"')
>>> verify("s3cret", 1700000000, sig, "POST", "/questions/q1/reply", b'{"answer":1}',
...        if_match='"d1"', now=1700000100)
True
>>> verify("s3cret", 1700000000, sig, "POST", "/questions/q1/reply", b'{"answer":1}',
...        if_match='"d2"', now=1700000100)
False
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time

__all__ = [
    "KEY_ID_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "TOLERANCE_SECONDS",
    "VERSION",
    "parse_timestamp",
    "sign",
    "signed_headers",
    "string_to_sign",
    "verify",
]

KEY_ID_HEADER = "X-Wait-Key-Id"
TIMESTAMP_HEADER = "X-Wait-Request-Timestamp"
SIGNATURE_HEADER = "X-Wait-Signature"
VERSION = "v0"
TOLERANCE_SECONDS = 300
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")


def _key(secret: str | bytes) -> bytes:
    return secret.encode("utf-8") if isinstance(secret, str) else secret


def parse_timestamp(value: object) -> int | None:
    """Unix seconds from a header value: ASCII digits only (no sign, space, exponent); else ``None``.

    Examples
    --------
    >>> parse_timestamp("1700000000"), parse_timestamp(" 1"), parse_timestamp("1e9"), parse_timestamp("١٢")
    (1700000000, None, None, None)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and _TIMESTAMP.fullmatch(value):
        return int(value)
    return None


def string_to_sign(
    timestamp: int | str, method: str, path: str, body: bytes, if_match: str | None = None
) -> bytes:
    """The bytes the signature is taken over: ``v0:{timestamp}:{METHOD}:{path}:{If-Match or ''}:{body}``.

    Examples
    --------
    >>> string_to_sign(1, "post", "/questions/q1/reply", b"{}", '"d1"')
    b'v0:1:POST:/questions/q1/reply:"d1":{}'
    >>> string_to_sign(1, "GET", "/questions?status=raised", b"")
    b'v0:1:GET:/questions?status=raised::'
    """
    head = f"{VERSION}:{timestamp}:{method.upper()}:{path}:{if_match or ''}:"
    return head.encode("utf-8") + body


def sign(
    secret: str | bytes,
    timestamp: int | str,
    method: str,
    path: str,
    body: bytes,
    *,
    if_match: str | None = None,
) -> str:
    """The ``X-Wait-Signature`` value: ``v0=`` + hex HMAC-SHA256 of :func:`string_to_sign`.

    Examples
    --------
    >>> sign("k", 1, "GET", "/questions", b"").startswith("v0=")
    True
    """
    message = string_to_sign(timestamp, method, path, body, if_match)
    return f"{VERSION}=" + hmac.new(_key(secret), message, hashlib.sha256).hexdigest()


def verify(
    secret: str | bytes,
    timestamp: object,
    signature: object,
    method: object,
    path: object,
    body: object,
    *,
    if_match: object = None,
    now: float | None = None,
    tolerance: int = TOLERANCE_SECONDS,
) -> bool:
    """Whether ``signature`` signs this request at ``timestamp`` with ``secret``.

    ``False`` for anything malformed (a missing or non-numeric timestamp, a signature that is not
    ``v0=`` and 64 lowercase hex digits, non-ASCII text, a body that is not bytes), for a
    timestamp more than ``tolerance`` seconds from ``now`` either way, and for a signature that
    differs (compared in constant time). Never raises on its inputs.

    Examples
    --------
    >>> sig = sign("k", 10, "GET", "/questions", b"")
    >>> verify("k", "10", sig, "GET", "/questions", b"", now=10)
    True
    >>> verify("k", "10", "v0=ü", "GET", "/questions", b"", now=10)
    False
    >>> verify("k", "10", sig, "GET", "/questions", b"", now=10 + 301)
    False
    """
    sent_at = parse_timestamp(timestamp)
    if sent_at is None or not isinstance(signature, str) or not _SIGNATURE.fullmatch(signature):
        return False
    if not isinstance(method, str) or not isinstance(path, str) or not isinstance(body, bytes | bytearray):
        return False
    if if_match is not None and not isinstance(if_match, str):
        return False
    if not isinstance(secret, str | bytes) or not secret:
        return False
    current = time.time() if now is None else now
    if abs(current - sent_at) > tolerance:
        return False
    try:
        expected = sign(secret, sent_at, method, path, bytes(body), if_match=if_match)
    except UnicodeEncodeError:  # a lone surrogate in the path or If-Match cannot be what was signed
        return False
    return hmac.compare_digest(expected.encode("ascii"), signature.encode("ascii"))


def signed_headers(
    key_id: str,
    secret: str | bytes,
    method: str,
    path: str,
    body: bytes,
    *,
    if_match: str | None = None,
    now: float | None = None,
) -> dict[str, str]:
    """The three headers that sign a request (send ``If-Match`` yourself when you sign one).

    Examples
    --------
    >>> sorted(signed_headers("k1", "s", "GET", "/questions", b"", now=1700000000))
    ['X-Wait-Key-Id', 'X-Wait-Request-Timestamp', 'X-Wait-Signature']
    """
    stamp = int(time.time() if now is None else now)
    return {
        KEY_ID_HEADER: key_id,
        TIMESTAMP_HEADER: str(stamp),
        SIGNATURE_HEADER: sign(secret, stamp, method, path, body, if_match=if_match),
    }
