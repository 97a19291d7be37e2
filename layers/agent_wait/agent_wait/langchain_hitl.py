"""LangChain's ``HumanInTheLoopMiddleware``: its batched interrupt as questions, answers as decisions.

``create_agent(..., middleware=[HumanInTheLoopMiddleware(interrupt_on={...})])`` parks a thread
with ONE interrupt whose value is a ``HITLRequest``::

    {"action_requests": [{"name", "args", "description"?}, ...],
     "review_configs": [{"action_name", "allowed_decisions": [...]}, ...]}

and resumes on ``{"decisions": [...]}``, one decision per action request, in order. Here each
action request becomes its own question, with its own digest:

- id ``<interrupt id>-<index>`` (stable: a republish yields the same ids);
- ``{"function": name, "args": args, "description": ..., "allowed_decisions": [...],
  "batch": {"interrupt_id", "index", "size"}}`` under an ``approval`` policy (bound);
- answers: ``{"action": "approve"}`` (approve), ``{"action": "approve", "args": {...}}`` (edit:
  the edited arguments over the proposed ones), ``{"action": "reject", "reason"?: str}``
  (reject, the reason as the message), ``{"action": "respond", "message": str}`` (respond);
  each only where ``allowed_decisions`` names it. An expired or revoked question is a
  ``reject`` whose message is the reason.

The thread resumes once every question of the batch is decided (:func:`resume_value`).

Examples
--------
>>> value = {"action_requests": [{"name": "send", "args": {"to": "a"}, "description": "Send?"}],
...          "review_configs": [{"action_name": "send", "allowed_decisions": ["approve", "reject"]}]}
>>> [(qid, q["question"]["function"]) for qid, q in batch_questions("i1", value)]
[('i1-0', 'send')]
>>> question = batch_questions("i1", value)[0][1]["question"]
>>> decision({"action": "reject", "reason": "not now"}, question)
{'type': 'reject', 'message': 'not now'}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from agent_wait.errors import AnswerInvalidError
from agent_wait.interrupt_keys import WAIT_KEY
from agent_wait.receipts import Receipt

__all__ = [
    "BATCH_KEY",
    "ToolRuns",
    "batch_of",
    "batch_questions",
    "check_review_answer",
    "decision",
    "is_hitl_request",
    "receipts",
    "resume_value",
]

BATCH_KEY = "batch"
ALL_DECISIONS = ("approve", "edit", "reject", "respond")


def is_hitl_request(value: Any) -> bool:
    """Whether an interrupt value is the middleware's ``HITLRequest``."""
    return (
        isinstance(value, Mapping)
        and WAIT_KEY not in value
        and isinstance(value.get("action_requests"), Sequence)
        and isinstance(value.get("review_configs"), Sequence)
        and len(value["action_requests"]) > 0
        and all(isinstance(r, Mapping) and "name" in r for r in value["action_requests"])
    )


def question_id(interrupt_id: str, index: int) -> str:
    return f"{interrupt_id}-{index}"


def batch_questions(interrupt_id: str, value: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """One ``(question_id, @wait-shaped value)`` per action request of a ``HITLRequest``."""
    requests = list(value["action_requests"])
    configs = list(value["review_configs"])
    by_name = {c.get("action_name"): c for c in configs if isinstance(c, Mapping)}
    out: list[tuple[str, dict[str, Any]]] = []
    for index, request in enumerate(requests):
        # The middleware lists one review config per request, in the same order.
        config = configs[index] if index < len(configs) else by_name.get(request["name"], {})
        allowed = [d for d in (config.get("allowed_decisions") or ALL_DECISIONS) if d in ALL_DECISIONS]
        question: dict[str, Any] = {
            "function": str(request["name"]),
            "args": dict(request.get("args") or {}),
            "allowed_decisions": allowed,
            BATCH_KEY: {"interrupt_id": interrupt_id, "index": index, "size": len(requests)},
        }
        if request.get("description"):
            question["description"] = str(request["description"])
        prompt = f"{request['name']}: {request['description']}" if request.get("description") else None
        policy: dict[str, Any] = {"kind": "approval", "bind": True}
        if prompt:
            policy["prompt"] = prompt[:1000]
        out.append((question_id(interrupt_id, index), {"question": question, WAIT_KEY: policy}))
    return out


def batch_of(question: Any) -> tuple[str, int, int] | None:
    """``(interrupt_id, index, size)`` of a middleware question, ``None`` for any other."""
    if not isinstance(question, Mapping):
        return None
    batch = question.get(BATCH_KEY)
    if not isinstance(batch, Mapping) or "allowed_decisions" not in question:
        return None
    try:
        return str(batch["interrupt_id"]), int(batch["index"]), int(batch["size"])
    except (KeyError, TypeError, ValueError):
        return None


def sibling_ids(question: Any) -> list[str]:
    """Every question id of the batch ``question`` belongs to, in the middleware's order."""
    found = batch_of(question)
    if found is None:
        return []
    interrupt_id, _, size = found
    return [question_id(interrupt_id, index) for index in range(size)]


def check_review_answer(answer: Mapping[str, Any], question: Mapping[str, Any]) -> None:
    """Raise :class:`AnswerInvalidError` unless ``answer`` is a decision the request allows."""
    allowed = list(question.get("allowed_decisions") or ())
    action = answer.get("action")
    if action == "approve":
        kind = "edit" if answer.get("args") else "approve"
        if "args" in answer and not isinstance(answer["args"], Mapping):
            raise AnswerInvalidError(
                "args must be an object of argument names to values", field="answer.args"
            )
        _only(answer, {"action", "args"})
    elif action == "reject":
        kind = "reject"
        _only(answer, {"action", "reason"})
        if "reason" in answer and not isinstance(answer["reason"], str):
            raise AnswerInvalidError("reason must be a string", field="answer.reason")
    elif action == "respond":
        kind = "respond"
        _only(answer, {"action", "message"})
        if not isinstance(answer.get("message"), str):
            raise AnswerInvalidError("a respond answer needs a 'message' string", field="answer.message")
    else:
        raise AnswerInvalidError("action must be 'approve', 'reject' or 'respond'", field="answer.action")
    if kind not in allowed:
        what = "approve with args (an edit)" if kind == "edit" else repr(kind)
        raise AnswerInvalidError(
            f"{what} is not allowed for {question.get('function')}(); allowed: {allowed}",
            field="answer.args" if kind == "edit" else "answer.action",
        )


def _only(answer: Mapping[str, Any], keys: set[str]) -> None:
    for key in answer:
        if key not in keys:
            raise AnswerInvalidError(f"unexpected field {key!r}", field=f"answer.{key}")


def decision(answer: Any, question: Mapping[str, Any]) -> dict[str, Any]:
    """The middleware's decision for one question's recorded answer (expiry and revocation included).

    Examples
    --------
    >>> q = {"function": "refund", "args": {"amount": 40, "to": "c-1"}}
    >>> decision({"action": "approve", "args": {"amount": 25}}, q)
    {'type': 'edit', 'edited_action': {'name': 'refund', 'args': {'amount': 25, 'to': 'c-1'}}}
    >>> decision({"action": "approve"}, q)
    {'type': 'approve'}
    """
    answer = answer if isinstance(answer, Mapping) else {}
    action = answer.get("action")
    if action == "approve" and answer.get("args"):
        args = {**dict(question.get("args") or {}), **dict(answer["args"])}
        return {"type": "edit", "edited_action": {"name": str(question["function"]), "args": args}}
    if action == "approve":
        return {"type": "approve"}
    if action == "respond":
        return {"type": "respond", "message": str(answer.get("message", ""))}
    reason = answer.get("reason")
    return {"type": "reject", "message": str(reason)} if reason else {"type": "reject"}


def resume_value(decided: Sequence[tuple[Any, Any]]) -> dict[str, Any]:
    """``{"decisions": [...]}`` from ``(question, answer)`` pairs in the batch's order."""
    return {"decisions": [decision(answer, question) for question, answer in decided]}


class ToolRuns:
    """A LangChain callback handler noting every tool call that starts and how it ends.

    Made a callback class on first use, so importing this module needs no langchain_core.
    """

    def __init__(self) -> None:
        self.runs: dict[Any, dict[str, Any]] = {}
        self.order: list[Any] = []

    def handler(self) -> Any:
        from langchain_core.callbacks import BaseCallbackHandler

        runs = self

        class _Handler(BaseCallbackHandler):
            def on_tool_start(self, serialized: dict[str, Any], input_str: str, **kw: Any) -> None:
                run_id = kw.get("run_id")
                inputs = kw.get("inputs")
                runs.runs[run_id] = {
                    "name": (serialized or {}).get("name") or kw.get("name"),
                    "args": dict(inputs) if isinstance(inputs, Mapping) else None,
                    "outcome": None,
                    "error": None,
                }
                runs.order.append(run_id)

            def on_tool_end(self, output: Any, **kw: Any) -> None:
                if kw.get("run_id") in runs.runs:
                    runs.runs[kw["run_id"]]["outcome"] = "returned"

            def on_tool_error(self, error: BaseException, **kw: Any) -> None:
                if kw.get("run_id") in runs.runs:
                    runs.runs[kw["run_id"]].update(
                        outcome="raised", error=f"{type(error).__name__}: {error}"[:500]
                    )

        return _Handler()


def receipts(
    decided: Sequence[tuple[str, Any, Any]], runs: ToolRuns, *, now: datetime | None = None
) -> list[Receipt]:
    """One receipt per ``(question_id, question, answer)``: the tool call it ran with, if it ran.

    An approved or edited request ran when a call of its tool started during the resume; it is
    matched to the call with the arguments it approved, else the next call of that tool.
    """
    at = now or datetime.now(UTC)
    free = [runs.runs[run_id] for run_id in runs.order]
    out: list[Receipt] = []
    for qid, question, answer in decided:
        made = decision(answer, question)
        if made["type"] not in ("approve", "edit"):
            out.append(Receipt(question_id=qid, ran=False, at=at))
            continue
        name = str(question.get("function"))
        expected = made["edited_action"]["args"] if made["type"] == "edit" else question.get("args")
        same = [r for r in free if r["name"] == name]
        match = next((r for r in same if r["args"] == expected), same[0] if same else None)
        if match is None:
            out.append(Receipt(question_id=qid, ran=False, at=at))
            continue
        free.remove(match)
        out.append(
            Receipt(
                question_id=qid,
                ran=True,
                args=match["args"],
                outcome=match["outcome"] or "returned",
                error=match["error"],
                at=at,
            )
        )
    return out
