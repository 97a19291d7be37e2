"""The checks every request passes before the resolver parses it.

Powertools' resolver answers an unknown method with 404, a ``text/plain`` or non-UTF-8 body with
500, and JSON nested a thousand levels deep with a ``RecursionError``. The gate refuses those
requests first, in the api's error shape:

- a path that matches a route but not its method: 405 with ``Allow``;
- a thread id outside :data:`wait_service.limits.THREAD_ID_PATTERN`: 400 naming ``thread_id``
  (a thread id with ``/`` in it, percent-decoded by API Gateway, still counts as a thread id);
- a body over 256 KiB: 413; not ``application/json``: 415; not UTF-8, not JSON or nested too
  deep: 400 naming ``body``.

Routes are read from the resolver itself, so a route added with ``@app.post(...)`` is gated
with no further change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_wait.errors import MethodNotAllowedError, PayloadTooLargeError
from wait_service.limits import (
    JSON_MEDIA_TYPE,
    MAX_BODY_BYTES,
    check_media_type,
    check_thread_id,
    header,
    read_json_text,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from aws_lambda_powertools.event_handler import APIGatewayRestResolver

METHODS_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
_PARAM = re.compile(r"<(\w+)>")
# Path parameters the gate checks, by name; any other parameter only has to be one segment.
PARAM_CHECKS: dict[str, Callable[[str], Any]] = {"thread_id": check_thread_id}


@dataclass(frozen=True)
class RouteShape:
    """One route as the gate sees it: its method and two patterns for its path.

    ``strict`` takes one path segment per parameter, as the resolver does; ``loose`` lets a
    checked parameter (a thread id) take any text, so ``/threads/a/b/runs`` is a bad thread id
    (400), not an unknown route (404).
    """

    method: str
    path: str
    strict: re.Pattern[str]
    loose: re.Pattern[str]

    @classmethod
    def of(cls, method: str, path: str) -> RouteShape:
        """The shape of the route ``method path``.

        Examples
        --------
        >>> shape = RouteShape.of("POST", "/threads/<thread_id>/runs")
        >>> path = "/threads/a/b/runs"
        >>> shape.loose.fullmatch(path)["thread_id"], shape.strict.fullmatch(path)
        ('a/b', None)
        """
        strict = loose = ""
        position = 0
        for match in _PARAM.finditer(path):
            literal = re.escape(path[position : match.start()])
            name = match.group(1)
            strict += f"{literal}(?P<{name}>[^/]+)"
            loose += f"{literal}(?P<{name}>.+)" if name in PARAM_CHECKS else f"{literal}(?P<{name}>[^/]+)"
            position = match.end()
        tail = re.escape(path[position:])
        return cls(method.upper(), path, re.compile(strict + tail), re.compile(loose + tail))


def route_shapes(app: APIGatewayRestResolver) -> list[RouteShape]:
    """The resolver's routes (static ones first, as the resolver matches them)."""
    # Powertools keeps its routes in these two lists; there is no public accessor.
    routes = list(app._static_routes) + list(app._dynamic_routes)
    return [RouteShape.of(route.method, route.path) for route in routes]


def matching(shapes: Sequence[RouteShape], path: str) -> list[tuple[RouteShape, re.Match[str]]]:
    """The routes whose path is ``path``: by their strict patterns, else by their loose ones."""
    for attribute in ("strict", "loose"):
        found = [(s, m) for s in shapes if (m := getattr(s, attribute).fullmatch(path)) is not None]
        if found:
            return found
    return []


@dataclass(frozen=True)
class Gated:
    """A request the gate let through: the event to resolve, and its body as read (if it has one).

    ``body`` is the JSON value of ``text`` (the body's text, base64 decoded); the api hands it to
    the resolver so the body is parsed once per request, not twice.
    """

    event: dict[str, Any]
    text: str | None = None
    body: Any = None


def gate(shapes: Sequence[RouteShape], event: Mapping[str, Any]) -> Gated:
    """Raise the ``agent_wait`` error a request must be refused with, or return what to resolve.

    A path no route matches passes: the resolver answers it 404. An accepted JSON body's
    ``Content-Type`` is passed on as plain ``application/json``: the resolver compares it
    case-sensitively, while media types are case-insensitive.
    """
    path = str(event.get("path") or "/")
    method = str(event.get("httpMethod") or "").upper()
    found = matching(shapes, path)
    if not found:
        return Gated(dict(event))
    match = next((m for s, m in found if s.method == method), None)
    if match is None:
        allow = sorted({s.method for s, _ in found})
        raise MethodNotAllowedError(f"{path} takes {', '.join(allow)}, not {method}", allow=allow)
    for name, value in match.groupdict().items():
        check = PARAM_CHECKS.get(name)
        if check is not None:
            check(value)
    if method not in METHODS_WITH_BODY:
        return Gated(dict(event))
    if not event.get("body"):
        # No body to read, but a declared type other than JSON is still refused.
        if header(event.get("headers"), "Content-Type") is not None:
            check_media_type(event)
            return Gated(with_json_content_type(event))
        return Gated(dict(event))
    if body_size(event) > MAX_BODY_BYTES:
        raise PayloadTooLargeError(f"the body is larger than {MAX_BODY_BYTES} bytes")
    text, body = read_json_text(event)
    return Gated(with_json_content_type(event), text, body)


def with_json_content_type(event: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``event`` whose ``Content-Type`` header (any case) is ``application/json``."""
    headers = {k: v for k, v in (event.get("headers") or {}).items() if k.lower() != "content-type"}
    multi = {k: v for k, v in (event.get("multiValueHeaders") or {}).items() if k.lower() != "content-type"}
    return dict(event) | {
        "headers": headers | {"Content-Type": JSON_MEDIA_TYPE},
        "multiValueHeaders": multi | {"Content-Type": [JSON_MEDIA_TYPE]},
    }


def body_size(event: Mapping[str, Any]) -> int:
    """The body's size in bytes, as the client sent it."""
    body = event.get("body") or ""
    size = len(body.encode()) if isinstance(body, str) else len(body)
    # A base64 body decodes to three quarters of its length.
    return size * 3 // 4 if event.get("isBase64Encoded") else size
