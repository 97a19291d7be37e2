"""What a host (the agent-wait runner, the local stack, a test) lends ``@wait(mode="async")``.

An async-mode ``@wait`` publishes its question itself, at call time. Written with ``announce=``
it uses those announcers wherever it runs. Written without, it asks the host it runs in: the
host opens :func:`hosting_async_waits` around the graph's invocation with the deployment's
announcers, reply URL and default ttl, and every async question raised during that run is
announced through them, so it lands in the same ledger (and on the same topic, outbox and chat
channel) as any other question. The library never imports the host: the host sets a context
variable, ``@wait`` reads it.

The answer to an async question comes back as a new run on the thread, whose input is
``{ASYNC_ANSWER_KEY: {"question_id", "answer", "answered_by"}}``: nothing is parked, so nothing
is resumed. An async question's ``source`` carries ``"mode": "async"``, which is how a host tells
the two kinds apart when the answer arrives.

Examples
--------
>>> from agent_wait import InMemoryAnnounce
>>> sink = InMemoryAnnounce()
>>> current_async_host() is None
True
>>> with hosting_async_waits(AsyncHost(announce=sink, reply_url="https://x/q/{question_id}")):
...     current_async_host().announce is sink
True
>>> current_async_host() is None
True
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from datetime import datetime

    from agent_wait.envelope import Envelope, Question

__all__ = [
    "ASYNC_ANSWER_KEY",
    "ASYNC_MODE",
    "AsyncHost",
    "current_async_host",
    "hosting_async_waits",
    "is_async_source",
]

# The key of a run's input that carries the answer to an async question.
ASYNC_ANSWER_KEY = "agent_wait_answer"
# The value of ``source["mode"]`` on an async question.
ASYNC_MODE = "async"


@dataclass(frozen=True)
class AsyncHost:
    """Announcers and envelope settings a host lends async-mode ``@wait`` calls.

    Attributes
    ----------
    announce:
        Where the envelopes go when the decorator names no ``announce=``.
    reply_url:
        The reply URL template (``{question_id}``) when the decorator names none.
    default_ttl:
        Seconds, for questions whose policy sets no ttl.
    now:
        The host's clock for ``created_at`` (``None``: the system clock).
    override:
        The host's last word on each question before its envelope is built (a policy store's
        override); ``None`` publishes the question as the decorator made it.
    """

    announce: Callable[[Envelope], Any]
    reply_url: str | None = None
    default_ttl: int | None = None
    now: Callable[[], datetime] | None = None
    override: Callable[[Question], Question] | None = None


# A context variable, not a global: LangGraph copies the context into the threads it runs nodes
# on, and two runs in one process (tests, a threaded host) each see their own host.
_HOST: ContextVar[AsyncHost | None] = ContextVar("agent_wait_async_host", default=None)


def current_async_host() -> AsyncHost | None:
    """The host lent by the innermost open :func:`hosting_async_waits`, if any."""
    return _HOST.get()


@contextlib.contextmanager
def hosting_async_waits(host: AsyncHost) -> Iterator[AsyncHost]:
    """Lend ``host`` to every async-mode ``@wait`` called inside the block (nesting restores)."""
    token = _HOST.set(host)
    try:
        yield host
    finally:
        _HOST.reset(token)


def is_async_source(source: Any) -> bool:
    """Whether a question's ``source`` says it was raised by an async-mode ``@wait``.

    Examples
    --------
    >>> is_async_source({"function": "f", "module": "m", "mode": "async"}), is_async_source(None)
    (True, False)
    """
    return isinstance(source, dict) and source.get("mode") == ASYNC_MODE
