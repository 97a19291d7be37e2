"""Where a question is listed: the write-sharded ``by-status`` index.

The index is keyed on ``status_shard = <listing>#<n>`` (sorted by ``created_at``), where
``<listing>`` is ``open`` for every status a person may still answer (``raised``, ``delivered``,
``escalated``) and the status itself otherwise, and ``n`` (0 to ``shards`` - 1) comes from the
question id (:func:`agent_wait.aws.dynamodb.status_shard`). ``shards`` is the deployment's
``listing_shards`` (``AGENT_WAIT_LISTING_SHARDS``, default 1). Only question items carry the
attribute, so the index is sparse: no thread item is in it; and it projects only what a page shows
(``wait_service.resources.LISTED_ATTRIBUTES``: not the envelope, the largest attribute).

Why one ``open`` listing: the moves a question makes while open (delivered, reminded, escalated)
keep its key, so DynamoDB updates the index entry in place instead of deleting it and putting it
in another partition, and ``status=pending`` reads one listing instead of three.

How many shards: a page reads one Query per shard (:mod:`wait_service.ledger.paging` sends them at
once), and a DynamoDB partition takes at most 1,000 write units a second. An index entry put,
updated or deleted costs one write unit per KB of the entry, and a write that changes no projected
attribute costs the index nothing (``python -m bench.item_sizes`` measures the entries: 775 B for
a delivered question, 1,145 to 1,160 B resumed; the capacity run's answered ones 1,182 B). Each
move while open changes what a page shows, so each rewrites the entry: delivered (status,
``updated_at``, ``lifecycle``), reminded (``updated_at`` and a ``lifecycle`` stage;
``reminders_sent`` is not projected), escalated (status, rung, ``expires_at``, ``lifecycle``), and
a vote, delegation or extension. Per question started and answered with a ttl and two reminders,
the ``open`` listing takes a put (1 WRU), the delivered update (1), two reminder updates and the
delete at the answer: 1 each while the entry is under 1 KB (the sample agent's: 5 WRU), 2 once
its question, policy and lifecycle pass it. :data:`OPEN_WRU_PER_QUESTION` = 8 WRU counts the
later three at 2, for questions larger than the sample's; ``answered`` takes a put and a delete
(2 to 4), ``resumed`` a put (2). So one shard (the default: a page is one Query) keeps the
``open`` partition at half its limit up to about 60 questions a second, above what the default
API throttle (50 requests a second) lets in; sixteen do at 1,000 questions a second (500 WRU/s a
shard). :func:`shards_for_rate` is the rule docs/performance.md's table follows.

Changing the count on a table in use: ``n`` is the question id's hash modulo the count, so the
shards written under a lower count are the first shards of a higher one, and a page reads shards
``0`` to ``shards - 1``: raising the count keeps every question listed (a question moves to its
new shard on its next move), and a page token taken under the lower count reads on across the new
shards. Lowering it would hide the open questions listed in the shards above the new count: keep
the highest count a table was ever written with (docs/deploy.md); a page token naming shards above
the count is refused rather than read over fewer shards.
"""

from __future__ import annotations

import math

from agent_wait.aws.dynamodb import MAX_STATUS_SHARDS, STATUS_SHARDS, status_shard
from wait_service.ledger.statuses import OPEN

__all__ = [
    "MAX_STATUS_SHARDS",
    "OPEN_LISTING",
    "OPEN_WRU_PER_QUESTION",
    "STATUS_SHARDS",
    "listing_of",
    "shard_of",
    "shards_for_rate",
    "shards_of",
]

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


# Write units the `open` listing takes per question started and answered with a ttl and two
# reminders (the module's docstring counts them), and the share of a partition's 1,000 WRU/s a
# shard is sized to take at the planned rate (the rest is room for bursts and an uneven hash).
OPEN_WRU_PER_QUESTION = 8
PARTITION_WRU = 1000
SHARD_SHARE = 0.5


def shard_of(status: str, question_id: str, shards: int = STATUS_SHARDS) -> str:
    """The ``status_shard`` of question ``question_id`` in ``status``, over ``shards`` shards."""
    return status_shard(listing_of(status), question_id, shards)


def shards_of(listing: str, shards: int = STATUS_SHARDS) -> tuple[str, ...]:
    """Every ``status_shard`` value of ``listing`` over ``shards`` shards, in shard order.

    Examples
    --------
    >>> shards_of("open"), shards_of("open", 16)[:2], len(shards_of("open", 16))
    (('open#0',), ('open#0', 'open#1'), 16)
    """
    return tuple(f"{listing}#{number}" for number in range(shards))


def shards_for_rate(questions_per_second: float, wru_per_question: float = OPEN_WRU_PER_QUESTION) -> int:
    """The fewest shards that keep each at half a partition's write limit at this rate.

    Examples
    --------
    >>> [shards_for_rate(r) for r in (10, 60, 100, 250, 500, 1000, 2000)]
    [1, 1, 2, 4, 8, 16, 32]
    """
    needed = math.ceil(questions_per_second * wru_per_question / (PARTITION_WRU * SHARD_SHARE))
    return max(1, min(MAX_STATUS_SHARDS, needed))
