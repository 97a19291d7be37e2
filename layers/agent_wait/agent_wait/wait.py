"""``@wait``: ask a human before a function runs, written once against :class:`Framework`.

Interrupt mode (default): the wrapper raises the framework's interrupt with
``{"question": {"function", "args", "args_schema"}, "__wait__": policy, "__source__": ...}``
before the body, and applies the answer when the call is re-run. ``args_schema`` is the JSON
Schema of the published parameters, built from the signature with pydantic, so a reply can be
type-checked without importing the function. When the resumed call finishes the wrapper emits a
:class:`~agent_wait.receipts.Receipt`; a declared ``operation_id`` parameter receives
:func:`operation_id_for` of the question id. Async mode: the wrapper publishes the envelope
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
>>> operation_id_for("q-1") == operation_id_for("q-1") != operation_id_for("q-2")
True
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import typing
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from agent_wait import exact_json
from agent_wait.announce.base import announce_safely
from agent_wait.envelope import Question, async_question_id, build_envelope
from agent_wait.errors import AnswerInvalidError, MissingExtraError
from agent_wait.framework import Framework
from agent_wait.hosting import ASYNC_MODE, current_async_host
from agent_wait.interrupt_keys import SOURCE_KEY, WAIT_KEY
from agent_wait.policy import (
    POLICY_CONSTRUCTORS,
    Policy,
    check_arg_edits,
    check_args_against_schema,
    decision,
    invalid_args,
    resolve_policy,
)
from agent_wait.receipts import Receipt, emit_receipt

if typing.TYPE_CHECKING:
    from agent_wait.envelope import Envelope

__all__ = [
    "DECISION_PARAM",
    "OPERATION_ID_PARAM",
    "SOURCE_KEY",
    "WAIT_KEY",
    "args_schema_of",
    "make_wait",
    "operation_id_for",
]

logger = logging.getLogger("agent_wait")

DECISION_PARAM = "decision"
OPERATION_ID_PARAM = "operation_id"
_RECEIVER_NAMES = ("self", "cls")
_SUPPLIED_PARAMS = (DECISION_PARAM, OPERATION_ID_PARAM)


def operation_id_for(question_id: str) -> str:
    """The stable id of the external effect of the call parked on ``question_id``.

    ``@wait`` passes it to a declared ``operation_id`` parameter: the same on every retry,
    redelivery and re-run of that call, different for different questions. Key an idempotent
    write on it (a conditional put, an idempotency key of the paying API) so the effect happens
    once however often the body runs.

    Examples
    --------
    >>> operation_id_for("q-1")
    'op-8a3e90ba8a519e1e3e3da22b26bf3d8d'
    """
    return "op-" + hashlib.sha256(question_id.encode()).hexdigest()[:32]


Mode = Literal["interrupt", "async"]
Predicate = Callable[[dict[str, Any]], Any]
AnnounceLike = Callable[["Envelope"], Any]


@dataclass
class _Call:
    bound: inspect.BoundArguments
    call_args: dict[str, Any]
    published: dict[str, Any]
    question_id: str | None = None
    asked: bool = field(default=False)


class _Signature:
    """What the wrapper needs to know about the decorated function, computed once."""

    def __init__(self, fn: Callable[..., Any], framework: Framework) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.signature = inspect.signature(fn)
        self.has_decision = DECISION_PARAM in self.signature.parameters
        self.has_operation_id = OPERATION_ID_PARAM in self.signature.parameters
        params = list(self.signature.parameters.values())
        hints = _type_hints(fn)
        self.var_keyword = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
        self.hidden: set[str] = set()
        for index, param in enumerate(params):
            annotation = hints.get(param.name, param.annotation)
            is_receiver = index == 0 and param.name in _RECEIVER_NAMES
            if param.name in _SUPPLIED_PARAMS or is_receiver or framework.is_hidden(param.name, annotation):
                self.hidden.add(param.name)
        self.framework = framework
        self.adapters, self.args_schema = _published_types(fn, self.signature, hints, self.hidden)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call:
        # bind_partial: the caller never passes `decision`, the wrapper supplies it.
        bound = self.signature.bind_partial(*args, **kwargs)
        bound.apply_defaults()
        for param in self.signature.parameters.values():
            required = param.default is param.empty and param.kind not in (
                param.VAR_POSITIONAL,
                param.VAR_KEYWORD,
            )
            if required and param.name not in bound.arguments and param.name not in _SUPPLIED_PARAMS:
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
            adapter = self.adapters.get(key)
            if adapter is not None:
                try:
                    adapter.validate_python(value)
                except ValidationError as exc:
                    raise AnswerInvalidError(
                        f"{self.name}(): edited argument {key!r} is invalid: {exc.errors()[0]['msg']}",
                        field=f"answer.args.{key}",
                        question_id=call.question_id,
                    ) from exc
        # Validated, then passed as the human sent them (a 25 stays 25, as the digest saw it).
        for key, value in edits.items():
            call.published[key] = _jsonable(value)
            if key in self.signature.parameters:
                call.bound.arguments[key] = value
            else:
                call.bound.arguments[self.var_keyword or ""][key] = value


def _published_types(
    fn: Callable[..., Any],
    signature: inspect.Signature,
    hints: dict[str, Any],
    hidden: set[str],
) -> tuple[dict[str, TypeAdapter[Any]], dict[str, Any]]:
    """Per-argument validators and the JSON Schema of the published parameters.

    Pydantic's ``validate_call`` semantics: each parameter's annotation (``Annotated`` constraints
    and a ``Field(...)`` default included), ``Any`` when untyped or when its type has no JSON
    Schema (an arbitrary class). ``**kwargs`` allow extra keys, typed by their annotation.
    """
    fields: dict[str, Any] = {}
    adapters: dict[str, TypeAdapter[Any]] = {}
    extra: Any = None
    for param in signature.parameters.values():
        if param.name in hidden:
            continue
        annotation = hints.get(param.name, param.annotation)
        if annotation is param.empty or isinstance(annotation, str):
            annotation = Any
        if param.kind is param.VAR_POSITIONAL:
            annotation = list[annotation]  # type: ignore[valid-type]
        default = param.default
        if isinstance(default, FieldInfo):
            annotation, default = Annotated[annotation, default], ...
        elif default is param.empty:
            default = ...
        adapter = _schema_ready(annotation)
        if adapter is None:
            annotation, adapter = Any, TypeAdapter(Any)
        elif default is not ... and not _accepts(adapter, default):
            # `x: int = None`: the default is published, so the schema must accept it too.
            annotation = Any if not _is_scalar(default) else annotation | Literal[default]
            adapter = TypeAdapter(annotation)
        if param.kind is param.VAR_KEYWORD:
            extra = annotation
            continue
        adapters[param.name] = adapter
        fields[param.name] = (annotation, default)
    model = create_model(
        f"{fn.__name__}_args",
        __config__=ConfigDict(extra="forbid" if extra is None else "allow", arbitrary_types_allowed=True),
        **fields,
    )
    with warnings.catch_warnings():
        # A default that is not JSON (an object) is left out of the schema: that is fine.
        warnings.simplefilter("ignore")
        schema: dict[str, Any] = model.model_json_schema()
    if extra is not None:
        schema["additionalProperties"] = _schema_of(extra)
    return adapters, schema


def _schema_ready(annotation: Any) -> TypeAdapter[Any] | None:
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        adapter.json_schema()
    except Exception:  # noqa: BLE001 - no validator or no JSON Schema for this type: treat as Any
        return None
    return adapter


def _accepts(adapter: TypeAdapter[Any], value: Any) -> bool:
    try:
        adapter.validate_python(value)
    except Exception:  # noqa: BLE001 - any refusal: the value is not of the type
        return False
    return True


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _schema_of(annotation: Any) -> Any:
    adapter = _schema_ready(annotation)
    if adapter is None or annotation is Any:
        return True
    return adapter.json_schema()


def args_schema_of(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """The ``args_schema`` a ``@wait``-decorated ``fn`` puts in its questions (``None`` if undecorated).

    Examples
    --------
    >>> from agent_wait.framework import Framework
    >>> class Never(Framework):
    ...     def interrupt(self, value, call_args): raise NotImplementedError
    ...     def interrupts_in(self, result): return []
    ...     def current_thread_id(self, call_args): return "t1"
    >>> @make_wait(Never())("approval")
    ... def issue_refund(customer: str, amount: float) -> None: ...
    >>> args_schema_of(issue_refund)["required"]
    ['customer', 'amount']
    """
    meta = getattr(fn, "__agent_wait__", None)
    return meta.get("args_schema") if isinstance(meta, Mapping) else None


def _type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:  # noqa: BLE001 - one unresolvable forward ref: resolve the others one by one
        hints: dict[str, Any] = {}
        namespace = getattr(fn, "__globals__", {})
        for name, annotation in getattr(fn, "__annotations__", {}).items():
            if isinstance(annotation, str):
                try:
                    annotation = eval(annotation, namespace)  # noqa: S307 - what get_type_hints does
                except Exception:  # noqa: BLE001 - left as the raw string: treated as Any
                    continue
            hints[name] = annotation
        return hints


def _jsonable(value: Any) -> Any:
    # A Decimal (how the service reads numbers with a fraction) is published as the float with the
    # same digits, or, when no float has them, as its digits in a string: never rounded.
    return to_jsonable_python(exact_json.floats_where_exact(value), fallback=str)


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
        - ``announce``: the announcer of async mode. Without it, the call uses the announcers of
          the host it runs in (:mod:`agent_wait.hosting`: the agent-wait runner and the local
          stack lend the deployment's), and raises ``TypeError`` when there is none.
        - ``reply_url``: async mode: the reply URL template (``{question_id}``) put in the
          envelope (default: the host's).

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

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            spec = _Signature(fn, framework)
            if spec.has_operation_id and mode == "async":
                raise TypeError(
                    f"{fn.__name__}() declares operation_id, which needs interrupt mode: in async mode "
                    "the body never runs under @wait"
                )
            if spec.has_operation_id and type(framework).interrupt_with_id is Framework.interrupt_with_id:
                raise TypeError(
                    f"{fn.__name__}() declares operation_id, but the {framework.name!r} framework cannot "
                    "tell the id of an answered question (it does not implement interrupt_with_id)"
                )
            source: dict[str, Any] = {"function": fn.__qualname__, "module": fn.__module__}
            if mode == "async":
                # How the host tells, when the answer comes back, that nothing is parked on it.
                source["mode"] = ASYNC_MODE
            runner = _Runner(spec, resolved, source, when, mode, announce, reply_url)
            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    action, payload, call = runner.decide(args, kwargs)
                    if action == "return":
                        runner.receipt(call, ran=False)
                        return payload
                    try:
                        result = await fn(*payload.args, **payload.kwargs)
                    except Exception as exc:
                        runner.receipt(call, ran=True, error=exc)
                        raise
                    runner.receipt(call, ran=True)
                    return result

                wrapper: Callable[..., Any] = async_wrapper
            else:

                @functools.wraps(fn)
                def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                    action, payload, call = runner.decide(args, kwargs)
                    if action == "return":
                        runner.receipt(call, ran=False)
                        return payload
                    try:
                        result = fn(*payload.args, **payload.kwargs)
                    except Exception as exc:
                        runner.receipt(call, ran=True, error=exc)
                        raise
                    runner.receipt(call, ran=True)
                    return result

                wrapper = sync_wrapper
            wrapper.__agent_wait__ = {  # type: ignore[attr-defined]
                "policy": resolved,
                "mode": mode,
                "args_schema": spec.args_schema,
            }
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

    def decide(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Literal["run", "return"], Any, _Call]:
        call = self.spec.bind(args, kwargs)
        if not _should_ask(self.when, call.published, self.spec.name):
            # Not asked: no question, so no receipt and no operation id (None unless passed).
            for name in _SUPPLIED_PARAMS:
                if name in self.spec.signature.parameters:
                    call.bound.arguments.setdefault(name, None)
            return "run", call.bound, call
        if self.mode == "async":
            return "return", self._publish(call), call
        question = self._question(call)
        value = {
            "question": question,
            WAIT_KEY: self.policy_json,
            SOURCE_KEY: self.source,
        }
        answer, call.question_id = self.spec.framework.interrupt_with_id(value, call.call_args)
        call.asked = True
        if self.spec.has_operation_id:
            if call.question_id is None:
                raise RuntimeError(
                    f"{self.spec.name}() declares operation_id but the answered question's id is unknown"
                )
            call.bound.arguments[OPERATION_ID_PARAM] = operation_id_for(call.question_id)
        if self.spec.has_decision:
            call.bound.arguments[DECISION_PARAM] = answer
            return "run", call.bound, call
        if isinstance(answer, Mapping) and answer.get("action") == "approve":
            try:
                if answer.get("args") is not None:
                    self.spec.apply_edits(call, answer["args"])
                if question.get("invalid_args"):
                    # The proposal broke its own schema: it runs only once an edit fixes it (the api
                    # refuses such an approve; this is the defence for answers that come another way).
                    check_args_against_schema(call.published, self.spec.args_schema, self.spec.name)
            except AnswerInvalidError as exc:
                exc.question_id = exc.question_id or call.question_id
                self.receipt(call, ran=False)  # refused here: the body does not run
                raise
            return "run", call.bound, call
        return "return", answer, call

    def _question(self, call: _Call) -> dict[str, Any]:
        """The question of ``call``: function, published args, their schema, and what breaks it.

        ``invalid_args`` (present only when the proposal does not fit its own ``args_schema``)
        names each field and why, for the person answering; without the ``service`` extra the
        proposal cannot be checked here and the key is left out.
        """
        question: dict[str, Any] = {
            "function": self.spec.name,
            "args": call.published,
            "args_schema": self.spec.args_schema,
        }
        try:
            problems = invalid_args(call.published, self.spec.args_schema)
        except MissingExtraError:
            problems = []
        if problems:
            question["invalid_args"] = problems
        return question

    def receipt(self, call: _Call, *, ran: bool, error: Exception | None = None) -> None:
        """Emit the receipt of a resumed call (nothing when no question was answered)."""
        if not call.asked or call.question_id is None:
            return
        if error is not None and self.spec.framework.is_control_flow(error):
            return  # the body parked or rerouted the run: the call has not finished
        try:
            receipt = Receipt(
                question_id=call.question_id,
                ran=ran,
                args=dict(call.published) if ran else None,
                outcome=("raised" if error is not None else "returned") if ran else None,
                error=f"{type(error).__name__}: {error}" if error is not None else None,
                at=datetime.now(UTC),
            )
        except ValidationError:
            # Evidence, not control flow: a receipt that cannot be built never changes the call's result.
            logger.warning("could not build the receipt of %s", self.spec.name, exc_info=True)
            return
        emit_receipt(receipt)

    def _publish(self, call: _Call) -> dict[str, Any]:
        announce, reply_url = self.announce, self.reply_url
        default_ttl: int | None = None
        now: datetime | None = None
        host = current_async_host()
        if host is not None:
            reply_url = reply_url or host.reply_url
            default_ttl = host.default_ttl
            now = host.now() if host.now is not None else None
            if announce is None:
                announce = host.announce
        if announce is None:
            raise TypeError(
                f"@wait(mode='async') on {self.spec.name}() publishes at call time: pass announce=<an "
                "announcer>, or call it inside a host that lends one (the agent-wait runner, the local stack)"
            )
        thread_id = self.spec.framework.current_thread_id(call.call_args)
        question = self._question(call)
        # The qualified name, so Refunds.issue and Orders.issue on one thread do not share an id.
        question_id = async_question_id(thread_id, self.spec.fn.__qualname__, call.published)
        asked = Question(question_id=question_id, question=question, policy=self.policy, source=self.source)
        envelope = build_envelope(
            thread_id,
            host.override(asked) if host is not None and host.override is not None else asked,
            reply_url=reply_url,
            default_ttl=default_ttl,
            now=now,
        )
        announce_safely(announce, envelope)
        return {"status": "pending_approval", "question_id": question_id}
