"""The policy of a question: what answer it expects and what happens while nobody answers.

A :class:`Policy` travels inside the interrupt value (``__wait__``) and in every envelope. This
module defines and validates it; the receive path enforces it (``check_answer``, responders,
``bind``) and the expiry handler acts on ``ttl`` / ``on_expiry`` / ``reminders``.

Examples
--------
>>> from agent_wait.policy import approval, decision
>>> approval(ttl=3600).kind
'approval'
>>> decision(["refund", "replace"]).check_answer({"choice": "refund"})
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from agent_wait import exact_json
from agent_wait.errors import AnswerInvalidError

__all__ = [
    "DEFAULT_BARE_POLICY",
    "POLICY_CONSTRUCTORS",
    "EscalationRung",
    "OnExpiry",
    "Policy",
    "PolicyKind",
    "approval",
    "check_arg_edits",
    "check_args_against_schema",
    "decision",
    "edit",
    "free_text",
    "invalid_args",
    "resolve_policy",
]

PolicyKind = Literal["approval", "decision", "edit", "text"]


# A rung's own event types: dotted lower-case names, outside the built-in `wait.` and `thread.` ones.
_RUNG_EVENT_TYPE = re.compile(r"^[a-z][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)+$")
_RESERVED_EVENT_PREFIXES = ("wait.", "thread.")
# A Slack conversation id (C public, G private, D direct) or a channel name.
_SLACK_CHANNEL = re.compile(r"^([CGD][A-Z0-9]{2,}|#[a-z0-9][a-z0-9._-]{0,79})$")


class EscalationRung(BaseModel):
    """One rung of an escalation ladder: where the question goes, and who may answer it there.

    A rung written as a plain string (``"managers"``) is a route only: the question's responders
    and channels stay as they were. As an object it may also name:

    - ``responders``: who may answer once the question reaches this rung, besides everyone who
      could before (the policy's own responders, earlier rungs' responders, delegates);
    - ``replace: true``: ... instead of them (needs ``responders``);
    - ``slack_channel``: the Slack channel the question is posted to when it reaches this rung;
    - ``event_types``: event types the ``wait.escalated`` event of this rung is also published
      as, for webhooks (and other subscribers) filtering on ``type`` (not ``wait.*``/``thread.*``).

    A rung that only names its route is written as that string, so a ladder of plain routes has
    the JSON (and a question the digest) it always had.

    Examples
    --------
    >>> EscalationRung.model_validate("managers").model_dump(mode="json")
    'managers'
    >>> rung = EscalationRung(route="directors", responders=["carol"], replace=True)
    >>> rung.model_dump(mode="json")
    {'route': 'directors', 'responders': ['carol'], 'replace': True}
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    route: str = Field(min_length=1, max_length=256)
    responders: list[str] | None = Field(default=None, max_length=100)
    replace: bool = False
    slack_channel: str | None = None
    event_types: list[str] | None = Field(default=None, max_length=10)

    @model_validator(mode="before")
    @classmethod
    def _route_only(cls, value: Any) -> Any:
        return {"route": value} if isinstance(value, str) else value

    @field_validator("responders")
    @classmethod
    def _check_responders(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError(
                "a rung's responders must name at least one principal; leave responders out to keep "
                "the responders the question has (an empty list does not mean anyone here)"
            )
        for entry in value:
            if not entry or entry != entry.strip() or len(entry) > 1024:
                raise ValueError(f"responder {entry!r}: expected a principal (1-1024 characters, no spaces)")
        return value

    @field_validator("replace")
    @classmethod
    def _check_replace(cls, value: bool, info: ValidationInfo) -> bool:
        if value and not info.data.get("responders"):
            raise ValueError("replace: true needs the rung's own responders (who answers instead)")
        return value

    @field_validator("slack_channel")
    @classmethod
    def _check_channel(cls, value: str | None) -> str | None:
        if value is not None and not _SLACK_CHANNEL.match(value):
            raise ValueError(f"{value!r} is not a Slack channel id (C..., G..., D...) or #name")
        return value

    @field_validator("event_types")
    @classmethod
    def _check_event_types(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("event_types must name at least one event type, or be left out")
        for name in value:
            if not _RUNG_EVENT_TYPE.match(name) or len(name) > 128:
                raise ValueError(
                    f"{name!r} is not an event type (dotted lower-case, like 'escalation.directors')"
                )
            if name.startswith(_RESERVED_EVENT_PREFIXES):
                raise ValueError(
                    f"{name!r}: wait.* and thread.* are the built-in event types; name the rung's own"
                )
        if len(set(value)) != len(value):
            raise ValueError("event_types must be distinct")
        return value

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> str | dict[str, Any]:
        data = handler(self)
        extra = {k: v for k, v in data.items() if k != "route" and v not in (None, False)}
        if not extra:
            return self.route
        return {"route": self.route, **extra}


class OnExpiry(BaseModel):
    """What happens when a question's ttl runs out.

    ``action="default"`` answers it with ``answer``; ``action="escalate"`` moves it up the ladder
    ``to``, one :class:`EscalationRung` per ttl that runs out (a plain route string, or a rung
    naming its own responders and channels).

    Examples
    --------
    >>> OnExpiry(action="default", answer={"action": "reject", "reason": "timed out"}).action
    'default'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Literal["default", "escalate"]
    answer: JsonValue | None = None
    to: list[EscalationRung] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check_shape(self) -> OnExpiry:
        if self.action == "escalate" and not self.to:
            raise ValueError("on_expiry action 'escalate' needs at least one route in 'to'")
        if self.action == "default" and self.answer is None:
            raise ValueError("on_expiry action 'default' needs an 'answer'")
        return self


class Policy(BaseModel):
    """The kind of answer a question expects and the rules around it.

    Parameters
    ----------
    kind:
        ``approval`` (approve / approve with edited args / reject), ``decision`` (one of
        ``options``), ``edit`` (approve / reject / edit a value) or ``text`` (free text).
    prompt:
        What the human is asked, shown by UIs.
    options:
        The choices of a ``decision``; required and non-empty for that kind only.
    ttl:
        Seconds until the question expires; ``None`` means never.
    on_expiry:
        A default answer or an escalation route, applied when ``ttl`` runs out.
    reminders:
        Seconds after the question is raised at which to remind the responders.
    responders:
        Principals allowed to answer; empty means any authenticated caller.
    bind:
        Whether a reply must echo the envelope's digest as ``If-Match``.
    requester_cannot_approve:
        Separation of duties: the principal who started the run that raised the question may not
        answer it (403 ``requester_cannot_approve``).
    max_extension:
        Seconds by which responders may move the expiry later, in total over all extensions
        (``POST /questions/{id}/extend``); ``None`` (the default) allows no extension.
    approvals_required:
        A quorum (``approval`` only): this many approvals by distinct principals decide approve;
        one rejection decides reject, unless ``rejections_required`` asks for more.
    approvals_from:
        With a quorum: only approvals by these principals (IAM roles admit their sessions) count.
    rejections_required:
        With a quorum: this many rejections by distinct principals decide reject (default 1).

    Fields added after the first release (``requester_cannot_approve``, ``max_extension``) appear
    in the policy's JSON only when set, so the digest of a question that does not use them is what
    it always was.

    Examples
    --------
    >>> p = Policy(kind="approval", ttl=86400)
    >>> p.check_answer({"action": "approve", "args": {"amount": 25}})
    >>> p.model_dump(mode="json")["bind"]
    True
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: PolicyKind = "approval"
    prompt: str | None = None
    options: list[str] | None = None
    ttl: int | None = Field(default=None, gt=0)
    on_expiry: OnExpiry | None = None
    reminders: list[int] = Field(default_factory=list)
    responders: list[str] = Field(default_factory=list)
    bind: bool = True
    # Added after the first release: in the JSON (and so the digest) only when set.
    requester_cannot_approve: bool = Field(default=False, exclude_if=lambda value: value is False)
    max_extension: int | None = Field(default=None, gt=0, exclude_if=lambda value: value is None)
    approvals_required: int | None = Field(default=None, ge=1, le=100, exclude_if=lambda value: value is None)
    approvals_from: list[str] | None = Field(
        default=None, min_length=1, exclude_if=lambda value: value is None
    )
    rejections_required: int | None = Field(
        default=None, ge=1, le=100, exclude_if=lambda value: value is None
    )

    @model_validator(mode="after")
    def _check_consistency(self) -> Policy:
        if self.approvals_required is None and (self.approvals_from or self.rejections_required):
            raise ValueError(
                "approvals_from and rejections_required belong to a quorum: set approvals_required"
            )
        if self.approvals_required is not None and self.kind != "approval":
            raise ValueError(
                f"a quorum (approvals_required) applies to kind 'approval' only, not {self.kind!r}"
            )
        if self.kind == "decision":
            if not self.options:
                raise ValueError("a 'decision' policy needs a non-empty list of options")
            if len(set(self.options)) != len(self.options):
                raise ValueError("a 'decision' policy's options must be distinct")
        elif self.options is not None:
            raise ValueError(f"options apply to kind 'decision' only, not {self.kind!r}")
        if any(r < 0 for r in self.reminders):
            raise ValueError("reminders are seconds after the question is raised: none may be negative")
        if self.ttl is not None and any(r >= self.ttl for r in self.reminders):
            raise ValueError("every reminder must come before the ttl runs out")
        if self.on_expiry is not None and self.on_expiry.action == "default":
            # A default answer the api itself would refuse must fail here, when it is declared.
            try:
                self.check_answer(self.on_expiry.answer)
            except AnswerInvalidError as exc:
                raise ValueError(
                    f"on_expiry.answer is not a valid answer: {exc.message} ({exc.field})"
                ) from exc
        return self

    def check_answer(self, answer: JsonValue, question: JsonValue = None) -> None:
        """Raise :class:`~agent_wait.errors.AnswerInvalidError` unless ``answer`` fits this kind.

        Shapes by kind:

        - ``approval``: ``{"action": "approve"}``, ``{"action": "approve", "args": {...}}``,
          ``{"action": "reject", "reason"?: str}``
        - ``decision``: ``{"choice": <one of options>}``
        - ``edit``: ``{"action": "approve"}``, ``{"action": "reject", "reason"?: str}``,
          ``{"action": "edit", "value": <json>}``
        - ``text``: ``{"text": str}`` or a bare string

        When ``question`` is the ``@wait`` question (``{"function": ..., "args": {...}}``), an
        approval's ``args`` may only name keys of ``question["args"]``: a typo is refused here, at
        reply time, instead of being recorded and failing every resume. When the question also
        carries ``args_schema`` (the JSON Schema of the function's published parameters), the
        edited call (``question["args"] | answer["args"]``) must validate against it, see
        :func:`check_args_against_schema`; so must the proposal itself when it is approved as is
        (a question raised with ``invalid_args``). (An ``edit`` answer's ``value`` replaces a proposed
        value, not the call's arguments, so it is not checked.)

        The error's ``field`` names the offending path (``answer``, ``answer.action``,
        ``answer.args.<key>``, ...).

        Examples
        --------
        >>> from agent_wait.errors import AnswerInvalidError
        >>> try:
        ...     Policy(kind="approval").check_answer({"action": "maybe"})
        ... except AnswerInvalidError as exc:
        ...     print(exc.field)
        answer.action
        >>> question = {"function": "issue_refund", "args": {"amount": 40}}
        >>> try:
        ...     Policy().check_answer({"action": "approve", "args": {"amonut": 25}}, question)
        ... except AnswerInvalidError as exc:
        ...     print(exc.field)
        answer.args.amonut
        """
        if self.kind == "text":
            _check_text(answer)
            return
        if not isinstance(answer, Mapping):
            raise AnswerInvalidError(f"a {self.kind!r} answer must be a JSON object", field="answer")
        if self.kind == "approval" and isinstance(question, Mapping) and "allowed_decisions" in question:
            # A request of LangChain's HumanInTheLoopMiddleware: its own allowed decisions.
            from agent_wait.langchain_hitl import batch_of, check_review_answer

            if batch_of(question) is not None:
                check_review_answer(answer, question)
                if answer.get("action") == "approve" and answer.get("args"):
                    published = question.get("args")
                    if isinstance(published, Mapping):
                        check_arg_edits(answer["args"], published, str(question.get("function")))
                return
        if self.kind == "approval":
            _check_approval(answer)
            edits = answer.get("args")
            if answer.get("action") == "approve" and isinstance(question, Mapping) and "function" in question:
                published = question.get("args")
                if isinstance(published, Mapping):
                    function = str(question["function"])
                    if edits is not None:
                        check_arg_edits(edits, published, function)
                    schema = question.get("args_schema")
                    if isinstance(schema, Mapping) and isinstance(edits, Mapping | None):
                        # A plain approve runs the proposal as is: it must fit the schema too.
                        check_args_against_schema({**published, **(edits or {})}, dict(schema), function)
        elif self.kind == "decision":
            _check_decision(answer, self.options or [])
        else:
            _check_edit(answer)


def _only_keys(answer: Mapping[str, Any], allowed: set[str]) -> None:
    for key in answer:
        if key not in allowed:
            raise AnswerInvalidError(f"unexpected field {key!r}", field=f"answer.{key}")


def _check_reason(answer: Mapping[str, Any]) -> None:
    if "reason" in answer and not isinstance(answer["reason"], str):
        raise AnswerInvalidError("reason must be a string", field="answer.reason")


def _check_approval(answer: Mapping[str, Any]) -> None:
    action = answer.get("action")
    if action == "approve":
        _only_keys(answer, {"action", "args"})
        if "args" in answer and not isinstance(answer["args"], Mapping):
            raise AnswerInvalidError(
                "args must be an object of argument names to values", field="answer.args"
            )
    elif action == "reject":
        _only_keys(answer, {"action", "reason"})
        _check_reason(answer)
    else:
        raise AnswerInvalidError("action must be 'approve' or 'reject'", field="answer.action")


def check_arg_edits(edits: Any, published: Mapping[str, Any], function: str) -> None:
    """Raise :class:`~agent_wait.errors.AnswerInvalidError` unless ``edits`` only names ``published`` args.

    Shared by :meth:`Policy.check_answer` (reply time, given the question) and ``@wait`` (resume
    time, the last line of defence), so both refuse an edit with the same field and message.

    Examples
    --------
    >>> check_arg_edits({"amount": 25}, {"customer": "c-17", "amount": 40}, "issue_refund")
    >>> from agent_wait.errors import AnswerInvalidError
    >>> try:
    ...     check_arg_edits({"ctx": 1}, {"amount": 40}, "issue_refund")
    ... except AnswerInvalidError as exc:
    ...     print(exc.field, "|", exc.message)
    answer.args.ctx | issue_refund() has no published argument 'ctx' to edit
    """
    if not isinstance(edits, Mapping):
        raise AnswerInvalidError("args must be an object of argument names to values", field="answer.args")
    for key in edits:
        if key not in published:
            raise AnswerInvalidError(
                f"{function}() has no published argument {key!r} to edit", field=f"answer.args.{key}"
            )


def check_args_against_schema(args: Mapping[str, Any], schema: Mapping[str, Any], function: str) -> None:
    """Raise :class:`~agent_wait.errors.AnswerInvalidError` unless ``args`` validate against ``schema``.

    ``schema`` is a question's ``args_schema``: a self-contained JSON Schema object (local
    ``$defs`` references only). Validation uses ``fastjsonschema`` (installed with the ``service``
    extra, through ``aws-lambda-powertools[validation]``), imported on first use. Without it this raises
    :class:`~agent_wait.errors.MissingExtraError`: a typed edit that cannot be checked is refused,
    never let through. The error's ``field`` is ``answer.args.<path>`` (``answer.args`` when the
    problem is the object itself, e.g. a missing key). ``format`` keywords are not checked (pydantic
    emits formats no JSON Schema validator knows, and accepts more than the standard ones); the
    resumed call's pydantic validation covers them.

    Examples
    --------
    >>> schema = {"type": "object", "properties": {"amount": {"type": "number", "exclusiveMinimum": 0}}}
    >>> check_args_against_schema({"amount": 25}, schema, "issue_refund")
    >>> from agent_wait.errors import AnswerInvalidError
    >>> try:
    ...     check_args_against_schema({"amount": -1000}, schema, "issue_refund")
    ... except AnswerInvalidError as exc:
    ...     print(exc.field)
    answer.args.amount
    """
    validate = _compiled_schema(exact_json.dumps(schema, sort_keys=True, separators=(",", ":")))
    import fastjsonschema  # importable: _compiled_schema raised otherwise

    try:
        validate(dict(args))
    except fastjsonschema.JsonSchemaValueException as exc:
        path = [str(part) for part in getattr(exc, "path", None) or []][1:]  # drop the leading "data"
        field = ".".join(["answer.args", *path])
        message = getattr(exc, "message", str(exc)).replace("data.", "").replace("data ", "args ")
        raise AnswerInvalidError(f"{function}(): {message}", field=field) from exc


def invalid_args(args: Mapping[str, Any], schema: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """What is wrong with a proposal's ``args`` against its own ``args_schema``: one entry per field.

    Each entry is ``{"field": "args.<path>", "message": why}``; an empty list when the proposal
    fits (or there is no schema). The fields are found with :func:`check_args_against_schema`, one
    published argument at a time, so a proposal with two bad arguments names both. ``@wait`` puts
    a non-empty list in the question as ``invalid_args``: a person sees it before answering, and
    approving the proposal as is is refused until an edit fixes it.

    Examples
    --------
    >>> schema = {"type": "object", "required": ["amount"],
    ...           "properties": {"amount": {"type": "number", "maximum": 10000}}}
    >>> invalid_args({"amount": 40}, schema)
    []
    >>> invalid_args({"amount": 20000}, schema)
    [{'field': 'args.amount', 'message': 'must be smaller than or equal to 10000'}]
    >>> invalid_args({}, schema)
    [{'field': 'args.amount', 'message': 'required'}]
    """
    if not isinstance(schema, Mapping):
        return []
    plain = dict(schema)
    try:
        check_args_against_schema(args, plain, "")
    except AnswerInvalidError as whole:
        first = whole
    else:
        return []
    problems: list[dict[str, str]] = []
    properties = plain.get("properties") if isinstance(plain.get("properties"), Mapping) else {}
    assert isinstance(properties, Mapping)
    for name in plain.get("required") or []:
        if isinstance(name, str) and name not in args:
            problems.append({"field": f"args.{name}", "message": "required"})
    for name, value in args.items():
        # The schema narrowed to this one argument (its $defs kept, for references).
        one: dict[str, Any] = {
            key: plain[key] for key in ("$defs", "definitions", "additionalProperties") if key in plain
        }
        one.update({"type": "object", "properties": {name: properties[name]} if name in properties else {}})
        try:
            check_args_against_schema({name: value}, one, "")
        except AnswerInvalidError as exc:
            problems.append(_problem(exc))
    return problems or [_problem(first)]


def _problem(exc: AnswerInvalidError) -> dict[str, str]:
    field = (exc.field or "answer.args").removeprefix("answer.")
    message = exc.message.removeprefix("(): ")
    # fastjsonschema names the value first ("amount must be ..."); the field says it already.
    for name in (field.removeprefix("args.") + " ", "args "):
        message = message.removeprefix(name)
    return {"field": field, "message": message.strip()}


@functools.lru_cache(maxsize=256)
def _compiled_schema(schema_json: str) -> Callable[[Any], Any]:
    try:
        import fastjsonschema
    except ImportError as exc:
        from agent_wait.errors import MissingExtraError

        raise MissingExtraError("service", module="typed edits (fastjsonschema)") from exc
    # Formats are pydantic's hints ("path", "binary", a naive "date-time"), checked by the resumed
    # call's pydantic validation, not here: types, ranges, patterns, enums and required keys are.
    compiled: Callable[[Any], Any] = fastjsonschema.compile(json.loads(schema_json), use_formats=False)
    return compiled


def _check_decision(answer: Mapping[str, Any], options: list[str]) -> None:
    if "choice" not in answer:
        raise AnswerInvalidError("a decision answer needs a 'choice'", field="answer.choice")
    _only_keys(answer, {"choice"})
    if answer["choice"] not in options:
        raise AnswerInvalidError(f"choice must be one of {options}", field="answer.choice")


def _check_edit(answer: Mapping[str, Any]) -> None:
    action = answer.get("action")
    if action == "approve":
        _only_keys(answer, {"action"})
    elif action == "reject":
        _only_keys(answer, {"action", "reason"})
        _check_reason(answer)
    elif action == "edit":
        if "value" not in answer:
            raise AnswerInvalidError("an edit needs a 'value'", field="answer.value")
        _only_keys(answer, {"action", "value"})
    else:
        raise AnswerInvalidError("action must be 'approve', 'reject' or 'edit'", field="answer.action")


def _check_text(answer: JsonValue) -> None:
    if isinstance(answer, str):
        return
    if not isinstance(answer, Mapping):
        raise AnswerInvalidError("a text answer is a string or {'text': str}", field="answer")
    if not isinstance(answer.get("text"), str):
        raise AnswerInvalidError("text must be a string", field="answer.text")
    _only_keys(answer, {"text"})


def approval(**kw: Any) -> Policy:
    """A policy asking to approve, edit the arguments of, or reject a call.

    Examples
    --------
    >>> approval(ttl=60).model_dump(mode="json")["kind"]
    'approval'
    """
    return Policy(kind="approval", **kw)


def decision(options: list[str], **kw: Any) -> Policy:
    """A policy asking to choose one of ``options``.

    Examples
    --------
    >>> decision(["a", "b"]).options
    ['a', 'b']
    """
    return Policy(kind="decision", options=list(options), **kw)


def edit(**kw: Any) -> Policy:
    """A policy asking to approve, reject or replace a proposed value.

    Examples
    --------
    >>> edit().kind
    'edit'
    """
    return Policy(kind="edit", **kw)


def free_text(**kw: Any) -> Policy:
    """A policy asking for free text; ``bind`` defaults to False (there is no proposal to bind to).

    Examples
    --------
    >>> free_text().bind
    False
    """
    kw.setdefault("bind", False)
    return Policy(kind="text", **kw)


DEFAULT_BARE_POLICY = Policy(kind="text", bind=False)
"""The policy of a bare ``interrupt(value)``, which carries none of its own."""

POLICY_CONSTRUCTORS: tuple[Callable[..., Policy], ...] = (approval, edit, free_text)
"""The constructors ``@wait`` accepts uncalled (``@wait(approval)``); ``decision`` needs options."""

PolicyLike = Policy | str | Callable[..., Policy] | None


def resolve_policy(policy: PolicyLike) -> Policy:
    """Turn what ``@wait`` accepts into a :class:`Policy`.

    ``None`` is an approval; a kind string builds that kind (``"text"`` via :func:`free_text`);
    one of :data:`POLICY_CONSTRUCTORS` (``approval``, ``edit``, ``free_text``) is called with no
    arguments. Any other callable is refused: to configure a policy, call the constructor
    (``approval(ttl=60)``) rather than wrapping it in a factory.

    Examples
    --------
    >>> resolve_policy("text").bind
    False
    >>> resolve_policy(approval).kind
    'approval'
    >>> resolve_policy(approval(ttl=60)).ttl
    60
    """
    if policy is None:
        return Policy()
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, str):
        if policy == "text":
            return free_text()
        return Policy.model_validate({"kind": policy})
    if any(policy is constructor for constructor in POLICY_CONSTRUCTORS):
        return policy()
    if policy is decision:
        raise TypeError("a decision needs its options: pass decision([...]), not decision")
    raise TypeError(
        "policy must be a Policy (e.g. approval(ttl=60)), a kind string, or one of approval, edit, "
        f"free_text; not {policy!r}"
    )
