"""The status machine of a question: one table, from which everything else is derived.

Each status names the statuses it may move to, and its *phase*: whether the question is still
``open`` (a person may answer), carries a person's answer (``answered``), or was closed without one
(``expired``, ``revoked``). The ledger's conditional writes (``allowed_from``), the api's refusals
(409 when an answer stands, 410 when the question was closed), the ``pending`` filter and the state
diagram in ``docs/internals.md`` (:func:`mermaid`) all read this table, so adding a stage is one
edit here.

Examples
--------
>>> allowed_from("answered")
('raised', 'delivered', 'escalated')
>>> phase_of("escalated"), phase_of("resume_failed"), phase_of("revoked")
('open', 'answered', 'revoked')
>>> sorted(RESUMING)
['answered', 'expired', 'revoked']
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Literal

Phase = Literal["open", "answered", "expired", "revoked"]


@dataclass(frozen=True)
class Status:
    """One status: its phase, the statuses it may move to, and what it means."""

    phase: Phase
    next: tuple[str, ...]
    meaning: str
    # Moving into this status decides the question: the thread is resumed with its answer.
    resumes: bool = False


# Reading order is the happy path first. `escalated -> escalated` is the next rung of a ladder.
STATUSES: dict[str, Status] = {
    "raised": Status(
        "open",
        ("delivered", "escalated", "answered", "expired", "revoked"),
        "recorded by the runner when the thread parked",
    ),
    "delivered": Status(
        "open",
        ("escalated", "answered", "expired", "revoked"),
        "every sink (ledger, topic, outbox) took the envelope",
    ),
    "escalated": Status(
        "open",
        ("escalated", "answered", "expired", "revoked"),
        "the ttl ran out and the question moved one rung up its ladder; still answerable",
    ),
    "answered": Status(
        "answered", ("resumed", "resume_failed"), "a person's answer was recorded", resumes=True
    ),
    "resumed": Status("answered", (), "the thread ran on with the answer"),
    "resume_failed": Status(
        "answered", ("resumed",), "every attempt to resume the thread failed (a DLQ redrive may still)"
    ),
    "expired": Status(
        "expired",
        (),
        "the ttl ran out: the default answer (or a rejection) was recorded by the system",
        resumes=True,
    ),
    "revoked": Status(
        "revoked", (), "withdrawn before anyone answered; the thread gets a rejection", resumes=True
    ),
}

QUESTION_STATUSES: tuple[str, ...] = tuple(STATUSES)
# Every status from which a person may still answer: the `status=pending` filter.
OPEN: tuple[str, ...] = tuple(name for name, status in STATUSES.items() if status.phase == "open")
# Statuses in which a person's answer stands: a repeat is 200, a different answer 409.
ANSWERED: tuple[str, ...] = tuple(name for name, status in STATUSES.items() if status.phase == "answered")
# Statuses closed without a person's answer: a reply is 410.
CLOSED: tuple[str, ...] = tuple(
    name for name, status in STATUSES.items() if status.phase in ("expired", "revoked")
)
# Statuses whose recorded answer the runner may resume a thread with.
RESUMING: frozenset[str] = frozenset(name for name, status in STATUSES.items() if status.resumes)
# The statuses in which the answer the thread was (or will be) resumed with is recorded.
DECIDED: tuple[str, ...] = ANSWERED + CLOSED


@cache
@cache
def allowed_from(to: str) -> tuple[str, ...]:
    """The statuses a question may move to ``to`` from (the conditional write's ``IN`` list).

    Every conditional write of a question asks; the table never changes, so each answer is kept.
    """
    if to not in STATUSES:
        raise KeyError(f"unknown question status {to!r}")
    return tuple(name for name, status in STATUSES.items() if to in status.next)


def phase_of(status: str) -> Phase:
    return STATUSES[status].phase


def mermaid() -> str:
    """The state diagram of :data:`STATUSES` as a Mermaid ``stateDiagram-v2`` block.

    ``docs/internals.md`` holds this text verbatim; a test fails when the two differ.
    """
    lines = ["stateDiagram-v2", "    [*] --> raised"]
    for name, status in STATUSES.items():
        for target in status.next:
            lines.append(f"    {name} --> {target}")
        if not status.next:
            lines.append(f"    {name} --> [*]")
    return "\n".join(lines)
