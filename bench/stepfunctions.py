"""The same flow as a Step Functions Standard workflow: its state transitions, counted by walking its ASL.

``bench/stepfunctions_flow.asl.json`` is the state machine a ``.waitForTaskToken`` design of
agent-wait's flow would deploy: ``Run`` (the runner, until the graph parks or ends), ``Parked?``,
``WaitForAnswer`` (the token stored on the question; the reply's ``SendTaskSuccess`` ends it; its
timeout is the next reminder or the expiry), ``Timer`` (the lifecycle), ``Expired?``, ``Done``.

:func:`walk` runs that ASL the way Step Functions would for one execution, with each Task's outcomes
given in order (a result payload, or an error such as ``States.Timeout``), and returns the states
entered: Standard workflows bill one transition per state entered. It understands what the file
uses (Task with ``ResultSelector``/``ResultPath``/``Catch``, Choice with ``BooleanEquals``,
``IsNull``, ``IsPresent``, ``StringEquals``, Pass, Wait, Succeed, Fail) and refuses anything else.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ASL_PATH = Path(__file__).with_name("stepfunctions_flow.asl.json")
MAX_STEPS = 1000
_MISSING = object()


@dataclass(frozen=True)
class Outcome:
    """What one Task invocation returned: a ``payload`` (Lambda's ``Payload``) or an ``error`` name."""

    payload: Mapping[str, Any] | None = None
    error: str | None = None


def load_asl(path: Path = ASL_PATH) -> dict[str, Any]:
    asl: dict[str, Any] = json.loads(path.read_text())
    return asl


def _get(document: Any, path: str) -> Any:
    if path == "$":
        return document
    if not path.startswith("$."):
        raise ValueError(f"unsupported path {path!r}")
    current = document
    for part in path[2:].split("."):
        if not isinstance(current, Mapping) or part not in current:
            return _MISSING
        current = current[part]
    return current


def _set(document: Any, path: str | None, value: Any) -> Any:
    if path is None:
        return document
    if path == "$":
        return value
    result = copy.deepcopy(document) if isinstance(document, dict) else {}
    current = result
    parts = path[2:].split(".")
    for part in parts[:-1]:
        current = current.setdefault(part, {})
    current[parts[-1]] = value
    return result


def _select(selector: Mapping[str, Any], result: Any) -> dict[str, Any]:
    selected: dict[str, Any] = {}
    for key, value in selector.items():
        if key.endswith(".$"):
            found = _get(result, value)
            selected[key[:-2]] = None if found is _MISSING else found
        else:
            selected[key] = value
    return selected


def _matches(rule: Mapping[str, Any], document: Any) -> bool:
    if "And" in rule:
        return all(_matches(r, document) for r in rule["And"])
    if "Or" in rule:
        return any(_matches(r, document) for r in rule["Or"])
    if "Not" in rule:
        return not _matches(rule["Not"], document)
    value = _get(document, rule["Variable"])
    if "IsPresent" in rule:
        return (value is not _MISSING) == rule["IsPresent"]
    if value is _MISSING:
        raise ValueError(f"States.Runtime: {rule['Variable']} is not in the state")
    if "IsNull" in rule:
        return (value is None) == rule["IsNull"]
    if "BooleanEquals" in rule:
        return value is rule["BooleanEquals"]
    if "StringEquals" in rule:
        return value == rule["StringEquals"]
    raise ValueError(f"unsupported choice rule {sorted(rule)}")


def walk(
    asl: Mapping[str, Any], outcomes: Mapping[str, Sequence[Outcome]], execution_input: Any = None
) -> list[str]:
    """The states one execution enters, in order (each one billed transition).

    Examples
    --------
    >>> asl = {"StartAt": "A", "States": {"A": {"Type": "Pass", "Next": "B"}, "B": {"Type": "Succeed"}}}
    >>> walk(asl, {})
    ['A', 'B']
    """
    states = asl["States"]
    left = {name: list(seq) for name, seq in outcomes.items()}
    document: Any = {} if execution_input is None else copy.deepcopy(execution_input)
    name: str | None = asl["StartAt"]
    entered: list[str] = []
    while name is not None:
        if len(entered) >= MAX_STEPS:
            raise RuntimeError(f"more than {MAX_STEPS} transitions: the scenario never ends")
        state = states[name]
        entered.append(name)
        kind = state["Type"]
        if kind in ("Succeed", "Fail"):
            break
        if kind in ("Pass", "Wait"):
            name = state.get("Next")
            if state.get("End"):
                break
            continue
        if kind == "Choice":
            name = next((c["Next"] for c in state["Choices"] if _matches(c, document)), state.get("Default"))
            if name is None:
                raise ValueError("States.NoChoiceMatched")
            continue
        if kind != "Task":
            raise ValueError(f"{kind} states are not understood by this walker")
        queue = left.get(name)
        if not queue:
            raise ValueError(f"no outcome left for Task {name!r}")
        outcome = queue.pop(0)
        if outcome.error is not None:
            catcher = next(
                (
                    c
                    for c in state.get("Catch", [])
                    if outcome.error in c["ErrorEquals"] or "States.ALL" in c["ErrorEquals"]
                ),
                None,
            )
            if catcher is None:
                break  # the execution fails here
            document = _set(document, catcher.get("ResultPath", "$"), {"Error": outcome.error})
            name = catcher["Next"]
            continue
        result: Any = {"Payload": dict(outcome.payload or {})}
        if "ResultSelector" in state:
            result = _select(state["ResultSelector"], result)
        document = _set(document, state.get("ResultPath", "$"), result)
        if state.get("End"):
            break
        name = state["Next"]
    return entered


def sample_flow(
    questions: int = 1, timers_fired: int = 0, *, expires: bool = False
) -> dict[str, list[Outcome]]:
    """Task outcomes of one thread: ``questions`` asked and answered in turn, the last run ending it.

    ``timers_fired`` reminders time the wait out before each answer; with ``expires`` the last of them
    is the expiry, whose default answer resumes the run instead of a reply.
    """
    runs = [
        Outcome({"parked": True, "question_id": f"q{i}", "next_timer_seconds": 60}) for i in range(questions)
    ]
    runs.append(Outcome({"parked": False}))
    waits: list[Outcome] = []
    timers: list[Outcome] = []
    for i in range(questions):
        waits += [Outcome(error="States.Timeout")] * timers_fired
        for n in range(timers_fired):
            last = expires and n == timers_fired - 1
            answer = {"action": "reject"} if last else None
            timers.append(Outcome({"question_id": f"q{i}", "answer": answer, "next_timer_seconds": 60}))
        if not expires:
            waits.append(Outcome({"action": "approve"}))
    return {"Run": runs, "WaitForAnswer": waits, "Timer": timers}


def transitions(questions: int = 1, timers_fired: int = 0, *, expires: bool = False) -> int:
    """Billed transitions of one execution of the flow in ``bench/stepfunctions_flow.asl.json``."""
    return len(walk(load_asl(), sample_flow(questions, timers_fired, expires=expires)))
