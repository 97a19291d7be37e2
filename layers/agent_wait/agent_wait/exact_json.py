"""JSON text that keeps a :class:`~decimal.Decimal`'s digits.

agent-wait reads numbers with a fraction or an exponent as ``Decimal`` (``json.loads(...,
parse_float=Decimal)``) so that ``10000.00000000000000001`` stays itself from the request to the
ledger, the graph and the audit record. Python's ``json`` cannot write a ``Decimal`` back as a
number: :func:`dumps` writes each one as a marker string first (a per-process random prefix no
JSON text can guess) and then puts the digits in its place, so a ``Decimal`` comes out as the
number it holds and every other value exactly as ``json.dumps`` writes it.

:func:`exact_marker` makes the same marker for code that hands values to another serializer
which calls :func:`dumps` last (the api's resolver).
"""

from __future__ import annotations

import json
import re
import secrets
from decimal import Decimal
from typing import Any

__all__ = ["dumps", "exact_marker", "floats_where_exact", "marked", "number_text", "restore"]

_PREFIX = f"\x00exact-{secrets.token_hex(16)}:"
# The marker as json.dumps writes it (the NUL byte escaped), with its digits captured.
_MARKED = re.compile('"' + re.escape(json.dumps(_PREFIX)[1:-1]) + r'([-+0-9.eE]+)"')


def number_text(value: Decimal) -> str:
    """A finite ``Decimal`` as a JSON number with the same digits.

    Examples
    --------
    >>> number_text(Decimal("10000.00000000000000001")), number_text(Decimal("-1.5E+7"))
    ('10000.00000000000000001', '-1.5E+7')
    """
    if not value.is_finite():
        raise ValueError(f"{value} is not a finite number")
    return str(value)


def exact_marker(value: Decimal) -> str:
    """The string :func:`dumps` turns back into ``value``'s digits."""
    return _PREFIX + number_text(value)


def marked(value: Any) -> Any:
    """``value`` with each ``Decimal`` as its :func:`exact_marker` (for a serializer that writes
    strings; :func:`restore` puts the digits back in the JSON text it wrote)."""
    if isinstance(value, Decimal):
        return exact_marker(value)
    if isinstance(value, dict):
        return {key: marked(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [marked(item) for item in value]
    return value


def restore(text: str) -> str:
    """JSON ``text`` with each :func:`exact_marker` string written back as its number.

    Examples
    --------
    >>> import json
    >>> restore(json.dumps({"amount": marked(Decimal("10000.00000000000000001"))}))
    '{"amount": 10000.00000000000000001}'
    """
    if _PREFIX[1:] not in text:
        return text
    return _MARKED.sub(r"\1", text)


def floats_where_exact(value: Any) -> Any:
    """``value`` with each ``Decimal`` a float writes with the same digits as that float.

    For models that take only JSON's Python types (pydantic's ``JsonValue``): ``Decimal("40.5")``
    becomes ``40.5``; ``Decimal("10000.00000000000000001")``, which no float holds, stays a Decimal.

    Examples
    --------
    >>> floats_where_exact({"a": [Decimal("40.5"), Decimal("10000.00000000000000001")]})
    {'a': [40.5, Decimal('10000.00000000000000001')]}
    """
    if isinstance(value, Decimal):
        if value.is_finite():
            as_float = float(value)
            if Decimal(repr(as_float)) == value:
                return as_float
        return value
    if isinstance(value, dict):
        return {key: floats_where_exact(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(floats_where_exact(item) for item in value)
    return value


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return exact_marker(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps(value, **kwargs)``, with each ``Decimal`` written as the number it holds.

    Examples
    --------
    >>> dumps({"amount": Decimal("10000.00000000000000001"), "n": 2.5}, sort_keys=True)
    '{"amount": 10000.00000000000000001, "n": 2.5}'
    >>> dumps([exact_marker(Decimal("0.1"))])
    '[0.1]'
    """
    return restore(json.dumps(value, default=_default, **kwargs))
