"""Starting a run on a thread: ``POST /threads/{thread_id}/runs``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ulid import ULID

if TYPE_CHECKING:
    from pydantic import JsonValue

    from wait_service.ledger import Ledger


@dataclass(frozen=True)
class RunQueued:
    thread_id: str
    status: Literal["queued"] = "queued"


class RunService:
    """Queues a run of the graph on a thread, unless the thread waits on a question.

    A thread that is queued or running takes the new run after the current one: the inbox is
    FIFO per thread (``MessageGroupId = thread_id``).

    The ledger write is the whole request: it records the run queued together with its input, and
    the ledger's stream has the dispatcher enqueue the start message
    (:mod:`wait_service.stream.ledger_stream`). Once the write succeeded the run reaches the runner
    whatever happens to this request after it.

    Examples
    --------
    >>> runs = RunService(Ledger("ledger"))  # doctest: +SKIP
    >>> runs.start("t-1", {"customer": "c-17", "amount": 40})  # doctest: +SKIP
    RunQueued(thread_id='t-1', status='queued')
    """

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def start(self, thread_id: str, input: JsonValue, *, started_by: str | None = None) -> RunQueued:
        """Record the run queued with its input; the start message follows from the ledger's stream.

        ``started_by`` (the caller's principal) is kept with the run: every question the run raises
        records it as ``requested_by`` (separation of duties, :mod:`wait_service.answers.authority`).

        Raises
        ------
        agent_wait.errors.ThreadBusyError
            The thread is parked on questions; its ``pending`` lists them.
        """
        # The conditional write refuses an interrupted thread, and then records nothing at all.
        run_id = str(ULID())
        self.ledger.queue_run(thread_id, run_id, input, started_by=started_by)
        return RunQueued(thread_id=thread_id)
