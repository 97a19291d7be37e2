"""Starting a run on a thread: ``POST /threads/{thread_id}/runs``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ulid import ULID

if TYPE_CHECKING:
    from pydantic import JsonValue

    from wait_service.inbox import Inbox
    from wait_service.ledger import Ledger


@dataclass(frozen=True)
class RunQueued:
    thread_id: str
    status: Literal["queued"] = "queued"


class RunService:
    """Queues a run of the graph on a thread, unless the thread waits on a question.

    A thread that is queued or running takes the new run after the current one: the inbox is
    FIFO per thread (``MessageGroupId = thread_id``).

    Examples
    --------
    >>> runs = RunService(Ledger("ledger"), Inbox(url))  # doctest: +SKIP
    >>> runs.start("t-1", {"customer": "c-17", "amount": 40})  # doctest: +SKIP
    RunQueued(thread_id='t-1', status='queued')
    """

    def __init__(self, ledger: Ledger, inbox: Inbox) -> None:
        self.ledger = ledger
        self.inbox = inbox

    def start(self, thread_id: str, input: JsonValue) -> RunQueued:
        """Mark the thread queued and enqueue the start message.

        Raises
        ------
        agent_wait.errors.ThreadBusyError
            The thread is parked on questions; its ``pending`` lists them.
        """
        # The conditional write refuses an interrupted thread; only then is anything enqueued.
        run_id = str(ULID())
        self.ledger.queue_thread(thread_id, run_id)
        self.inbox.start(thread_id, input, run_id=run_id)
        return RunQueued(thread_id=thread_id)
