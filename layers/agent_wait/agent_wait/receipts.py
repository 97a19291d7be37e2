"""Receipts: what a resumed ``@wait`` call actually did, once the human's answer reached it.

An approval says what a human authorised; a receipt says what ran. ``@wait`` emits one
:class:`Receipt` when a resumed call finishes: ``ran=True`` with the arguments the body was
called with (published form: the hidden and framework-injected ones left out) and whether it
returned or raised; ``ran=False`` when the answer was a rejection, or anything else returned in
place of the call. A host (the runner of a deployment, a test) opens :func:`collect_receipts`
around the run that resumes a thread and stores what it collected next to the answer.

Receipts are per process: :func:`collect_receipts` sees every receipt emitted while it is open,
from any thread (LangGraph runs nodes and tools on worker threads), so open it around one resume
at a time per process, or filter the collected receipts by ``question_id``.

Examples
--------
>>> from datetime import UTC, datetime
>>> with collect_receipts() as receipts:
...     emit_receipt(Receipt(question_id="q1", ran=False, at=datetime(2026, 1, 1, tzinfo=UTC)))
>>> [(r.question_id, r.ran) for r in receipts]
[('q1', False)]
"""

from __future__ import annotations

import contextlib
import logging
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, JsonValue, field_validator

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["Receipt", "collect_receipts", "emit_receipt"]

logger = logging.getLogger("agent_wait")

_lock = threading.Lock()
_collectors: list[list[Receipt]] = []


class Receipt(BaseModel):
    """What one resumed ``@wait`` call did.

    Attributes
    ----------
    question_id:
        The question the call was parked on.
    ran:
        Whether the body ran.
    args:
        The arguments the body ran with, published form (``None`` when it did not run).
    outcome:
        ``"returned"`` or ``"raised"`` when the body ran; ``None`` otherwise.
    error:
        ``"<ExceptionType>: <message>"`` when the body raised.
    at:
        When the call finished (UTC).

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> r = Receipt(question_id="q1", ran=True, args={"amount": 25}, outcome="returned",
    ...             at=datetime(2026, 1, 1, tzinfo=UTC))
    >>> r.model_dump(mode="json")["at"]
    '2026-01-01T00:00:00Z'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    question_id: str
    ran: bool
    args: dict[str, JsonValue] | None = None
    outcome: Literal["returned", "raised"] | None = None
    error: str | None = None
    at: datetime

    @field_validator("at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("at must be timezone-aware (UTC)")
        return value.astimezone(UTC)


def emit_receipt(receipt: Receipt) -> None:
    """Hand ``receipt`` to every open :func:`collect_receipts` and log it (logger ``agent_wait``).

    Never raises because of a collector: a receipt is evidence, not control flow.

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> emit_receipt(Receipt(question_id="q1", ran=False, at=datetime.now(UTC)))  # nobody listening
    """
    logger.info("receipt question_id=%s ran=%s outcome=%s", receipt.question_id, receipt.ran, receipt.outcome)
    with _lock:
        for collected in _collectors:
            collected.append(receipt)


@contextlib.contextmanager
def collect_receipts() -> Iterator[list[Receipt]]:
    """Collect every receipt emitted in this process, from any thread, while the block runs.

    Yields the list the receipts are appended to, in emission order. Collectors nest: each open
    one receives every receipt.

    Examples
    --------
    See the module docstring.
    """
    collected: list[Receipt] = []
    with _lock:
        _collectors.append(collected)
    try:
        yield collected
    finally:
        with _lock:
            # Remove this very list (another open collector may hold an equal one).
            for index, candidate in enumerate(_collectors):
                if candidate is collected:
                    del _collectors[index]
                    break
