"""Pages of questions, newest first, by status and/or thread (the ``by-status``/``by-thread`` indexes)."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_wait.errors import InvalidRequestError
from wait_service.ledger.questions import QuestionRecord
from wait_service.ledger.table import LedgerTable
from wait_service.statuses import OPEN

if TYPE_CHECKING:
    from collections.abc import Mapping

# The `status` filter that lists every question still waiting for an answer.
PENDING = "pending"
MAX_PAGE = 100


def encode_token(last_key: Mapping[str, Any]) -> str:
    """An opaque page token: url-safe base64 of the ``LastEvaluatedKey`` JSON."""
    return base64.urlsafe_b64encode(json.dumps(last_key, sort_keys=True).encode()).decode()


def decode_pending_token(token: str) -> dict[str, Any]:
    """The per-status positions of a ``status=pending`` page token."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, binascii.Error, RecursionError) as exc:
        # RecursionError: a token nesting thousands of levels is as malformed as any other.
        raise InvalidRequestError("next is not a page token", field="next") from exc
    positions = decoded.get(PENDING) if isinstance(decoded, dict) else None
    if not isinstance(positions, dict) or set(positions) != set(OPEN):
        raise InvalidRequestError("next is not a page token of status=pending", field="next")
    return positions


def decode_token(token: str) -> dict[str, Any]:
    """Invert :func:`encode_token`; anything else is an :class:`InvalidRequestError` on ``next``."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, binascii.Error, RecursionError) as exc:
        # RecursionError: a token nesting thousands of levels is as malformed as any other.
        raise InvalidRequestError("next is not a page token", field="next") from exc
    valid = isinstance(decoded, dict) and all(
        isinstance(v, dict) and len(v) == 1 and all(isinstance(x, str) for x in v.values())
        for v in decoded.values()
    )
    if not valid or "dedupe_key" not in decoded:
        raise InvalidRequestError("next is not a page token", field="next")
    return decoded


@dataclass(frozen=True)
class Page:
    items: list[QuestionRecord]
    next: str | None


class QuestionPaging(LedgerTable):
    """Lists questions; a part of :class:`~wait_service.ledger.Ledger`."""

    def list_questions(
        self,
        *,
        status: str | None = None,
        thread_id: str | None = None,
        limit: int = 50,
        next_token: str | None = None,
    ) -> Page:
        """One page of questions, newest first, filtered by status and/or thread.

        ``next`` is ``None`` on the last page. With neither filter the sparse ``by-status`` index
        is scanned, which holds questions only.
        """
        limit = max(1, min(limit, MAX_PAGE))
        if status == PENDING and thread_id is None:
            return self._list_pending(limit, next_token)
        kwargs: dict[str, Any] = {"TableName": self.table_name, "Limit": limit}
        if next_token:
            kwargs["ExclusiveStartKey"] = decode_token(next_token)
        if thread_id is not None:
            kwargs |= {
                "IndexName": "by-thread",
                "KeyConditionExpression": "thread_id = :t",
                "ExpressionAttributeValues": {":t": {"S": thread_id}},
                "ScanIndexForward": False,
            }
            if status is not None:
                wanted = OPEN if status == PENDING else (status,)
                names = [f":s{i}" for i in range(len(wanted))]
                kwargs["FilterExpression"] = f"#s IN ({', '.join(names)})"
                kwargs["ExpressionAttributeNames"] = {"#s": "status"}
                kwargs["ExpressionAttributeValues"] |= {
                    n: {"S": w} for n, w in zip(names, wanted, strict=True)
                }
            response = self._client.query(**kwargs)
        elif status is not None:
            kwargs |= {
                "IndexName": "by-status",
                "KeyConditionExpression": "#s = :s",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": {":s": {"S": status}},
                "ScanIndexForward": False,
            }
            response = self._client.query(**kwargs)
        else:
            response = self._client.scan(IndexName="by-status", **kwargs)
        last = response.get("LastEvaluatedKey")
        return Page(
            items=[QuestionRecord.from_item(item) for item in response.get("Items", [])],
            next=encode_token(last) if last else None,
        )

    def _list_pending(self, limit: int, next_token: str | None) -> Page:
        """Newest first across the ``by-status`` partitions of every answerable status.

        Each partition is read newest first from where the last page left it; the newest
        ``limit`` of what comes back form the page, and the token remembers, per partition, the
        last item taken (``None``: nothing taken yet; ``"end"``: read to the end).
        """
        starts = decode_pending_token(next_token) if next_token else dict.fromkeys(OPEN)
        fetched: dict[str, list[dict[str, Any]]] = {}
        more: dict[str, bool] = {}
        for status, start in starts.items():
            if start == "end":
                continue
            kwargs: dict[str, Any] = {
                "TableName": self.table_name,
                "IndexName": "by-status",
                "KeyConditionExpression": "#s = :s",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": {":s": {"S": status}},
                "ScanIndexForward": False,
                "Limit": limit,
            }
            if start is not None:
                kwargs["ExclusiveStartKey"] = start
            response = self._client.query(**kwargs)
            fetched[status] = response.get("Items", [])
            more[status] = "LastEvaluatedKey" in response

        def newest_first(entry: tuple[str, dict[str, Any]]) -> tuple[str, str]:
            item = entry[1]
            return (item["created_at"]["S"], item["dedupe_key"]["S"])

        merged = sorted(
            ((status, item) for status, items in fetched.items() for item in items),
            key=newest_first,
            reverse=True,
        )
        page = merged[:limit]
        positions: dict[str, Any] = dict(starts)
        for status, items in fetched.items():
            taken = [item for s, item in page if s == status]
            if taken:
                last = taken[-1]
                positions[status] = {k: last[k] for k in ("dedupe_key", "status", "created_at")}
            if len(taken) == len(items) and not more[status]:
                positions[status] = "end"
        done = all(position == "end" for position in positions.values())
        return Page(
            items=[QuestionRecord.from_item(item) for _, item in page],
            next=None if done else encode_token({PENDING: positions}),
        )
