"""``@wait``: ask a human before a function runs, written once against :class:`Framework`.

Interrupt mode (default): the wrapper raises the framework's interrupt with
``{"question": {"function", "args"}, "__wait__": policy, "__source__": ...}`` before the body, and
applies the answer when the call is re-run. Async mode: the wrapper publishes the envelope
itself and returns ``{"status": "pending_approval", "question_id": ...}`` without running the
body.

Examples
--------
>>> from agent_wait.framework import Framework
>>> class AlwaysApprove(Framework):
...     name = "always"
...     def interrupt(self, value, call_args):
...         return {"action": "approve", "args": {"amount": 25}}
...     def interrupts_in(self, result):
...         return []
...     def current_thread_id(self, call_args):
...         return "t1"
>>> wait = make_wait(AlwaysApprove())
>>> @wait("approval")
... def issue_refund(customer: str, amount: int) -> str:
...     return f"refunded {amount} to {customer}"
>>> issue_refund("c-17", 40)
'refunded 25 to c-17'
"""

from __future__ import annotations

import functools
import inspect
import logging
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_core import to_jsonable_python

from agent_wait.announce.base import announce_safely
from agent_wait.envelope import Question, async_question_id, build_envelope
from agent_wait.policy import POLICY_CONSTRUCTORS, Policy, check_arg_edits, decision, resolve_policy

if typing.TYPE_CHECKING:
    from agent_wait.envelope import Envelope
    from agent_wait.framework import Framework

__all__ = ["DECISION_PARAM", "SOURCE_KEY", "WAIT_KEY", "make_wait"]

logger = logging.getLogger("agent_wait")

WAIT_KEY = "__wait__"
SOURCE_KEY = "__source__"
DECISION_PARAM = "decision"
_RECEIVER_NAMES = ("self", "cls")

Mode = Literal["interrupt", "async"]
Predicate = Callable[[dict[str, Any]], Any]
AnnounceLike = Callable[["Envelope"], Any]


@dataclass
class _Call:
    bound: inspect.BoundArguments
    call_args: dict[str, Any]
    published: dict[str, Any]


class _Signature:
    """What the wrapper needs to know about the decorated function, computed once."""

    def __init__(self, fn: Callable[..., Any], framework: Framework) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.signature = inspect.signature(fn)
        self.has_decision = DECISION_PARAM in self.signature.parameters
        params = list(self.signature.parameters.values())
        hints = _type_hints(fn)
        self.var_keyword = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
        self.hidden: set[str] = set()
        for index, param in enumerate(params):
            annotation = hints.get(param.name, param.annotation)
            is_receiver = index == 0 and param.name in _RECEIVER_NAMES
            if param.name == DECISION_PARAM or is_receiver or framework.is_hidden(param.name, annotation):
                self.hidden.add(param.name)
        self.framework = framework

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call:
        # bind_partial: the caller never passes `decision`, the wrapper supplies it.
        bound = self.signature.bind_partial(*args, **kwargs)
        bound.apply_defaults()
        for param in self.signature.parameters.values():
            required = param.default is param.empty and param.kind not in (
                param.VAR_POSITIONAL,
                param.VAR_KEYWORD,
            )
            if required and param.name not in bound.arguments and param.name != DECISION_PARAM:
                raise TypeError(f"{self.name}() missing required argument: {param.name!r}")
        call_args: dict[str, Any] = {}
        published: dict[str, Any] = {}
        for key, value in bound.arguments.items():
            if key == self.var_keyword:
                # **kwargs are published one by one, so an injected name inside them stays hidden too.
                for inner_key, inner_value in value.items():
                    call_args[inner_key] = inner_value
                    if not self.framework.is_hidden(inner_key, None):
                        published[inner_key] = _jsonable(inner_value)
                continue
            call_args[key] = value
            if key not in self.hidden:
                published[key] = _jsonable(value)
        return _Call(bound=bound, call_args=call_args, published=published)

    def apply_edits(self, call: _Call, edits: Any) -> None:
        # The api already refused these at reply time (Policy.check_answer with the question); this
        # is the defence for answers that reach the graph another way.
        check_arg_edits(edits, call.published, self.name)
        for key, value in edits.items():
            if key in self.signature.parameters:
                call.bound.arguments[key] = value
            else:
                call.bound.arguments[self.var_keyword or ""][key] = value


def _type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable forward refs: fall back to the raw annotations
        return {}


def _jsonable(value: Any) -> Any:
    return to_jsonable_python(value, fallback=str)


def _should_ask(when: Predicate | None, published: dict[str, Any], name: str) -> bool:
    if when is None:
        return True
    try:
        return bool(when(dict(published)))
    except Exception:
        # A predicate that cannot decide must not let the call through unasked.
        logger.warning("when= predicate of %s raised; asking the question", name, exc_info=True)
        return True


def make_wait(framework: Framework) -> Callable[..., Any]:
    """Bind ``@wait`` to ``framework``.

    Returns
    -------
    wait:
        ``wait(policy=None, *, when=None, mode="interrupt", announce=None, reply_url=None)``:
        a decorator factory (``@wait`` without parentheses also works).

        - ``policy``: a :class:`~agent_wait.policy.Policy` (``approval(ttl=60)``), a kind string
          (``"approval"``, ``"decision"``, ``"edit"``, ``"text"``), or the constructor
          ``approval``, ``edit`` or ``free_text`` uncalled. A policy factory (``lambda:
          approval(ttl=60)``) is not accepted: pass the policy it would build.
        - ``when``: a predicate called with a dict of the published args; the question is asked
          only when it returns true. It is re-evaluated on the resume re-run (keep it
          deterministic); if it raises, the call parks (the question is asked).
        - ``mode``: ``"interrupt"`` parks the call through the framework; ``"async"`` publishes
          the envelope through ``announce`` and returns ``{"status": "pending_approval",
          "question_id"}`` without running the body.
        - ``announce``: the announcer of async mode (required there).
        - ``reply_url``: async mode: the reply URL template (``{question_id}``) put in the envelope.

        Answer rules (interrupt mode): a declared ``decision`` parameter makes the body always run
        with ``decision=answer``; otherwise ``{"action": "approve"}`` runs it,
        ``{"action": "approve", "args": {...}}`` runs it with those args merged over the
        originals, and anything else is returned in its place, unexecuted.

    Examples
    --------
    See the module docstring.
    """

    def wait(
        policy: Any = None,
        *,
        when: Predicate | None = None,
        mode: Mode = "interrupt",
        announce: AnnounceLike | None = None,
        reply_url: str | None = None,
    ) -> Any:
        if inspect.isfunction(policy) and not any(policy is c for c in (*POLICY_CONSTRUCTORS, decision)):
            if policy.__name__ == "<lambda>" and not inspect.signature(policy).parameters:
                # Never a tool under `@wait`: a policy factory, which would otherwise be wrapped as one.
                raise TypeError("@wait takes a Policy, not a factory: write @wait(approval(ttl=60))")
            # `@wait` without parentheses: the "policy" is the decorated function.
            return wait(None, when=when, mode=mode, announce=announce, reply_url=reply_url)(policy)
        resolved = resolve_policy(policy)
        if mode not in ("interrupt", "async"):
            raise ValueError(f"mode must be 'interrupt' or 'async', not {mode!r}")
        if mode == "async" and announce is None:
            raise TypeError("@wait(mode='async') publishes at call time and needs announce=<an announcer>")

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            spec = _Signature(fn, framework)
            source: dict[str, Any] = {"function": fn.__qualname__, "module": fn.__module__}
            runner = _Runner(spec, resolved, source, when, mode, announce, reply_url)
            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    action, payload = runner.decide(args, kwargs)
                    if action == "return":
                        return payload
                    return await fn(*payload.args, **payload.kwargs)

                wrapper: Callable[..., Any] = async_wrapper
            else:

                @functools.wraps(fn)
                def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                    action, payload = runner.decide(args, kwargs)
                    if action == "return":
                        return payload
                    return fn(*payload.args, **payload.kwargs)

                wrapper = sync_wrapper
            wrapper.__agent_wait__ = {"policy": resolved, "mode": mode}  # type: ignore[attr-defined]
            return wrapper

        return decorate

    return wait


class _Runner:
    """Decides, for one call, whether the body runs (and with what) or what is returned instead."""

    def __init__(
        self,
        spec: _Signature,
        policy: Policy,
        source: dict[str, Any],
        when: Predicate | None,
        mode: Mode,
        announce: AnnounceLike | None,
        reply_url: str | None,
    ) -> None:
        self.spec = spec
        self.policy = policy
        self.policy_json = policy.model_dump(mode="json")
        self.source = source
        self.when = when
        self.mode = mode
        self.announce = announce
        self.reply_url = reply_url

    def decide(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Literal["run", "return"], Any]:
        call = self.spec.bind(args, kwargs)
        if not _should_ask(self.when, call.published, self.spec.name):
            if self.spec.has_decision:
                call.bound.arguments.setdefault(DECISION_PARAM, None)
            return "run", call.bound
        if self.mode == "async":
            return "return", self._publish(call)
        value = {
            "question": {"function": self.spec.name, "args": call.published},
            WAIT_KEY: self.policy_json,
            SOURCE_KEY: self.source,
        }
        answer = self.spec.framework.interrupt(value, call.call_args)
        if self.spec.has_decision:
            call.bound.arguments[DECISION_PARAM] = answer
            return "run", call.bound
        if isinstance(answer, Mapping) and answer.get("action") == "approve":
            if answer.get("args") is not None:
                self.spec.apply_edits(call, answer["args"])
            return "run", call.bound
        return "return", answer

    def _publish(self, call: _Call) -> dict[str, Any]:
        thread_id = self.spec.framework.current_thread_id(call.call_args)
        question = {"function": self.spec.name, "args": call.published}
        # The qualified name, so Refunds.issue and Orders.issue on one thread do not share an id.
        question_id = async_question_id(thread_id, self.spec.fn.__qualname__, call.published)
        envelope = build_envelope(
            thread_id,
            Question(question_id=question_id, question=question, policy=self.policy, source=self.source),
            reply_url=self.reply_url,
        )
        assert self.announce is not None  # checked at decoration time
        announce_safely(self.announce, envelope)
        return {"status": "pending_approval", "question_id": question_id}
