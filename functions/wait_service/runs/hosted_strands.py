"""A Strands agent hosted by the runner: its session kept in the checkpoint bucket.

:class:`StrandsGraph` speaks the runner's :class:`wait_service.runs.runner.Graph` seam for a factory
``build_agent(session_manager=...) -> strands.Agent``: each message builds the thread's agent with
Strands' own ``SnapshotSessionManager`` over its ``S3Storage`` (``session_id`` = the thread id,
under ``strands/`` in the checkpoint bucket), which restores its conversation, its state and its
interrupt state. The whole agent is one snapshot object, written once at the end of each
invocation: a run that fails half-way leaves the last snapshot as it was, so the redelivery runs
from a consistent state (``S3SessionManager`` writes each message apart, and a failed write
between two of them leaves a tool call without its result).

- a start runs ``agent(prompt, invocation_state={"thread_id": ...})``; a thread is one
  conversation, so a later run goes on from its history;
- a run that stops with ``stop_reason == "interrupt"`` parks: each of ``result.interrupts`` is one
  question, under the interrupt's id (a ``@wait`` tool of ``agent_wait.strands`` carries its
  question and policy; an interrupt raised by a hook is published as its bare reason);
- a resume calls the agent with one ``interruptResponse`` per interrupt: Strands runs the tool
  again and ``@wait`` applies the answer (and reports the receipt). With several interrupts
  pending, answers are kept in the agent's state until the last one arrives.

The id of the run that parked the thread is set in the agent's state before the run, so Strands
writes it with the session; a redelivered start finds the thread parked by its own run and
republishes the same ids instead of running the agent again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph.types import Command, Interrupt

from agent_wait import exact_json
from agent_wait.strands import StrandsFramework
from wait_service.runs.agent_state import INPUT_SCHEMA, RUN_ID_KEY, Snapshot

if TYPE_CHECKING:
    from collections.abc import Callable

    import boto3
    from strands import Agent

__all__ = ["SESSION_PREFIX", "S3Sessions", "StrandsGraph"]

# Where the sessions live in the checkpoint bucket (LangGraph's offloaded payloads live elsewhere).
SESSION_PREFIX = "strands/"
# Agent state keys: the answers kept while other interrupts of the thread are undecided.
ANSWERS_KEY = "agent_wait_answers"


@dataclass(frozen=True)
class S3Sessions:
    """Makes the session manager of a thread: one snapshot in ``bucket`` under :data:`SESSION_PREFIX`."""

    bucket: str
    session: boto3.Session | None = None

    def __call__(self, thread_id: str) -> Any:
        from strands.session.snapshot_session_manager import SnapshotSessionManager
        from strands.storage.s3_storage import S3Storage

        storage = S3Storage(self.bucket, prefix=SESSION_PREFIX, boto_session=self.session)
        return SnapshotSessionManager(thread_id, storage=storage, save_latest_on="invocation")


class StrandsGraph:
    """A Strands agent factory behind the runner's :class:`~wait_service.runs.runner.Graph` seam.

    Parameters
    ----------
    factory:
        ``build_agent(session_manager=...)`` returning a ``strands.Agent`` using that manager.
    sessions:
        Makes a thread's session manager; ``None`` only to read the input schema.

    Examples
    --------
    >>> graph = StrandsGraph(build_agent, S3Sessions("agent-wait-checkpoints"))  # doctest: +SKIP
    >>> config = {"configurable": {"thread_id": "t-1"}}  # doctest: +SKIP
    >>> graph.invoke({"prompt": "refund 40 to c-17"}, config)  # doctest: +SKIP
    {'__interrupt__': [Interrupt(value={'question': ...}, id='v1:tool_call:...')]}
    """

    framework = "strands"

    def __init__(self, factory: Callable[..., Agent], sessions: Callable[[str], Any] | None) -> None:
        self.factory = factory
        self.sessions = sessions

    def get_input_jsonschema(self) -> dict[str, Any]:
        """The JSON schema of a start's input (the api checks it before it queues a run)."""
        return dict(INPUT_SCHEMA)

    def _agent(self, thread_id: str) -> tuple[Agent, Any]:
        if self.sessions is None:
            raise RuntimeError("StrandsGraph was built without sessions: it cannot run")
        manager = self.sessions(thread_id)
        return self.factory(session_manager=manager), manager

    def get_state(self, config: Any) -> Snapshot:
        """The thread as its session holds it: the interrupts still undecided, last output, parking run."""
        agent, _ = self._agent(_thread_id(config))
        return Snapshot(
            values=_values(agent),
            interrupts=tuple(_undecided(agent)),
            metadata={RUN_ID_KEY: agent.state.get(RUN_ID_KEY)} if agent.state.get(RUN_ID_KEY) else {},
        )

    def invoke(self, input: Any, config: Any, *, durability: Any = None) -> dict[str, Any]:
        """Run a start or a resume; returns ``{"__interrupt__": [...]}`` when parked, else ``{"output"}``."""
        thread_id = _thread_id(config)
        agent, manager = self._agent(thread_id)
        invocation_state = {"thread_id": thread_id}
        if isinstance(input, Command):
            waiting = {item.id for item in _parked(agent)}
            answers = dict(input.resume) if isinstance(input.resume, dict) else {}
            fresh = {qid: answer for qid, answer in answers.items() if qid in waiting}
            if not fresh:
                # Nothing pending takes these answers (a redelivery after the run went on): as is.
                return _result(agent)
            kept = {**(agent.state.get(ANSWERS_KEY) or {}), **exact_json.floats_where_exact(fresh)}
            if waiting - set(kept):
                agent.state.set(ANSWERS_KEY, kept)
                manager.sync_agent(agent)
                return _result(agent)
            agent.state.delete(ANSWERS_KEY)
            responses: Any = [
                {"interruptResponse": {"interruptId": qid, "response": kept[qid]}} for qid in sorted(waiting)
            ]
            agent(responses, invocation_state=invocation_state)
        else:
            run_id = (config.get("metadata") or {}).get(RUN_ID_KEY)
            if run_id:
                agent.state.set(RUN_ID_KEY, run_id)
            agent(_prompt(input), invocation_state=invocation_state)
        return _result(agent)


def _thread_id(config: Any) -> str:
    return str(config["configurable"]["thread_id"])


def _prompt(input: Any) -> str:
    if isinstance(input, dict) and isinstance(input.get("prompt"), str):
        return str(input["prompt"])
    # The answer to an async question (``{ASYNC_ANSWER_KEY: ...}``): the agent reads it as JSON.
    return exact_json.dumps(input, sort_keys=True)


def _parked(agent: Agent) -> list[Interrupt]:
    """Every interrupt the agent is stopped on, as the runner's ``Interrupt`` (id, value)."""
    state = agent._interrupt_state
    if not state.activated:
        return []
    framework = StrandsFramework()
    items = framework.interrupts_in(type("Result", (), {"interrupts": list(state.interrupts.values())})())
    return [Interrupt(value=value, id=qid) for qid, value in items]


def _undecided(agent: Agent) -> list[Interrupt]:
    kept = agent.state.get(ANSWERS_KEY) or {}
    return [item for item in _parked(agent) if item.id not in kept]


def _values(agent: Agent) -> dict[str, Any]:
    """The last assistant message's text, once the agent is not parked."""
    if agent._interrupt_state.activated:
        return {}
    for message in reversed(agent.messages):
        if message["role"] == "assistant":
            text = "".join(block.get("text", "") for block in message["content"] if "text" in block)
            return {"output": text}
    return {}


def _result(agent: Agent) -> dict[str, Any]:
    undecided = _undecided(agent)
    if undecided:
        return {"__interrupt__": undecided}
    return _values(agent) or {"output": None}
