"""Pages of questions, newest first, by status and/or thread (the ``by-status``/``by-thread`` indexes).

A status filter reads the write-sharded ``by-status`` index (:mod:`wait_service.ledger.shards`):
one Query per shard (one in all with a single shard, the default), sent at once and merged newest
first; ``next`` is an opaque token as for every other page.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from agent_wait.errors import InvalidRequestError
from wait_service.constants import LISTED_ATTRIBUTES
from wait_service.ledger.questions import QuestionRecord, projection
from wait_service.ledger.shards import OPEN_LISTING, STATUS_SHARDS, listing_of, shards_of
from wait_service.ledger.statuses import OPEN
from wait_service.ledger.table import LedgerTable

if TYPE_CHECKING:
    from collections.abc import Mapping

# The `status` filter that lists every question still waiting for an answer.
PENDING = "pending"
MAX_PAGE = 100
# A thread's page reads its items in one BatchGetItem (at most 100 keys, MAX_PAGE); keys DynamoDB
# leaves unprocessed are read again after 50, 100, 200 ... ms, in 6 reads at most.
UNPROCESSED_ATTEMPTS = 6
UNPROCESSED_BACKOFF_SECONDS = 0.05
# The key of a `by-status` entry: the table's key and the index's.
INDEX_KEYS = ("dedupe_key", "status_shard", "created_at")


def encode_token(last_key: Mapping[str, Any]) -> str:
    """An opaque page token: url-safe base64 of the ``LastEvaluatedKey`` JSON."""
    return base64.urlsafe_b64encode(json.dumps(last_key, sort_keys=True).encode()).decode()


def listing_query(status: str) -> tuple[str, str | None]:
    """The listing a ``status`` filter reads, and the status it keeps (``None``: all of them).

    Examples
    --------
    >>> listing_query("pending"), listing_query("raised"), listing_query("answered")
    (('open', None), ('open', 'raised'), ('answered', None))
    """
    if status == PENDING:
        return OPEN_LISTING, None
    listing = listing_of(status)
    return listing, (status if listing == OPEN_LISTING else None)


def decode_listing_token(
    token: str, status: str, shards: int = STATUS_SHARDS
) -> tuple[dict[str, Any], str | None]:
    """The per-shard positions of a page token of ``status=<status>`` (keys not yet checked) over
    ``shards`` shards, and the ``created_at`` no later item may pass.

    A position is ``None`` (nothing taken from the shard yet: read it from ``before`` down),
    ``"end"`` (read to the end) or the index key (``dedupe_key``, ``status_shard``, ``created_at``)
    to read on after. A token taken before the count was raised names fewer shards: the others
    are read from ``before`` down, as a shard nothing was taken from yet.
    """
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, binascii.Error, RecursionError) as exc:
        # RecursionError: a token nesting thousands of levels is as malformed as any other.
        raise InvalidRequestError("next is not a page token", field="next") from exc
    wrong = InvalidRequestError(f"next is not a page token of status={status}", field="next")
    if not isinstance(decoded, dict) or decoded.get("status") != status:
        raise wrong
    positions, before = decoded.get("shards"), decoded.get("before")
    every = shards_of(listing_query(status)[0], shards)
    if not isinstance(positions, dict) or not positions or not set(positions) <= set(every):
        raise wrong
    if not isinstance(before, str) or not before:
        raise wrong
    return {shard: positions.get(shard) for shard in every}, before


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
        if thread_id is not None:
            return self._list_thread(thread_id, status, limit, next_token)
        if status is not None:
            return self._list_sharded(status, limit, next_token)
        kwargs: dict[str, Any] = {"TableName": self.table_name, "Limit": limit}
        if next_token:
            kwargs["ExclusiveStartKey"] = decode_token(next_token)
        response = self._client.scan(IndexName="by-status", **kwargs)
        last = response.get("LastEvaluatedKey")
        return Page(
            items=[QuestionRecord.from_item(item) for item in response.get("Items", [])],
            next=encode_token(last) if last else None,
        )

    def _list_thread(self, thread_id: str, status: str | None, limit: int, next_token: str | None) -> Page:
        """A thread's questions, newest first: ``limit`` keys from the ``by-thread`` index, then their
        items from the table in one ``BatchGetItem``.

        The index holds keys only, so a question's moves never write it. As with a filtered
        Query, ``limit`` counts the keys read: with a ``status``, a page holds those of them in
        that status, and may hold none while ``next`` goes on. A question removed (by its TTL)
        between the two reads is left out.
        """
        request = self._partition_query("by-thread", "thread_id", thread_id, limit)
        if next_token:
            request["ExclusiveStartKey"] = decode_token(next_token)
        response = self._client.query(**request)
        keys = [str(entry["dedupe_key"]["S"]) for entry in response.get("Items", [])]
        items = self._get_many(keys)
        records = [QuestionRecord.from_item(items[key]) for key in keys if key in items]
        if status is not None:
            wanted = OPEN if status == PENDING else frozenset({status})
            records = [record for record in records if record.status in wanted]
        last = response.get("LastEvaluatedKey")
        return Page(items=records, next=encode_token(last) if last else None)

    def _get_many(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The question items at ``keys`` (at most :data:`MAX_PAGE`), as a page lists them, by key.

        The keys DynamoDB leaves unprocessed (throttled) are asked for again, after a backoff
        doubling from :data:`UNPROCESSED_BACKOFF_SECONDS`; still unprocessed after
        :data:`UNPROCESSED_ATTEMPTS` requests, the read fails as a throttled call does.
        """
        found: dict[str, dict[str, Any]] = {}
        read = projection((*LISTED_ATTRIBUTES, "dedupe_key", "created_at"))
        pending: dict[str, Any] = (
            {self.table_name: {"Keys": [{"dedupe_key": {"S": key}} for key in keys], **read}} if keys else {}
        )
        for attempt in range(UNPROCESSED_ATTEMPTS):
            if not pending:
                return found
            if attempt:
                self._sleep(UNPROCESSED_BACKOFF_SECONDS * 2 ** (attempt - 1))
            response = self._client.batch_get_item(RequestItems=pending)
            for item in response.get("Responses", {}).get(self.table_name, []):
                found[str(item["dedupe_key"]["S"])] = dict(item)
            pending = response.get("UnprocessedKeys") or {}
        if not pending:
            return found
        left = sum(len(request.get("Keys", [])) for request in pending.values())
        raise ClientError(
            {
                "Error": {
                    "Code": "ProvisionedThroughputExceededException",
                    "Message": f"{left} of a page's questions were left unprocessed "
                    f"after {UNPROCESSED_ATTEMPTS} reads",
                }
            },
            "BatchGetItem",
        )

    def _list_sharded(self, status: str, limit: int, next_token: str | None) -> Page:
        """Newest first across the shards of ``status``'s listing: a merge of one Query per shard.

        Every shard is read newest first from where the last page left it, ``per`` items at a
        time, all shards at once; the page takes the newest head of all shards one at a time, and
        a shard whose read items are all taken (or filtered out) is read on before the next is
        taken, so no shard's newer item is ever passed over. The token remembers, per shard,
        where to read on (``"end"``: read to the end), and the token's ``before`` the ``created_at``
        of the last item listed: a shard nothing was taken from yet is read from there down, so an
        item added since (newer) is not listed out of order. An item moved out of the listing
        meanwhile is not listed again, and an item is never listed twice.
        """
        listing, keep = listing_query(status)
        shards = shards_of(listing, self.listing_shards)
        positions: dict[str, Any] = dict.fromkeys(shards)
        before: str | None = None
        if next_token:
            positions, before = decode_listing_token(next_token, status, self.listing_shards)
        live = [shard for shard in shards if positions[shard] != "end"]
        # Enough for a page from each shard when the newest items are spread evenly, with room
        # for the unevenness of a hash: most pages need one round of Queries.
        per = min(limit, 2 * -(-limit // len(shards)))
        read: dict[str, deque[dict[str, Any]]] = {shard: deque() for shard in live}
        more: dict[str, Any] = {shard: positions[shard] or True for shard in live}

        def fetch(batch: list[tuple[str, int]]) -> None:
            responses = self._query_all(
                [self._shard_query(shard, more[shard], keep, size, before) for shard, size in batch]
            )
            for (shard, _), response in zip(batch, responses, strict=True):
                read[shard].extend(response.get("Items", []))
                more[shard] = response.get("LastEvaluatedKey")

        fetch([(shard, per) for shard in live])
        page: list[dict[str, Any]] = []
        while len(page) < limit:
            dry = [shard for shard in live if not read[shard] and more[shard]]
            if dry:
                fetch([(shard, max(per, limit - len(page))) for shard in dry])
                continue
            heads = [shard for shard in live if read[shard]]
            if not heads:
                break
            shard = max(heads, key=lambda s: _newest_first(read[s][0]))
            item = read[shard].popleft()
            page.append(item)
            positions[shard] = {name: item[name] for name in INDEX_KEYS}
        for shard in live:
            if not read[shard]:
                # Everything read from this shard was taken or filtered out: read on after it.
                positions[shard] = more[shard] if more[shard] else "end"
        done = all(position == "end" for position in positions.values())
        if page:
            before = page[-1]["created_at"]["S"]
        token = {"status": status, "shards": positions, "before": before}
        return Page(
            items=[QuestionRecord.from_item(item) for item in page],
            next=None if done else encode_token(token),
        )

    def _shard_query(
        self, shard: str, start: Any, keep: str | None, limit: int, before: str | None
    ) -> dict[str, Any]:
        kwargs = self._partition_query("by-status", "status_shard", shard, limit)
        if isinstance(start, dict):
            kwargs["ExclusiveStartKey"] = start
        elif before is not None:
            kwargs["KeyConditionExpression"] += " AND created_at <= :b"
            kwargs["ExpressionAttributeValues"][":b"] = {"S": before}
        if keep is not None:
            kwargs["FilterExpression"] = "#s = :s"
            kwargs["ExpressionAttributeNames"] = {"#s": "status"}
            kwargs["ExpressionAttributeValues"][":s"] = {"S": keep}
        return kwargs

    def _partition_query(self, index: str, partition_key: str, value: str, limit: int) -> dict[str, Any]:
        """A Query of one partition of ``index``, newest first, of ``limit`` entries at most."""
        return {
            "TableName": self.table_name,
            "IndexName": index,
            "KeyConditionExpression": f"{partition_key} = :p",
            "ExpressionAttributeValues": {":p": {"S": value}},
            "ScanIndexForward": False,
            "Limit": limit,
        }

    def _query_all(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The Queries' responses in order, sent at once (a boto3 client is thread-safe)."""
        if len(requests) == 1:
            return [dict(self._client.query(**requests[0]))]
        with ThreadPoolExecutor(max_workers=len(requests)) as pool:
            return [dict(r) for r in pool.map(lambda request: self._client.query(**request), requests)]


def _newest_first(item: Mapping[str, Any]) -> tuple[str, str]:
    return (item["created_at"]["S"], item["dedupe_key"]["S"])
