"""Where a question is listed: the write-sharded ``by-status`` index.

The index is keyed on ``status_shard = <listing>#<n>`` (sorted by ``created_at``), where
``<listing>`` is ``open`` for every status a person may still answer (``raised``, ``delivered``,
``escalated``) and the status itself otherwise, and ``n`` (0 to :data:`STATUS_SHARDS` - 1) comes
from the question id (:func:`agent_wait.aws.dynamodb.status_shard`). Only question items carry the
attribute, so the index is sparse: no thread item is in it.

Why one ``open`` listing: the moves a question makes while open (delivered, reminded, escalated)
keep its key, so DynamoDB updates the index entry in place instead of deleting it and putting it
in another partition, and ``status=pending`` reads one listing instead of three.

Why sixteen shards: a DynamoDB partition takes at most 1,000 write units a second, and an index
entry put, updated or deleted costs one write unit per KB of what the index projects (the envelope
is left out: ``python -m bench.item_sizes`` measures the entries). Per question started and
answered with a ttl and two reminders, the ``open`` listing takes a put (1 WRU: about 0.8 KB), the
delivered update (1), two reminder updates (2 each: the lifecycle passes 1 KB) and the delete at the
answer (2): 8 WRU. At 1,000 questions a second that is 8,000 WRU/s, 500 per shard over sixteen
(about 250 when the answer comes before the reminders); ``answered`` takes a put and a delete of
about 1.4 KB (4 WRU: 250 WRU/s per shard) and ``resumed`` a put (2 WRU: 125 per shard). Unsharded,
the ``open`` partition would take 8,000 WRU/s against its 1,000. More shards spread writes further
but cost a page one more Query each (:mod:`wait_service.ledger.paging` sends them at once, and
reads about ``2 * limit / shards`` items from each).
"""

from __future__ import annotations

from agent_wait.aws.dynamodb import STATUS_SHARDS, status_shard
from wait_service.statuses import OPEN

__all__ = ["OPEN_LISTING", "STATUS_SHARDS", "listing_of", "shard_of", "shards_of"]

# The listing of every status a person may still answer (the `status=pending` filter).
OPEN_LISTING = "open"


def listing_of(status: str) -> str:
    """The listing a question in ``status`` is in.

    Examples
    --------
    >>> listing_of("delivered"), listing_of("answered")
    ('open', 'answered')
    """
    return OPEN_LISTING if status in OPEN else status


def shard_of(status: str, question_id: str) -> str:
    """The ``status_shard`` of question ``question_id`` in ``status``."""
    return status_shard(listing_of(status), question_id)


def shards_of(listing: str) -> tuple[str, ...]:
    """Every ``status_shard`` value of ``listing``, in shard order.

    Examples
    --------
    >>> shards_of("open")[:2], len(shards_of("open")) == STATUS_SHARDS
    (('open#0', 'open#1'), True)
    """
    return tuple(f"{listing}#{number}" for number in range(STATUS_SHARDS))
