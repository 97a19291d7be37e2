"""Message attributes shared by the SNS and SQS announcers, so subscribers can filter."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_wait.envelope import Envelope
    from agent_wait.events import ResolutionEvent

# The question status a `wait.created` / `wait.escalated` / `wait.reminder` event reports; a
# reminder leaves the status as it was, so it reports the api's name for every open one.
_ENVELOPE_STATUS = {"wait.created": "raised", "wait.escalated": "escalated", "wait.reminder": "pending"}
# `function` of a question that names none (a bare `interrupt()`).
BARE_FUNCTION = "interrupt"


def message_attributes(event: Envelope | ResolutionEvent) -> dict[str, Any]:
    """String attributes ``type``, ``dedupe_key``, ``thread_id``, ``function``, ``status``,
    ``policy_kind`` (and ``route`` on an escalation): the keys of SNS filter policies.

    An escalation to a rung that names ``event_types`` carries ``type`` as a ``String.Array``
    (``["wait.escalated", <the rung's types>...]``): SNS matches a filter on any element.

    Examples
    --------
    >>> from agent_wait.envelope import Question, build_envelope
    >>> env = build_envelope("t1", Question(question_id="q1", question={"function": "pay", "args": {}}))
    >>> {k: v["StringValue"] for k, v in message_attributes(env).items()}["function"]
    'pay'
    """
    function, status, policy_kind = describe(event)
    attributes = {
        key: {"DataType": "String", "StringValue": value}
        for key, value in (
            ("type", event.type),
            ("dedupe_key", event.dedupe_key),
            ("thread_id", event.thread_id),
            ("function", function),
            ("status", status),
            ("policy_kind", policy_kind),
            ("route", getattr(event, "route", None)),
        )
        if value
    }
    extra_types = getattr(event, "event_types", None)
    if extra_types:
        # An escalation rung's own event types: a filter policy on `type` matches any element of a
        # String.Array, so subscribers of `wait.escalated` and of the rung's types all receive it.
        attributes["type"] = {
            "DataType": "String.Array",
            "StringValue": json.dumps([event.type, *extra_types]),
        }
    return attributes


def describe(event: Envelope | ResolutionEvent) -> tuple[str, str, str]:
    """``(function, status, policy_kind)`` of any published event."""
    from agent_wait.envelope import Envelope

    if isinstance(event, Envelope):
        question = event.question
        name = question.get("function") if isinstance(question, Mapping) else None
        function = name if isinstance(name, str) and name else BARE_FUNCTION
        return function, _ENVELOPE_STATUS[event.type], event.policy.kind
    return event.function, event.status, event.policy_kind
