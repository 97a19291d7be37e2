"""``publish_interrupts``: after a run, one envelope per parked question, announced.

Examples
--------
>>> from agent_wait.announce import InMemoryAnnounce
>>> from agent_wait.framework import Framework
>>> class Listed(Framework):
...     name = "listed"
...     def interrupt(self, value, call_args):
...         raise NotImplementedError
...     def interrupts_in(self, result):
...         return list(result)
...     def current_thread_id(self, call_args):
...         return "t1"
>>> publish_interrupts = make_publish_interrupts(Listed())
>>> sink = InMemoryAnnounce()
>>> [e.policy.kind for e in publish_interrupts([("q1", "Which colour?")], "t1", sink)]
['text']
>>> len(sink.envelopes)
1
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from agent_wait import exact_json
from agent_wait.announce.base import announce_safely
from agent_wait.envelope import Envelope, Question, build_envelope
from agent_wait.interrupt_keys import SOURCE_KEY, WAIT_KEY
from agent_wait.policy import DEFAULT_BARE_POLICY, Policy

if TYPE_CHECKING:
    from datetime import datetime

    from agent_wait.framework import Framework

__all__ = ["make_publish_interrupts", "unpack_interrupt"]

logger = logging.getLogger("agent_wait")

PublishInterrupts = Callable[..., list[Envelope]]
# A host's last word on a question before its envelope is built (a policy store's override).
QuestionOverride = Callable[[Question], Question]


def unpack_interrupt(value: Any) -> tuple[Any, Policy, dict[str, Any] | None]:
    """Split an interrupt value into ``(question, policy, source)``.

    A ``@wait`` value carries its policy under ``__wait__``; anything else is a bare
    ``interrupt(value)``, published as is with the default policy ``Policy(kind="text", bind=False)``.

    Examples
    --------
    >>> unpack_interrupt("Which colour?")[1].kind
    'text'
    >>> unpack_interrupt({"question": {"function": "f", "args": {}}, "__wait__": {"kind": "edit"}})[1].kind
    'edit'
    """
    if isinstance(value, Mapping) and WAIT_KEY in value and "question" in value:
        try:
            policy = Policy.model_validate(value[WAIT_KEY])
        except ValidationError:
            logger.warning(
                "interrupt value has an invalid %s policy; publishing it as a bare value", WAIT_KEY
            )
        else:
            source = value.get(SOURCE_KEY)
            return (
                to_jsonable_python(exact_json.floats_where_exact(value["question"]), fallback=str),
                policy,
                dict(source) if isinstance(source, Mapping) else None,
            )
    return to_jsonable_python(exact_json.floats_where_exact(value), fallback=str), DEFAULT_BARE_POLICY, None


def make_publish_interrupts(framework: Framework) -> PublishInterrupts:
    """Bind ``publish_interrupts`` to ``framework``.

    Returns
    -------
    publish_interrupts:
        ``publish_interrupts(result, thread_id, announce, *, reply_url=None, default_ttl=None,
        now=None, override=None) -> list[Envelope]``: one envelope per ``(id, value)`` in
        ``framework.interrupts_in(result)`` (empty when the run finished), each announced through
        ``announce`` (may be ``None``). ``reply_url`` is a template containing ``{question_id}``;
        ``default_ttl`` applies when a policy sets no ttl. ``override`` (the host's, e.g. a policy
        store) gets each :class:`~agent_wait.envelope.Question` and returns the one to publish,
        before the envelope and its digest are built. Never raises because a sink failed.

    Examples
    --------
    See the module docstring.
    """

    def publish_interrupts(
        result: Any,
        thread_id: str,
        announce: Callable[[Envelope], Any] | None,
        *,
        reply_url: str | None = None,
        default_ttl: int | None = None,
        now: datetime | None = None,
        override: QuestionOverride | None = None,
    ) -> list[Envelope]:
        envelopes: list[Envelope] = []
        for question_id, value in framework.interrupts_in(result):
            question, policy, source = unpack_interrupt(value)
            asked = Question(question_id=question_id, question=question, policy=policy, source=source)
            envelopes.append(
                build_envelope(
                    thread_id,
                    override(asked) if override is not None else asked,
                    reply_url=reply_url,
                    default_ttl=default_ttl,
                    now=now,
                )
            )
        if announce is not None:
            for envelope in envelopes:
                announce_safely(announce, envelope)
        return envelopes

    return publish_interrupts
