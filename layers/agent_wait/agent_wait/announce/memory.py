"""The reference announcer: keeps envelopes in a list."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from agent_wait.announce.base import BaseAnnounce

if TYPE_CHECKING:
    from agent_wait.envelope import Envelope

__all__ = ["InMemoryAnnounce"]


class InMemoryAnnounce(BaseAnnounce):
    """Record every delivered envelope in :attr:`envelopes` (thread safe).

    The reference implementation of :class:`~agent_wait.announce.base.BaseAnnounce`: it passes
    ``agent_wait.testing.AnnounceConformance`` and backs unit tests and the in-process demo.

    Examples
    --------
    >>> from agent_wait.envelope import Question, build_envelope
    >>> sink = InMemoryAnnounce()
    >>> sink(build_envelope("t1", Question(question_id="q1", question="hi")))
    True
    >>> sink.envelopes[0].dedupe_key
    'wait.created:q1'
    """

    def __init__(self, *, name: str = "memory") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._envelopes: list[Envelope] = []

    @property
    def envelopes(self) -> list[Envelope]:
        """A copy of the envelopes delivered so far, in delivery order."""
        with self._lock:
            return list(self._envelopes)

    def deliver(self, envelope: Envelope) -> None:
        with self._lock:
            self._envelopes.append(envelope)
