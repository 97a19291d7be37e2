"""Keys, timestamps and attribute values as the ledger table stores them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import DYNAMODB_CONTEXT, TypeDeserializer

from agent_wait.aws.dynamodb import to_attribute

if TYPE_CHECKING:
    from botocore.exceptions import ClientError

Clock = Callable[[], datetime]

_deserializer = TypeDeserializer()


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """ISO-8601 UTC with a ``Z``, millisecond precision: sortable as a string.

    Examples
    --------
    >>> iso(datetime(2026, 11, 30, 10, 0, tzinfo=UTC))
    '2026-11-30T10:00:00.000Z'
    """
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(value: str) -> datetime:
    """Parse an ISO-8601 timestamp (``Z`` or offset); naive values are taken as UTC."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def question_key(question_id: str) -> str:
    return f"wait.created:{question_id}"


def thread_key(thread_id: str) -> str:
    return f"thread:{thread_id}"


def run_key(run_id: str) -> str:
    """The key of a run's start record (its input, for the dispatcher to enqueue)."""
    return f"run:{run_id}"


def _from_dynamo_native(value: Any, exact: bool = False) -> Any:
    if isinstance(value, Decimal):
        if value == value.to_integral_value():
            return int(value)
        # DynamoDB drops trailing zeros (0.10 reads back 0.1); so does an exact read, everywhere.
        return value.normalize(DYNAMODB_CONTEXT) if exact else float(value)
    if isinstance(value, Mapping):
        return {k: _from_dynamo_native(v, exact) for k, v in value.items()}
    if isinstance(value, list | set | tuple):
        return [_from_dynamo_native(v, exact) for v in value]
    if isinstance(value, bytes | bytearray):
        return value.decode()
    return value


def from_attribute(value: Any, *, exact: bool = False) -> Any:
    """A DynamoDB attribute value (low-level format) as a JSON value.

    Integral numbers become ``int``; the others ``float``, or with ``exact`` the ``Decimal``
    DynamoDB holds, digit for digit. People's data (a question's proposal, its answer, the
    receipt of what ran) is read exactly; the ledger's own fields need no more than a float.

    Examples
    --------
    >>> from_attribute({"N": "10000.00000000000000001"}), from_attribute({"N": "2.5"}, exact=True)
    (10000.0, Decimal('2.5'))
    """
    try:
        return _from_plain(value)
    except _NotPlain:
        return _from_dynamo_native(_deserializer.deserialize(value), exact)


class _NotPlain(Exception):
    """An attribute the direct conversion leaves to boto3's deserializer (sets, binary, odd numbers)."""


# An integer DynamoDB's number context reads exactly: at most 38 digits, no exponent or point.
_PLAIN_INT = re.compile(r"-?[0-9]{1,38}")


def _from_plain(value: Any) -> Any:
    """What ``_from_dynamo_native(TypeDeserializer().deserialize(value))`` gives, for the attribute
    types the ledger writes (S, N holding an integer, BOOL, NULL, M, L), without building Decimals.

    Every read of a question decodes a dozen attributes through here, so the type is found by key
    lookups, most frequent first, rather than by unpacking the one-entry dict.
    """
    if type(value) is not dict or len(value) != 1:
        raise _NotPlain
    if "S" in value:
        return value["S"]
    if "M" in value:
        return {key: _from_plain(item) for key, item in value["M"].items()}
    if "NULL" in value:
        return None
    if "L" in value:
        return [_from_plain(item) for item in value["L"]]
    if "N" in value:
        member = value["N"]
        if _PLAIN_INT.fullmatch(member):
            return int(member)
        raise _NotPlain
    if "BOOL" in value:
        return value["BOOL"]
    raise _NotPlain


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: from_attribute(value) for name, value in item.items()}


def normalize_json(value: Any) -> Any:
    """The value as an answer reads back from the ledger, so that stored and new answers compare equal.

    Examples
    --------
    >>> normalize_json({"amount": 25.0, "ok": True, "exact": Decimal("0.10")})
    {'amount': 25, 'ok': True, 'exact': Decimal('0.1')}
    """
    return from_attribute(to_attribute(value), exact=True)


def condition_failed(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"
