"""Fan one envelope out to several announcers at once, each isolated from the others."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from agent_wait.announce.base import BaseAnnounce
from agent_wait.errors import AnnounceError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_wait.envelope import Envelope

__all__ = ["CompositeAnnounce"]

logger = logging.getLogger("agent_wait")


class CompositeAnnounce(BaseAnnounce):
    """Deliver to every child concurrently; one failing child never stops the others.

    ``announce`` returns ``True`` iff every child delivered; ``deliver`` raises
    :class:`~agent_wait.errors.AnnounceError` naming the children that failed (each of which has
    already logged its own error).

    Parameters
    ----------
    children:
        The announcers to deliver to.
    name:
        Name used in logs.

    Examples
    --------
    >>> from agent_wait.announce.memory import InMemoryAnnounce
    >>> from agent_wait.envelope import Question, build_envelope
    >>> a, b = InMemoryAnnounce(), InMemoryAnnounce()
    >>> CompositeAnnounce([a, b]).announce(build_envelope("t1", Question(question_id="q1", question="hi")))
    True
    >>> len(a.envelopes), len(b.envelopes)
    (1, 1)
    """

    def __init__(self, children: Sequence[BaseAnnounce], *, name: str = "composite") -> None:
        self.children = list(children)
        self.name = name

    def deliver(self, envelope: Envelope) -> None:
        if not self.children:
            return
        with ThreadPoolExecutor(
            max_workers=len(self.children), thread_name_prefix="agent-wait-announce"
        ) as pool:
            futures = [(child, pool.submit(_announce_isolated, child, envelope)) for child in self.children]
            failed = [child.name for child, future in futures if not future.result()]
        if failed:
            raise AnnounceError(
                f"{len(failed)} of {len(self.children)} announcers failed: {', '.join(failed)}",
                question_id=envelope.question_id,
                thread_id=envelope.thread_id,
            )


def _announce_isolated(child: BaseAnnounce, envelope: Envelope) -> bool:
    try:
        return bool(child.announce(envelope))
    except Exception:
        # A child that overrides announce() and breaks its "never raises" contract is isolated too.
        logger.exception(
            "announcer %s failed to deliver %s",
            child.name,
            envelope.dedupe_key,
            extra={
                "announcer": child.name,
                "question_id": envelope.question_id,
                "thread_id": envelope.thread_id,
            },
        )
        return False
