"""The ledger: one DynamoDB table holding questions and threads (docs/internals.md).

Split by what it stores: :mod:`.questions` (question items and their status moves, driven by the
status table in :mod:`wait_service.statuses`), :mod:`.threads` (thread items) and :mod:`.paging`
(listing questions). :class:`Ledger` is all three over one table.
"""

from __future__ import annotations

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
    decode_pending_token,
    decode_token,
    encode_token,
)
from wait_service.ledger.questions import (
    EXPIRED_ANSWER,
    EXPIRY_ACTOR,
    QuestionRecord,
    QuestionStore,
    revoked_answer,
)
from wait_service.ledger.threads import RUN_STATUSES, DeferredRun, RunStatus, ThreadRecord, ThreadStore
from wait_service.statuses import ANSWERED, CLOSED, OPEN

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
    "Page",
    "QuestionRecord",
    "RunStatus",
    "ThreadRecord",
    "decode_pending_token",
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


class Ledger(QuestionStore, ThreadStore, QuestionPaging):
    """Reads and moves question and thread items in the ledger table.

    Takes the parameters of :class:`~wait_service.ledger.table.LedgerTable`.

    Examples
    --------
    >>> ledger = Ledger("agent-wait-ledger")  # doctest: +SKIP
    >>> ledger.record_answer("q-1", {"action": "approve"}, answered_by="ann")  # doctest: +SKIP
    """
