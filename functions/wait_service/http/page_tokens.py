"""Page tokens checked before they reach DynamoDB.

A ``next`` token is the ``LastEvaluatedKey`` of the previous page, base64-encoded; the client
holds it, so it can hand back anything. DynamoDB answers a start key that is not one of the
index's keys, or not in the partition queried, with a ``ValidationException``: a forged token
would be a 500. :func:`list_page` checks the token against the query it continues and answers
anything else with 400 ``invalid_request`` naming ``next``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError, ParamValidationError

from agent_wait.errors import InvalidRequestError
from wait_service.ledger import decode_listing_token, decode_token
from wait_service.ledger.shards import STATUS_SHARDS

if TYPE_CHECKING:
    from wait_service.ledger import Ledger, Page

BY_STATUS_KEYS = frozenset({"dedupe_key", "status_shard", "created_at"})
BY_THREAD_KEYS = frozenset({"dedupe_key", "thread_id", "created_at"})


def _forged(message: str = "next is not a page token of this query") -> InvalidRequestError:
    return InvalidRequestError(message, field="next")


def _check_key(key: Any, names: frozenset[str], equal: dict[str, str]) -> None:
    """``key`` is a start key of an index with key attributes ``names``, in the partition ``equal``."""
    if not isinstance(key, dict) or set(key) != names:
        raise _forged()
    for name, value in key.items():
        if not isinstance(value, dict) or set(value) != {"S"} or not isinstance(value["S"], str):
            raise _forged()
        if not value["S"] or not value["S"].isprintable() and _not_text(value["S"]):
            raise _forged()
        if name in equal and value["S"] != equal[name]:
            raise _forged()


def _not_text(value: str) -> bool:
    """Whether ``value`` holds a lone surrogate: no key DynamoDB wrote does, and botocore cannot send it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_token(
    token: str, *, status: str | None, thread_id: str | None, shards: int = STATUS_SHARDS
) -> None:
    """Raise :class:`InvalidRequestError` (``field="next"``) unless ``token`` continues this query.

    Examples
    --------
    >>> check_token("bm90IGEgdG9rZW4=", status=None, thread_id=None)
    Traceback (most recent call last):
    ...
    agent_wait.errors.InvalidRequestError: next is not a page token
    """
    if status is not None and thread_id is None:
        # A status page reads every shard of the status's listing: one position per shard.
        positions, _ = decode_listing_token(token, status, shards)
        for shard, position in positions.items():
            if position is None or position == "end":
                continue
            _check_key(position, BY_STATUS_KEYS, {"status_shard": shard})
        return
    key = decode_token(token)
    if thread_id is not None:
        _check_key(key, BY_THREAD_KEYS, {"thread_id": thread_id})
    else:
        _check_key(key, BY_STATUS_KEYS, {})


def list_page(
    ledger: Ledger,
    *,
    status: str | None,
    thread_id: str | None,
    limit: int,
    next_token: str | None,
) -> Page:
    """``ledger.list_questions`` with ``next`` checked first.

    DynamoDB is the last judge of a start key; if it still refuses one, that is the token's fault
    too, and the answer is the same 400.
    """
    if next_token is None:
        return ledger.list_questions(status=status, thread_id=thread_id, limit=limit)
    check_token(next_token, status=status, thread_id=thread_id, shards=ledger.listing_shards)
    try:
        return ledger.list_questions(status=status, thread_id=thread_id, limit=limit, next_token=next_token)
    except ParamValidationError as exc:
        raise _forged() from exc
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ValidationException":
            raise _forged() from exc
        raise
