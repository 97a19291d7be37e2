"""The announcer interface: ``deliver`` may raise, ``announce`` never does."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_wait.envelope import Envelope

__all__ = ["BaseAnnounce"]

logger = logging.getLogger("agent_wait")


class BaseAnnounce(ABC):
    """Deliver envelopes somewhere; failures are logged, never raised.

    Subclasses implement :meth:`deliver`. A failing sink must not fail a run that has already
    parked: :meth:`announce` catches what ``deliver`` raises, logs it on the ``agent_wait``
    logger and returns ``False``. There is no retry here: a redelivered run republishes with the
    same ``dedupe_key``, and that is the retry.

    Examples
    --------
    >>> class Printer(BaseAnnounce):
    ...     name = "printer"
    ...     def deliver(self, envelope):
    ...         raise RuntimeError("printer on fire")
    >>> from datetime import datetime, timezone
    >>> from agent_wait.envelope import Question, build_envelope
    >>> env = build_envelope("t1", Question(question_id="q1", question="hi"))
    >>> Printer().announce(env)
    False
    """

    name: str = "announce"

    @abstractmethod
    def deliver(self, envelope: Envelope) -> None:
        """Send ``envelope`` to the sink; raise on failure."""

    def announce(self, envelope: Envelope) -> bool:
        """Deliver ``envelope``; return ``True`` on success, log and return ``False`` on any error."""
        try:
            self.deliver(envelope)
        except Exception:
            logger.exception(
                "announcer %s failed to deliver %s",
                self.name,
                envelope.dedupe_key,
                extra={
                    "announcer": self.name,
                    "question_id": envelope.question_id,
                    "thread_id": envelope.thread_id,
                },
            )
            return False
        return True

    def __call__(self, envelope: Envelope) -> bool:
        """Same as :meth:`announce`, so an announcer is a plain callable too."""
        return self.announce(envelope)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
