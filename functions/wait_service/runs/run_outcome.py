"""What the parts of the runner share: the graph seam, a message's outcome, the runner's state."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic_core import to_json

from agent_wait.errors import AnnounceError

if TYPE_CHECKING:
    from concurrent.futures import Future

    from agent_wait import BaseAnnounce, Envelope
    from agent_wait.envelope import Question
    from agent_wait.receipts import Receipt
    from wait_service.ledger import Clock, Ledger
    from wait_service.lifecycle.timers import Timers
    from wait_service.runs.checkpoint_prefetch import PrefetchingSaver
    from wait_service.runs.inbox import Inbox
    from wait_service.settings import Durability


PublishFn = Callable[..., list["Envelope"]]

# Statuses whose recorded answer a resume may carry into the thread (`resume_failed`: a DLQ redrive).
RESUMABLE = frozenset({"answered", "expired", "revoked", "resume_failed"})
# Seconds an infrastructure failure waits before attempt n + 1 (n = 1, 2, ...): 2, 4, 8, 16.
BACKOFF_BASE_SECONDS = 2
# Longest question id a message may name (question ids are 32 to 64 hex digits; a ledger key holds 2 KB).
MAX_QUESTION_ID = 256
# The input schema is the graph's own until a caller says otherwise.
_UNSET: Any = object()
# Worker threads for calls a message makes at once with others (two per message; a process that


class Graph(Protocol):
    """What the runner needs of a compiled graph: the seam every hosted framework speaks.

    A LangGraph graph is one as is; an agent of another framework is adapted to it
    (``wait_service.runs.hosted_pydantic_ai``): ``invoke`` takes a start's input or a
    ``Command(resume={question_id: answer})`` and returns ``{"__interrupt__": [Interrupt]}`` when
    the thread parks, and ``get_state`` gives the ``interrupts``, ``values`` and ``metadata`` the
    thread holds.
    """

    def invoke(self, input: Any, config: Any, *, durability: Durability | None = None) -> Any: ...

    def get_state(self, config: Any) -> Any: ...


# Checkpoint metadata key naming the start message that produced a checkpoint.
RUN_ID_KEY = "agent_wait_run_id"


@dataclass(frozen=True)
class RunOutcome:
    """What one message did to its thread."""

    thread_id: str
    status: Literal["interrupted", "done", "deferred", "failed", "refused"]
    pending: list[str] = field(default_factory=list)
    delivered: list[str] = field(default_factory=list)
    resumed: str | None = None
    error: str | None = None


def output_json(result: Any) -> str:
    """The run's final values as JSON, without LangGraph's ``__interrupt__`` key.

    Values JSON cannot hold (messages, dataclasses) are rendered by pydantic, else as strings.

    Examples
    --------
    >>> output_json({"refund": {"amount": 40}, "__interrupt__": ()})
    '{"refund":{"amount":40}}'
    """
    if isinstance(result, dict):
        result = {k: v for k, v in result.items() if k != "__interrupt__"}
    return to_json(result, fallback=str).decode()


def _question_ids(interrupts: Any) -> list[str]:
    """The question ids of a checkpoint's interrupts (a middleware batch stands for several)."""
    from agent_wait.langgraph import question_ids

    return question_ids(list(interrupts))


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _first_line(exc: BaseException) -> str:
    """The first line of an error, cut: a message body can be megabytes of hostile text."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


def _receipt_item(receipt: Receipt) -> dict[str, Any]:
    """A receipt as its question item keeps it."""
    return receipt.model_dump(mode="json", exclude={"question_id"})


class _Undelivered(AnnounceError):
    """A parked thread's questions are all in the ledger, but some other sink missed one."""


class _GraphFailed(Exception):
    """Raised from an exception of the graph itself (``__cause__``): not worth retrying."""


class RunnerState:
    """What every part of the runner reads: the collaborators and settings ``RunnerService`` holds.

    The runner is one object assembled from parts, each in its own module and each inheriting the
    one below it: :class:`~wait_service.runs.run_failures.RunFailures` (failures, retries, poison),
    :class:`~wait_service.runs.run_resumes.RunResumes` (the resume: answer read, checks, command),
    :class:`~wait_service.runs.run_parking.RunParking` (questions announced, the thread parked or
    done), :class:`~wait_service.runs.run_starts.RunStarts` (message checks, starts, the graph's
    invocation), and :class:`~wait_service.runs.runner.RunnerService` (the message loop).
    """

    graph: Graph
    announce: BaseAnnounce
    ledger: Ledger
    publish: PublishFn
    reply_url: str | None
    default_ttl: int | None
    max_receive_count: int
    _clock: Clock
    inbox: Inbox | None
    timers: Timers | None
    durability: Durability | None
    input_schema: dict[str, Any] | None
    policies: Callable[[Question], Question] | None
    # Who started the run the current message runs (one message at a time per instance).
    _requester: str | None
    # The graph's checkpointer when it can read a thread's checkpoint ahead (build_runner's).
    _saver: PrefetchingSaver | None
    # The delete of the resumed question's timer, started at once with its run: (its id, the call).
    _disarming: tuple[str, Future[None]] | None
