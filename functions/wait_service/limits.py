"""What the api accepts, checked before anything is parsed by the resolver or written anywhere.

Every limit here is one a downstream service would otherwise enforce later and less clearly:

- thread ids become SQS ``MessageGroupId`` values and part of ``run:<thread_id>:<ULID>``
  deduplication ids (at most 128 characters), so they are ASCII from a small alphabet and at most
  80 characters;
- JSON values end up in DynamoDB items, which nest at most 32 levels and hold numbers of at most
  38 significant digits down to 1e-130 in magnitude. The api takes numbers that are 0 or between
  1e-130 and 1e38 in magnitude (below 1e38 every integer has at most 38 digits, so the rule fits in
  a JSON Schema the OpenAPI document can state): NaN, infinities (Python's ``json`` reads ``NaN``,
  ``Infinity`` and ``1e309``) and numbers out of that range are refused, never stored as ``null``;
- the body is UTF-8 JSON (``application/json``) of at most 256 KiB, read by :func:`loads`: numbers
  with a fraction or exponent become :class:`~decimal.Decimal` (never ``float``, so the digits sent
  are the digits stored and run), an object naming a key twice is refused (JSON leaves the
  meaning open; Python would keep the last value silently), and so is a string holding a lone
  UTF-16 surrogate (``"\\ud800"``), which no store downstream can encode.

The README's limits table lists the same numbers.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import PlainSerializer, WithJsonSchema

from agent_wait import exact_json
from agent_wait.aws.dynamodb import to_attribute
from agent_wait.errors import InvalidRequestError, UnsupportedMediaTypeError

if TYPE_CHECKING:
    from collections.abc import Mapping

THREAD_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,80}$"
THREAD_ID_MAX = 80
MAX_BODY_BYTES = 256 * 1024
# DynamoDB nests documents at most 32 levels deep; the request body wraps the value in one more.
MAX_DEPTH = 32
JSON_MEDIA_TYPE = "application/json"
# Numbers are 0 or MIN_MAGNITUDE <= |x| < MAX_MAGNITUDE.
MIN_MAGNITUDE = 1e-130
_MIN_DECIMAL = Decimal("1e-130")
# An int, so that comparisons are exact: 10**38 - 1 passes, the float 1e38 (just below) too.
MAX_MAGNITUDE = 10**38
# DynamoDB keeps 38 significant digits; a number with more would be rounded when stored.
MAX_DIGITS = 38
NUMBER_RULE = "numbers must be 0 or between 1e-130 and 1e38 in magnitude"
# The same rule as a JSON Schema, for the OpenAPI document's request bodies.
STORABLE_JSON_SCHEMA: dict[str, Any] = {
    "description": f"any JSON value DynamoDB can store: nested at most {MAX_DEPTH} levels; {NUMBER_RULE}",
    "anyOf": [
        {"type": "null"},
        {"type": "boolean"},
        {"type": "string"},
        {"type": "number", "minimum": MIN_MAGNITUDE, "exclusiveMaximum": MAX_MAGNITUDE},
        {"type": "number", "exclusiveMinimum": -MAX_MAGNITUDE, "maximum": -MIN_MAGNITUDE},
        {"const": 0},
        {"type": "array", "items": {"$ref": "#/components/schemas/StorableJson"}},
        {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/StorableJson"}},
    ],
}

_THREAD_ID = re.compile(THREAD_ID_PATTERN)


# A JSON value whose numbers may be Decimals (pydantic's JsonValue refuses them): request bodies
# as :func:`loads` reads them and people's data as the ledger reads it back. In JSON it is written
# with every digit, by the api's serializer (:func:`agent_wait.exact_json.dumps`). The OpenAPI
# document shows it as pydantic's JsonValue (``wait_service.http.openapi_doc`` swaps this marker schema).
EXACT_JSON_SCHEMA_KEY = "x-exact-json"
ExactJson = Annotated[
    Any,
    PlainSerializer(exact_json.marked, when_used="json"),
    WithJsonSchema({EXACT_JSON_SCHEMA_KEY: True}),
]
# A lone surrogate reaches a parsed string only as a \\uD800-\\uDFFF escape (UTF-8 text cannot hold
# one); a body without such an escape needs no walk for them.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class DuplicateKeyError(ValueError):
    """A JSON object names ``key`` twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key!r} appears twice in one object")
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return obj


def loads(text: str | bytes) -> Any:
    """Parse JSON the way the api reads every body: exact numbers, each key once.

    A number with a fraction or an exponent is a :class:`~decimal.Decimal` holding the digits sent,
    an integer an ``int``; ``NaN`` and ``Infinity`` stay floats (:func:`number_problem` refuses
    them by field).

    Raises
    ------
    DuplicateKeyError
        An object names a key twice (a :class:`ValueError`).
    ValueError
        The text is not JSON.
    RecursionError
        It nests deeper than Python's parser goes.

    Examples
    --------
    >>> loads('{"amount": 10000.00000000000000001, "n": 2}')
    {'amount': Decimal('10000.00000000000000001'), 'n': 2}
    >>> loads('{"action": "reject", "action": "approve"}')
    Traceback (most recent call last):
    ...
    wait_service.limits.DuplicateKeyError: the key 'action' appears twice in one object
    """
    return json.loads(text, parse_float=Decimal, object_pairs_hook=_unique_keys)


def surrogate_problem(value: Any, path: str) -> str | None:
    """The first string or key in ``value`` holding a lone UTF-16 surrogate, as a field path.

    Examples
    --------
    >>> surrogate_problem({"answer": {"args": {"note": "a\\ud800"}}}, "")
    'answer.args.note'
    >>> surrogate_problem(["ok", {"k": 1}], "input") is None
    True
    """
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return where or "body"
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                field = f"{where}.{key}" if where else str(key)
                if _SURROGATE.search(key):
                    return field
                stack.append((child, field))
        elif isinstance(item, list):
            indexed = reversed(list(enumerate(item)))
            stack.extend((child, f"{where}.{i}" if where else str(i)) for i, child in indexed)
    return None


def check_thread_id(thread_id: str) -> str:
    """Return ``thread_id`` if the api accepts it; raise :class:`InvalidRequestError` otherwise.

    Examples
    --------
    >>> check_thread_id("order-17:refund")
    'order-17:refund'
    >>> check_thread_id("a b")
    Traceback (most recent call last):
    ...
    agent_wait.errors.InvalidRequestError: thread_id must match ^[A-Za-z0-9._:-]{1,80}$
    """
    if not _THREAD_ID.fullmatch(thread_id):
        raise InvalidRequestError(f"thread_id must match {THREAD_ID_PATTERN}", field="thread_id")
    return thread_id


def media_type_problem(content_type: str | None) -> str | None:
    """Why a request body with this ``Content-Type`` is refused; ``None`` when it is JSON in UTF-8.

    Examples
    --------
    >>> media_type_problem("application/json; charset=UTF-8") is None
    True
    >>> media_type_problem("text/plain")
    "Content-Type must be application/json, not 'text/plain'"
    >>> media_type_problem("application/json; charset=utf-16")
    'Content-Type must be application/json in UTF-8, not charset utf-16'
    """
    if not content_type:
        return "Content-Type must be application/json (the request has none)"
    media_type, _, params = content_type.partition(";")
    if media_type.strip().lower() != JSON_MEDIA_TYPE:
        return f"Content-Type must be application/json, not {content_type.strip()!r}"
    for param in params.split(";"):
        name, _, value = param.partition("=")
        charset = value.strip().strip('"').lower()
        if name.strip().lower() == "charset" and charset not in {"utf-8", "utf8"}:
            return f"Content-Type must be application/json in UTF-8, not charset {charset}"
    return None


def header(headers: Mapping[str, Any] | None, name: str) -> str | None:
    """A header's value, whatever its case (API Gateway passes names as the client sent them)."""
    wanted = name.lower()
    for key, value in (headers or {}).items():
        if key.lower() == wanted:
            return str(value)
    return None


def check_media_type(event: Mapping[str, Any]) -> None:
    """Raise :class:`UnsupportedMediaTypeError` unless the event's body is declared UTF-8 JSON."""
    problem = media_type_problem(header(event.get("headers"), "Content-Type"))
    if problem is not None:
        raise UnsupportedMediaTypeError(problem, field="Content-Type")


def read_json_text(event: Mapping[str, Any]) -> tuple[str, Any]:
    """The event's body as text and as JSON, checked the way the api needs it; raise on anything else.

    Raises
    ------
    UnsupportedMediaTypeError
        ``Content-Type`` is not ``application/json`` in UTF-8 (415).
    InvalidRequestError
        The body is not UTF-8, not JSON, or nests deeper than :data:`MAX_DEPTH` (400, ``field`` body).

    Examples
    --------
    >>> read_json_text({"headers": {"content-type": "application/json"}, "body": '{"a": [1]}'})
    ('{"a": [1]}', {'a': [1]})
    """
    check_media_type(event)
    raw = event.get("body") or ""
    try:
        text = (
            base64.b64decode(raw, validate=True).decode("utf-8") if event.get("isBase64Encoded") else str(raw)
        )
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidRequestError("the body is not UTF-8 text", field="body") from exc
    try:
        value = loads(text)
    except RecursionError as exc:
        raise InvalidRequestError(f"the body nests deeper than {MAX_DEPTH} levels", field="body") from exc
    except DuplicateKeyError as exc:
        raise InvalidRequestError(f"the body is ambiguous: {exc}", field=exc.key) from exc
    except ValueError as exc:
        raise InvalidRequestError("the body is not JSON", field="body") from exc
    # Every level of nesting opens with its own `{` or `[`, so a text with few of them (most
    # bodies) cannot nest too deep and needs no walk.
    if text.count("{") + text.count("[") > MAX_DEPTH + 1 and depth(value) > MAX_DEPTH + 1:
        raise InvalidRequestError(f"the body nests deeper than {MAX_DEPTH} levels", field="body")
    if _SURROGATE_ESCAPE.search(text) or _SURROGATE.search(text):
        where = surrogate_problem(value, "")
        if where is not None:
            raise InvalidRequestError(
                f"{where}: holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not text", field=where
            )
    return text, value


def depth(value: Any) -> int:
    """How many levels of objects and arrays ``value`` nests (a scalar is 0), without recursion.

    Examples
    --------
    >>> depth({"a": [1, {"b": 2}]}), depth(3)
    (3, 0)
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            deepest = max(deepest, level)
            continue
        deepest = max(deepest, level + 1)
        stack.extend((child, level + 1) for child in children)
    return deepest


def significant_digits(value: Decimal) -> int:
    """How many significant digits ``value`` has (leading and trailing zeros do not count).

    Examples
    --------
    >>> significant_digits(Decimal("10000.00000000000000001")), significant_digits(Decimal("0.0250"))
    (22, 2)
    """
    return len("".join(map(str, value.as_tuple().digits)).strip("0"))


def number_problem(value: Any, path: str) -> tuple[str, str] | None:
    """The first number in ``value`` DynamoDB cannot store exactly, as ``(field, reason)``; else ``None``.

    ``path`` names ``value`` itself (``"input"``, ``"answer"``); the field extends it with keys and
    indexes, e.g. ``input.items.2.amount``. A ``Decimal`` (how :func:`loads` reads a number with
    a fraction) is refused beyond :data:`MAX_DIGITS` significant digits: DynamoDB would round it.

    Examples
    --------
    >>> number_problem({"amount": 25.5, "ids": [1, 2]}, "input") is None
    True
    >>> number_problem({"ids": [1, float("inf")]}, "input")
    ('input.ids.1', 'inf is not a finite number')
    >>> number_problem({"x": 1e300}, "answer")
    ('answer.x', '1e+300 is out of range: numbers must be 0 or between 1e-130 and 1e38 in magnitude')
    >>> number_problem({"x": Decimal("1." + "1" * 39)}, "answer")[1]
    '1.111111111111111111111111111111111111111 has 40 significant digits: at most 38 are kept exactly'
    """
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, f"{where}.{k}") for k, v in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((v, f"{where}.{i}") for i, v in reversed(list(enumerate(item))))
        elif isinstance(item, Decimal):
            if not item.is_finite():
                return where, f"{item} is not a finite number"
            digits = significant_digits(item)
            if digits > MAX_DIGITS:
                return where, f"{item} has {digits} significant digits: at most {MAX_DIGITS} are kept exactly"
            if item != 0 and not _MIN_DECIMAL <= item.copy_abs() < MAX_MAGNITUDE:
                return where, f"{item} is out of range: {NUMBER_RULE}"
        elif isinstance(item, float) and not math.isfinite(item):
            return where, f"{item} is not a finite number"
        elif isinstance(item, int | float) and not isinstance(item, bool):
            if item != 0 and not MIN_MAGNITUDE <= abs(item) < MAX_MAGNITUDE:
                return where, f"{item} is out of range: {NUMBER_RULE}"
            try:
                # The serializer the ledger writes with: what it refuses, DynamoDB cannot store.
                to_attribute(item)
            except (ArithmeticError, TypeError, ValueError):
                return where, f"{item} cannot be stored: {NUMBER_RULE}, with at most 38 digits"
    return None


def check_numbers(value: Any, path: str) -> None:
    """Raise :class:`InvalidRequestError` naming the first number DynamoDB cannot store."""
    problem = number_problem(value, path)
    if problem is not None:
        raise InvalidRequestError(f"{problem[0]}: {problem[1]}", field=problem[0])
