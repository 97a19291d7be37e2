"""A Pydantic AI agent hosted by the runner: its message history kept in the checkpoint table.

The runner drives every agent through one seam, :class:`wait_service.runs.runner.Graph`: ``invoke``
with a start's input or a ``Command(resume={question_id: answer})``, and ``get_state`` for what
the thread is parked on. :class:`PydanticAIGraph` speaks it for a ``pydantic_ai.Agent``:

- a start runs ``agent.run_sync(prompt, message_history=<the thread's history>)``: a thread is one
  conversation, and a run on a thread that ended goes on from where it stopped;
- a run that ends with ``DeferredToolRequests`` parks: each deferred call is one question, under
  its ``tool_call_id``. A ``@wait`` tool (``agent_wait.pydantic_ai``) carries its own question and
  policy; a tool declared ``requires_approval=True`` is asked with the ``approval`` policy
  (approve, approve with edited ``args``, reject); a call deferred with ``CallDeferred`` asks for
  its result (policy ``text``);
- a resume gives Pydantic AI ``DeferredToolResults``: a ``@wait`` tool is approved with the answer
  as its metadata (the wrapper applies it: run, run with edits, or return the refusal unexecuted,
  and emits the receipt); an approval tool is ``ToolApproved`` (``override_args`` on an edit) or
  ``ToolDenied`` with the reason (a rejection, or the expiry's default answer); a deferred call
  gets the answer as its result. With several calls pending, answers are kept until the last one
  arrives, and then the run goes on with all of them, as Pydantic AI requires.

State, one item per thread in the checkpoint table (:mod:`wait_service.runs.agent_state`): the
history (Pydantic AI's own JSON, zlib-compressed), the pending calls, the answers kept so far, the
id of the run that parked it and the last output; it expires with the checkpoints. It is written
after the agent's run and before the runner records the questions, so a crash in between is
redelivered onto a thread already parked: the runner republishes the same ids (``get_state``),
it does not run the agent again.
"""

from __future__ import annotations

from typing import Any

from langgraph.types import Command, Interrupt
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.messages import ModelMessagesTypeAdapter

from agent_wait import exact_json
from agent_wait.interrupt_keys import SOURCE_KEY, WAIT_KEY
from agent_wait.policy import approval
from agent_wait.pydantic_ai import PydanticAIFramework
from wait_service.runs.agent_state import INPUT_SCHEMA, RUN_ID_KEY, AgentStateStore, Snapshot, ThreadState

__all__ = ["PydanticAIGraph"]

_WAIT, _APPROVAL, _CALL = "wait", "approval", "call"


class PydanticAIGraph:
    """A ``pydantic_ai.Agent`` behind the runner's :class:`~wait_service.runs.runner.Graph` seam.

    Parameters
    ----------
    agent:
        The agent; its ``output_type`` must include ``DeferredToolRequests`` for it to park.
    store:
        Where each thread's history and pending calls are kept; ``None`` only to read the input
        schema (``cdk synth``, the local stack's start).

    Examples
    --------
    >>> graph = PydanticAIGraph(agent, AgentStateStore("checkpoints"))  # doctest: +SKIP
    >>> config = {"configurable": {"thread_id": "t-1"}}  # doctest: +SKIP
    >>> graph.invoke({"prompt": "refund 40 to c-17"}, config)  # doctest: +SKIP
    {'__interrupt__': [Interrupt(value={'question': ...}, id='pyd_ai_...')]}
    """

    framework = "pydantic_ai"

    def __init__(self, agent: Agent[Any, Any], store: AgentStateStore | None) -> None:
        self.agent = agent
        self.store = store

    def get_input_jsonschema(self) -> dict[str, Any]:
        """The JSON schema of a start's input (the api checks it before it queues a run)."""
        return dict(INPUT_SCHEMA)

    def _store(self) -> AgentStateStore:
        if self.store is None:
            raise RuntimeError("PydanticAIGraph was built without a state store: it cannot run")
        return self.store

    def get_state(self, config: Any) -> Snapshot:
        """The thread as the store holds it: its pending calls, last output and parking run."""
        state = self._store().load(_thread_id(config))
        if state is None:
            return Snapshot(values={}, interrupts=(), metadata={})
        undecided = [call for call in state.pending if call["id"] not in state.answers]
        return Snapshot(
            values={} if state.output is None else {"output": state.output},
            interrupts=tuple(Interrupt(value=call["value"], id=call["id"]) for call in undecided),
            metadata={RUN_ID_KEY: state.run_id} if state.run_id else {},
        )

    def invoke(self, input: Any, config: Any, *, durability: Any = None) -> dict[str, Any]:
        """Run a start or a resume; returns ``{"__interrupt__": [...]}`` when parked, else ``{"output"}``."""
        thread_id = _thread_id(config)
        store = self._store()
        state = store.load(thread_id) or ThreadState()
        deps = {"thread_id": thread_id}
        if isinstance(input, Command):
            answers = dict(input.resume) if isinstance(input.resume, dict) else {}
            waiting = {call["id"] for call in state.pending}
            fresh = {qid: answer for qid, answer in answers.items() if qid in waiting}
            if not fresh:
                # Nothing pending takes these answers (a redelivery after the run went on): as is.
                return self._result(state)
            state.answers.update(fresh)
            undecided = [call for call in state.pending if call["id"] not in state.answers]
            if undecided:
                store.save(thread_id, state)
                return self._result(state)
            history = ModelMessagesTypeAdapter.validate_json(state.messages)
            result = self.agent.run_sync(
                message_history=history,
                deferred_tool_results=_results(state.pending, state.answers),
                deps=deps,
            )
            run_id = None
        else:
            run_id = (config.get("metadata") or {}).get(RUN_ID_KEY)
            prompt = _prompt(input)
            history = ModelMessagesTypeAdapter.validate_json(state.messages) if not state.pending else []
            result = self.agent.run_sync(prompt, message_history=history or None, deps=deps)
        output = result.output
        pending = _pending(output) if isinstance(output, DeferredToolRequests) else []
        new = ThreadState(
            messages=ModelMessagesTypeAdapter.dump_json(result.all_messages()),
            pending=pending,
            run_id=run_id,
            output=None if pending else _jsonable(output),
        )
        store.save(thread_id, new)
        return self._result(new)

    @staticmethod
    def _result(state: ThreadState) -> dict[str, Any]:
        undecided = [call for call in state.pending if call["id"] not in state.answers]
        if undecided:
            return {"__interrupt__": [Interrupt(value=call["value"], id=call["id"]) for call in undecided]}
        return {"output": state.output}


def _thread_id(config: Any) -> str:
    return str(config["configurable"]["thread_id"])


def _prompt(input: Any) -> str:
    if isinstance(input, dict) and isinstance(input.get("prompt"), str):
        return str(input["prompt"])
    # The answer to an async question (or any other input): the agent reads it as JSON.
    return exact_json.dumps(input, sort_keys=True)


def _jsonable(output: Any) -> Any:
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(output, fallback=str)


def _pending(requests: DeferredToolRequests) -> list[dict[str, Any]]:
    """Each deferred call as ``{"id", "kind", "value"}``: the value is the question published."""
    found: list[dict[str, Any]] = []
    waits = dict(PydanticAIFramework().interrupts_in(requests))
    for kind, calls in ((_APPROVAL, requests.approvals), (_CALL, requests.calls)):
        for call in calls:
            meta = requests.metadata.get(call.tool_call_id)
            question = {"function": call.tool_name, "args": call.args_as_dict()}
            if isinstance(meta, dict) and WAIT_KEY in meta:
                found.append({"id": call.tool_call_id, "kind": _WAIT, "value": waits[call.tool_call_id]})
            elif kind == _APPROVAL:
                value = {
                    "question": question,
                    WAIT_KEY: approval().model_dump(mode="json"),
                    SOURCE_KEY: {"function": call.tool_name, "module": "pydantic_ai"},
                }
                found.append({"id": call.tool_call_id, "kind": _APPROVAL, "value": value})
            else:
                found.append({"id": call.tool_call_id, "kind": _CALL, "value": question})
    return found


def _results(pending: list[dict[str, Any]], answers: dict[str, Any]) -> DeferredToolResults:
    """The ``DeferredToolResults`` that resume every pending call with its answer."""
    results = DeferredToolResults()
    for call in pending:
        qid, answer = call["id"], answers[call["id"]]
        if call["kind"] == _WAIT:
            results.approvals[qid] = ToolApproved()
            results.metadata[qid] = answer if isinstance(answer, dict) else {"answer": answer}
        elif call["kind"] == _APPROVAL:
            action = answer.get("action") if isinstance(answer, dict) else None
            if action == "approve":
                edits = answer.get("args")
                args = {**call["value"]["question"]["args"], **edits} if isinstance(edits, dict) else None
                results.approvals[qid] = ToolApproved(override_args=exact_json.floats_where_exact(args))
            else:
                reason = answer.get("reason") if isinstance(answer, dict) else None
                results.approvals[qid] = ToolDenied(str(reason) if reason else "The tool call was denied.")
        else:
            results.calls[qid] = exact_json.floats_where_exact(answer)
    return results
