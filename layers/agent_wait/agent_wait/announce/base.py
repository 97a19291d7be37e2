"""The announcer interface: ``deliver`` may raise, ``announce`` never does."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_wait.envelope import Envelope

__all__ = ["BaseAnnounce", "announce_safely"]

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


def announce_safely(announce: Callable[[Envelope], Any], envelope: Envelope) -> bool:
    """Hand ``envelope`` to ``announce``; log and return ``False`` if it raises, never raise.

    A :class:`BaseAnnounce` already never raises (its result is returned as is); a plain callable
    might, and by then the run has parked or the tool call has returned: a failing sink must not
    fail it. The redelivered run's republish (same ``dedupe_key``) is the retry.

    Examples
    --------
    >>> from agent_wait.envelope import Question, build_envelope
    >>> def down(envelope):
    ...     raise ConnectionError("sink down")
    >>> announce_safely(down, build_envelope("t1", Question(question_id="q1", question="hi")))
    False
    """
    try:
        result = announce(envelope)
    except Exception:
        logger.exception(
            "announcing %s failed",
            envelope.dedupe_key,
            extra={"question_id": envelope.question_id, "thread_id": envelope.thread_id},
        )
        return False
    return result is not False
