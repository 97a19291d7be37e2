"""The local gateway: HTTP on 127.0.0.1 in, API Gateway REST proxy events to the api handler.

API Gateway with a ``{proxy+}`` resource hands the api Lambda one JSON event per request and turns
its JSON response back into HTTP. This module does the same on loopback so the local stack runs the
deployed api handler unchanged.

Who is calling
--------------
The responder principal lands in ``requestContext`` where the api reads it (``docs/internals.md``):

- No HMAC keys configured (the default): ``requestContext.identity.userArn`` is the
  ``X-Wait-Principal`` header, or ``local:anonymous`` without it. Anyone on this machine can claim any
  principal; that is the point of a local stack, not a security boundary.
- HMAC keys configured (``agent-wait local --hmac-key ID=SECRET``, repeatable): every request must be
  signed with the scheme of :mod:`agent_wait.signing` and ``X-Wait-Principal`` is ignored. The
  caller sends ``X-Wait-Key-Id: ID``, ``X-Wait-Request-Timestamp: <unix seconds>`` and
  ``X-Wait-Signature: v0=<hex>`` where ``<hex>`` is HMAC-SHA256(SECRET,
  ``v0:{timestamp}:{METHOD}:{path?query}:{If-Match or ''}:{raw body}``). The timestamp must be
  within 5 minutes of the gateway's clock. A verified request carries
  ``requestContext.authorizer.principalId = hmac:ID`` (the principal the deployed api gives a
  signed request) and no ``userArn``. A missing or bad signature gets 401 without reaching the
  handler, and so does a signature used before (401 ``replayed``): each one is remembered in the
  same store, with the same check, as on the deployed ``/signed`` routes
  (:func:`wait_service.channels.signing.check_first_use`). ``POST /slack/interactions`` is the exception:
  Slack cannot sign with our keys, so the api verifies Slack's own signature on it.

A request whose ``Content-Length`` is not a number gets 400 (``field`` ``Content-Length``), and
its connection is closed: where its body ends cannot be known.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from agent_wait import signing
from agent_wait_cli.local.serving import BackgroundServer

if TYPE_CHECKING:
    from wait_service.channels.signing import ReplayGuard

DEFAULT_PRINCIPAL = "local:anonymous"
PRINCIPAL_HEADER = "X-Wait-Principal"
KEY_ID_HEADER = signing.KEY_ID_HEADER
TIMESTAMP_HEADER = signing.TIMESTAMP_HEADER
SIGNATURE_HEADER = signing.SIGNATURE_HEADER
HMAC_PRINCIPAL_PREFIX = "hmac:"
# Routes whose caller proves itself another way (Slack signs with its own secret); never HMAC-checked here.
UNSIGNED_PATHS = frozenset({"/slack/interactions"})
STAGE = "local"
logger = logging.getLogger(__name__)
SIGNATURE_TOLERANCE_SECONDS = 300
# API Gateway REST refuses payloads over 10 MB before the Lambda sees them.
MAX_BODY_BYTES = 10 * 1024 * 1024
# RFC 9110: Content-Length = 1*DIGIT (ASCII digits only: no sign, space or other numerals).
_CONTENT_LENGTH = re.compile(r"[0-9]+")

Handler = Callable[[dict[str, Any], Any], Mapping[str, Any]]


@dataclass(frozen=True)
class HttpRequest:
    """One HTTP request as the gateway received it."""

    method: str
    target: str  # path plus "?query", as on the request line
    headers: Sequence[tuple[str, str]]
    body: bytes = b""
    source_ip: str = "127.0.0.1"


def header_value(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    """The first value of header ``name`` in ``headers``, matched case-insensitively as HTTP says.

    Examples
    --------
    >>> header_value([("content-type", "application/json")], "Content-Type")
    'application/json'
    >>> header_value({"ETag": '"d1"'}.items(), "etag")
    '"d1"'
    """
    wanted = name.lower()
    for key, value in headers:
        if key.lower() == wanted:
            return value
    return None


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        return header_value(self.headers, name)


class SignatureError(Exception):
    """A request that must be signed is not, or its signature does not verify."""


def verify_signature(request: HttpRequest, keys: Mapping[str, str], now: float) -> str:
    """Return the key id that signed ``request``; raise :class:`SignatureError` otherwise.

    The check itself is :func:`agent_wait.signing.verify` over the request line's target (path and
    query as sent) and ``If-Match`` (timestamp within ``SIGNATURE_TOLERANCE_SECONDS``,
    constant-time comparison).
    """
    key_id = header_value(request.headers, KEY_ID_HEADER)
    timestamp = header_value(request.headers, TIMESTAMP_HEADER)
    signature = header_value(request.headers, SIGNATURE_HEADER)
    if not key_id or not timestamp or not signature:
        raise SignatureError(
            f"this gateway requires signed requests ({KEY_ID_HEADER}, {TIMESTAMP_HEADER}, {SIGNATURE_HEADER})"
        )
    secret = keys.get(key_id)
    if secret is None:
        raise SignatureError(f"unknown key id {key_id!r}")
    if_match = header_value(request.headers, "If-Match")

    def verified(tolerance: int) -> bool:
        return signing.verify(
            secret,
            timestamp,
            signature,
            request.method,
            request.target,
            request.body,
            if_match=if_match,
            now=now,
            tolerance=tolerance,
        )

    if verified(SIGNATURE_TOLERANCE_SECONDS):
        return key_id
    # Only to say why: a right signature at a stale time is a clock problem, not a key problem.
    if verified(sys.maxsize):
        raise SignatureError(f"{TIMESTAMP_HEADER} is more than 5 minutes from the gateway's clock")
    raise SignatureError(f"signature does not match (or {TIMESTAMP_HEADER} is not unix seconds)")


def to_proxy_event(
    request: HttpRequest,
    *,
    principal: str | None = None,
    authorizer_principal: str | None = None,
    request_id: str | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """Translate ``request`` into the event API Gateway REST sends for a ``/{proxy+}`` resource.

    Parameters
    ----------
    request:
        The HTTP request.
    principal:
        ``requestContext.identity.userArn``; ``None`` leaves it null (as for an unsigned IAM call).
    authorizer_principal:
        ``requestContext.authorizer.principalId`` when a signature was verified.
    request_id, now:
        Fixed values for tests; fresh ones otherwise.

    Examples
    --------
    >>> event = to_proxy_event(HttpRequest("GET", "/questions?status=raised", []), principal="me")
    >>> event["path"], event["queryStringParameters"], event["requestContext"]["identity"]["userArn"]
    ('/questions', {'status': 'raised'}, 'me')
    >>> to_proxy_event(HttpRequest("GET", "/threads/a%20b%3A1", []))["pathParameters"]
    {'proxy': 'threads/a b:1'}
    """
    parts = urlsplit(request.target)
    # API Gateway hands the Lambda the percent-decoded path (and path parameters): ``/threads/a%20b``
    # arrives as ``/threads/a b``, so the api checks what the client meant, not how it was escaped.
    path = unquote(parts.path or "/")
    headers: dict[str, str] = {}
    multi_headers: dict[str, list[str]] = {}
    for key, value in request.headers:
        # API Gateway keeps the last value in ``headers`` and all of them in ``multiValueHeaders``.
        headers[key] = value
        multi_headers.setdefault(key, []).append(value)
    query = parse_qs(parts.query, keep_blank_values=True)
    body: str | None = None
    is_base64 = False
    if request.body:
        try:
            body = request.body.decode("utf-8")
        except UnicodeDecodeError:
            body = base64.b64encode(request.body).decode("ascii")
            is_base64 = True
    stamp = time.time() if now is None else now
    proxy = path.lstrip("/")
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": request.method.upper(),
        "headers": headers or None,
        "multiValueHeaders": multi_headers or None,
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
        "pathParameters": {"proxy": proxy} if proxy else None,
        "stageVariables": None,
        "body": body,
        "isBase64Encoded": is_base64,
        "requestContext": {
            "resourceId": "local",
            "resourcePath": "/{proxy+}",
            "httpMethod": request.method.upper(),
            "path": f"/{STAGE}{path}",
            "stage": STAGE,
            "requestId": request_id or str(uuid.uuid4()),
            "requestTimeEpoch": int(stamp * 1000),
            "accountId": "000000000000",
            "apiId": "local",
            "protocol": "HTTP/1.1",
            "domainName": header_value(request.headers, "Host") or "127.0.0.1",
            "identity": {
                "sourceIp": request.source_ip,
                "userAgent": header_value(request.headers, "User-Agent"),
                "userArn": principal,
                "caller": principal,
                "user": principal,
                "accountId": None,
                "accessKey": None,
                "cognitoIdentityId": None,
                "cognitoIdentityPoolId": None,
                "cognitoAuthenticationType": None,
                "cognitoAuthenticationProvider": None,
            },
            "authorizer": {"principalId": authorizer_principal} if authorizer_principal else None,
        },
    }


def from_proxy_response(response: Mapping[str, Any]) -> HttpResponse:
    """Translate a proxy integration response back into HTTP, as API Gateway does.

    A response without ``statusCode`` is a malformed integration response: API Gateway answers 502.

    Examples
    --------
    >>> from_proxy_response({"statusCode": 202, "headers": {"ETag": '"x"'}, "body": "{}"}).status
    202
    """
    if not isinstance(response, Mapping) or "statusCode" not in response:
        return error_response(502, "internal_error", "Malformed Lambda proxy response")
    headers: list[tuple[str, str]] = []
    multi = response.get("multiValueHeaders") or {}
    for key, values in multi.items():
        headers.extend((key, str(value)) for value in values)
    for key, value in (response.get("headers") or {}).items():
        if key.lower() not in {k.lower() for k in multi}:
            headers.append((key, str(value)))
    raw = response.get("body") or ""
    body = base64.b64decode(raw) if response.get("isBase64Encoded") else str(raw).encode("utf-8")
    return HttpResponse(int(response["statusCode"]), headers, body)


def error_response(status: int, code: str, message: str, *, field: str | None = None) -> HttpResponse:
    body = json.dumps({"error": code, "message": message} | ({"field": field} if field else {})).encode()
    return HttpResponse(status, [("Content-Type", "application/json")], body)


def content_length(values: Sequence[str]) -> int:
    """The body's length from the request's ``Content-Length`` values (0 without one).

    Raises
    ------
    ValueError
        A value is not ASCII digits, or two values differ.

    Examples
    --------
    >>> content_length([]), content_length(["12"]), content_length(["12", "12"])
    (0, 12, 12)
    >>> content_length(["abc"])
    Traceback (most recent call last):
    ...
    ValueError: Content-Length must be a number of bytes, not 'abc'
    """
    lengths = set()
    for value in values:
        text = value.strip()
        if not _CONTENT_LENGTH.fullmatch(text):
            raise ValueError(f"Content-Length must be a number of bytes, not {value!r}")
        lengths.add(int(text))
    if len(lengths) > 1:
        raise ValueError("Content-Length is given twice with different values")
    return lengths.pop() if lengths else 0


@dataclass(frozen=True)
class Exchange:
    """A request and the response the gateway gave it, for whoever watches the stack."""

    request: HttpRequest
    response: HttpResponse
    principal: str | None


class Gateway(BackgroundServer):
    """Serve ``handler`` over HTTP on 127.0.0.1, one Lambda invocation at a time.

    Parameters
    ----------
    handler:
        A Lambda handler ``(event, context) -> proxy response``.
    port:
        Port to bind; 0 picks a free one.
    hmac_keys:
        Key id → secret. When given, requests must be signed (see the module docstring).
    context_factory:
        Builds the Lambda context for each invocation.
    on_exchange:
        Called after each request with what was asked and answered (the stack's event lines).
    clock:
        Unix time, for signature freshness.
    replays:
        Where used signatures are remembered (the stack passes the ledger's, as the deployed api
        uses); ``None`` keeps no record, so a signed request could be replayed.

    Examples
    --------
    >>> gateway = Gateway(lambda event, ctx: {"statusCode": 200, "body": "ok"})
    >>> gateway.start()  # doctest: +SKIP
    >>> gateway.url  # doctest: +SKIP
    'http://127.0.0.1:8787'
    >>> gateway.stop()  # doctest: +SKIP
    """

    def __init__(
        self,
        handler: Handler,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        hmac_keys: Mapping[str, str] | None = None,
        context_factory: Callable[[], Any] | None = None,
        on_exchange: Callable[[Exchange], None] | None = None,
        clock: Callable[[], float] = time.time,
        replays: ReplayGuard | None = None,
    ) -> None:
        super().__init__(host, port, thread_name="local-gateway")
        self._handler = handler
        self.replays = replays
        self._keys = dict(hmac_keys or {})
        self._context_factory = context_factory or (lambda: None)
        self._on_exchange = on_exchange
        self._clock = clock
        # One Lambda instance serves one event at a time, and Powertools resolvers keep the current
        # event on the app object, so concurrent HTTP requests queue here instead of racing.
        self._invoke_lock = threading.Lock()

    def handle(self, request: HttpRequest) -> HttpResponse:
        """Authenticate, translate, invoke and translate back one request (no sockets involved)."""
        principal: str | None
        authorizer: str | None = None
        if self._keys and urlsplit(request.target).path in UNSIGNED_PATHS:
            principal = None
        elif self._keys:
            try:
                key_id = verify_signature(request, self._keys, self._clock())
            except SignatureError as exc:
                return error_response(401, "unauthorized", str(exc))
            refused = self._replayed(request, key_id)
            if refused is not None:
                return refused
            authorizer = HMAC_PRINCIPAL_PREFIX + key_id
            principal = None
        else:
            principal = header_value(request.headers, PRINCIPAL_HEADER) or DEFAULT_PRINCIPAL
        if len(request.body) > MAX_BODY_BYTES:
            return error_response(413, "payload_too_large", "Request body over API Gateway's 10 MB limit")
        event = to_proxy_event(request, principal=principal, authorizer_principal=authorizer)
        with self._invoke_lock:
            try:
                result = self._handler(event, self._context_factory())
            except Exception:
                # API Gateway maps a crashed Lambda to 502.
                logger.exception("api handler raised")
                response = error_response(502, "internal_error", "Internal server error")
            else:
                response = from_proxy_response(result)
        if self._on_exchange is not None:
            try:
                self._on_exchange(Exchange(request, response, authorizer or principal))
            except Exception:
                # A watcher never breaks a response.
                logger.exception("exchange watcher raised")
        return response

    def _replayed(self, request: HttpRequest, key_id: str) -> HttpResponse | None:
        """401 ``replayed`` when the request's signature was used before; ``None`` on its first use.

        ``/signed/...`` requests are left to the api, which records their signatures itself.
        """
        # Imported here, not with this module: wait_service builds its Powertools logger on import,
        # and the stack sets the environment it reads only after the gateway is created.
        from wait_service.channels.signing import SignatureRejectedError, check_first_use, is_signed_path

        if self.replays is None or is_signed_path(urlsplit(request.target).path):
            return None
        signature = header_value(request.headers, SIGNATURE_HEADER) or ""
        sent_at = signing.parse_timestamp(header_value(request.headers, TIMESTAMP_HEADER)) or 0
        try:
            check_first_use(self.replays, key_id, signature, sent_at + SIGNATURE_TOLERANCE_SECONDS)
        except SignatureRejectedError as exc:
            return error_response(401, exc.code, exc.message)
        return None

    def _make_server(self) -> ThreadingHTTPServer:
        server = _BurstServer((self._host, self._port), self._request_handler())
        server.daemon_threads = True
        return server

    def _request_handler(self) -> type[BaseHTTPRequestHandler]:
        gateway = self

        class _RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "agent-wait-local"

            def _serve(self) -> None:
                try:
                    length = content_length(self.headers.get_all("Content-Length") or [])
                except ValueError as exc:
                    response = error_response(400, "invalid_request", str(exc), field="Content-Length")
                    self.close_connection = True
                    self._send(response)
                    return
                if length > MAX_BODY_BYTES:
                    response = error_response(413, "payload_too_large", "Request body over 10 MB")
                    self.close_connection = True
                else:
                    body = self.rfile.read(length) if length else b""
                    request = HttpRequest(
                        method=self.command,
                        target=self.path,
                        headers=list(self.headers.items()),
                        body=body,
                        source_ip=self.client_address[0],
                    )
                    response = gateway.handle(request)
                self._send(response)

            def _send(self, response: HttpResponse) -> None:
                self.send_response(response.status)
                skip = {"content-length", "connection", "transfer-encoding"}
                for key, value in response.headers:
                    if key.lower() not in skip:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(response.body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(response.body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve

            def __getattr__(self, name: str) -> Any:
                # Any other method (TRACE, QUERY, ...) reaches the api too, which answers 405 with
                # Allow, instead of http.server's HTML 501.
                if name.startswith("do_"):
                    return self._serve
                raise AttributeError(name)

            def log_message(self, format: str, *args: Any) -> None:
                # The stack prints one line per event; access logs would drown them.
                return

        return _RequestHandler


class _BurstServer(ThreadingHTTPServer):
    """Accepts a burst of connections, as API Gateway does: the default backlog of 5 resets the
    connections of 50 clients that reply at once (``make stress``)."""

    request_queue_size = 128
