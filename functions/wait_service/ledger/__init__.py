"""The ledger: one DynamoDB table holding questions and threads (docs/internals.md).

Split by what it stores: :mod:`.questions` (question items and their status moves, driven by the
status table in :mod:`wait_service.ledger.statuses`), :mod:`.threads` (thread items) and :mod:`.paging`
(listing questions, over the write-sharded index of :mod:`.shards`). :class:`Ledger` is all three
over one table.

Each store is a few parts by responsibility, over the shared writes of its base module:
:class:`QuestionStore` is :mod:`.question_decisions`, :mod:`.question_moves` and
:mod:`.question_authority` over :mod:`.questions`; :class:`ThreadStore` is :mod:`.thread_starts`,
:mod:`.thread_parking` and :mod:`.thread_ends` over :mod:`.threads`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import ClientError

from wait_service.ledger.attributes import (
    Clock,
    from_attribute,
    from_item,
    iso,
    normalize_json,
    parse_time,
    question_key,
    thread_key,
    utcnow,
)
from wait_service.ledger.paging import (
    MAX_PAGE,
    PENDING,
    Page,
    QuestionPaging,
    decode_listing_token,
    decode_token,
    encode_token,
)
from wait_service.ledger.question_authority import QuestionAuthority
from wait_service.ledger.question_decisions import QuestionDecisions
from wait_service.ledger.question_moves import QuestionMoves
from wait_service.ledger.questions import EXPIRED_ANSWER, EXPIRY_ACTOR, QuestionRecord, revoked_answer
from wait_service.ledger.statuses import ANSWERED, CLOSED, OPEN
from wait_service.ledger.thread_ends import RunEnds
from wait_service.ledger.thread_parking import ThreadParking
from wait_service.ledger.thread_starts import ThreadStarts
from wait_service.ledger.threads import RUN_STATUSES, DeferredRun, RunStatus, ThreadRecord

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from mypy_boto3_dynamodb import DynamoDBClient


__all__ = [
    "ANSWERED",
    "CLOSED",
    "EXPIRED_ANSWER",
    "EXPIRY_ACTOR",
    "MAX_PAGE",
    "OPEN",
    "PENDING",
    "RUN_STATUSES",
    "Clock",
    "DeferredRun",
    "Ledger",
    "LedgerSettings",
    "Page",
    "QuestionRecord",
    "RunStatus",
    "ThreadRecord",
    "decode_listing_token",
    "decode_token",
    "encode_token",
    "from_attribute",
    "from_item",
    "iso",
    "normalize_json",
    "parse_time",
    "question_key",
    "revoked_answer",
    "thread_key",
    "utcnow",
]


class QuestionStore(QuestionDecisions, QuestionMoves, QuestionAuthority):
    """Reads and moves question items; a part of :class:`Ledger`."""


class ThreadStore(ThreadStarts, ThreadParking, RunEnds):
    """Reads and writes thread items; a part of :class:`Ledger`."""


class LedgerSettings(Protocol):
    """What :meth:`Ledger.from_settings` reads of the functions' settings (``wait_service.settings``)."""

    @property
    def ledger_ttl_days(self) -> int: ...

    @property
    def listing_shards(self) -> int: ...

    def require(self, name: str) -> str: ...


class Ledger(QuestionStore, ThreadStore, QuestionPaging):
    """Reads and moves question and thread items in the ledger table.

    Takes the parameters of :class:`~wait_service.ledger.table.LedgerTable`.

    Examples
    --------
    >>> ledger = Ledger("agent-wait-ledger")  # doctest: +SKIP
    >>> ledger.record_answer("q-1", {"action": "approve"}, answered_by="ann")  # doctest: +SKIP
    """

    @classmethod
    def from_settings(
        cls, settings: LedgerSettings, dynamodb: DynamoDBClient | None = None, *, clock: Clock = utcnow
    ) -> Ledger:
        """The ledger every function uses: its table, TTL and listing shards named by ``settings``."""
        return cls(
            settings.require("ledger_table"),
            dynamodb,
            clock=clock,
            ttl_days=settings.ledger_ttl_days,
            listing_shards=settings.listing_shards,
        )

    def resumed_and_ended(
        self,
        question: QuestionRecord,
        end: Mapping[str, Any],
        *,
        actor: str = "runner",
        receipt: Mapping[str, Any] | None = None,
        delivered: Sequence[Mapping[str, Any]] = (),
    ) -> bool:
        """Record ``question`` resumed and its thread's run ended, both or neither, in one call.

        ``end`` is :meth:`~ThreadStore.done_write` or :meth:`~ThreadStore.interrupted_write`. The
        two conditional writes go in one ``TransactWriteItems``: a client never sees the thread
        done, or parked on its next question, without this answer applied, and a failure never
        leaves one written without the other. ``False`` when DynamoDB cancelled the transaction
        (a condition failed: a duplicate resume, a run accepted meanwhile, deferred runs; or a
        conflicting write): nothing was written, and the caller records both with
        :meth:`mark_resumed` and the thread's own write. A transaction costs twice the write units
        of the two items written alone. ``delivered``: the run parked on new questions, recorded
        delivered in the same transaction (see :meth:`parked`).
        """
        return self.together([self.resumed_write(question, actor=actor, receipt=receipt), *delivered, end])

    def parked(self, end: Mapping[str, Any], delivered: Sequence[Mapping[str, Any]] = ()) -> bool:
        """Record the thread parked and its new questions delivered, all or nothing, in one call.

        ``end`` is :meth:`~ThreadStore.interrupted_write`; ``delivered`` the
        :meth:`~QuestionStore.delivered_write` of each question every sink took. ``False`` when
        DynamoDB cancelled the transaction (a question no longer ``raised``: a republished one
        already delivered, or one answered meanwhile): nothing was written, and the caller writes
        them one by one, as :meth:`resumed_and_ended` leaves it to.
        """
        return self.together([*delivered, end])

    def together(self, updates: Sequence[Mapping[str, Any]]) -> bool:
        """Send conditional ``UpdateItem`` requests as one ``TransactWriteItems``, all or none.

        ``False`` when DynamoDB cancelled it (a condition failed, or a conflicting write): nothing
        was written. A single request goes alone (a transaction would bill it twice).
        """
        if len(updates) == 1:
            return self._update_if(**updates[0])
        # The requests are built as the single-item writes' own (typed as plain dicts).
        items: Any = [{"Update": dict(update)} for update in updates]
        try:
            self._client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            return False
        return True
