"""Where a question is listed: the write-sharded ``by-status`` index.

The index is keyed on ``status_shard = <listing>#<n>`` (sorted by ``created_at``), where
``<listing>`` is ``open`` for every status a person may still answer (``raised``, ``delivered``,
``escalated``) and the status itself otherwise, and ``n`` (0 to :data:`STATUS_SHARDS` - 1) comes
from the question id (:func:`agent_wait.aws.dynamodb.status_shard`). Only question items carry the
attribute, so the index is sparse: no thread item is in it.

Why one ``open`` listing: the moves a question makes while open (delivered, reminded, escalated)
keep its key, so DynamoDB updates the index entry in place instead of deleting it and putting it
in another partition, and ``status=pending`` reads one listing instead of three.

Why eight shards: a DynamoDB partition takes at most 1,000 write units a second, and an index
entry written, updated or deleted costs one write unit per KB of what the index projects. At
1,000 questions a second, each started and answered with a ttl and two reminders, the ``open``
listing takes about 5 index writes per question (put, delivered, two reminders, delete at the
answer) of under 1 KB each (the projection leaves out the envelope): about 5,000 WRU/s, or
625 WRU/s per partition over eight shards, about 375 WRU/s per partition without reminders;
``answered`` takes a put and a delete (about 250 WRU/s per partition) and ``resumed`` a put
(about 125). The README's "Scale" section has the measured sizes. More shards spread writes
further but cost a page one more Query each (:mod:`wait_service.ledger.paging` runs them at once).
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
