from __future__ import annotations

import math

from agent_wait.aws.dynamodb import MAX_STATUS_SHARDS, STATUS_SHARDS, status_shard
from wait_service.statuses import OPEN

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
