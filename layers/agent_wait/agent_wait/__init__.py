"""agent-wait: human-in-the-loop waits for agents.

``@wait`` parks a call until a human answers; ``publish_interrupts`` turns what a run parked on
into ``wait.created`` envelopes and hands them to announcers. The core is written once against
:class:`Framework`; import the bound names from a framework subpackage
(``agent_wait.langgraph``, ``agent_wait.pydantic_ai``, ``agent_wait.strands``). This package
imports with no extras installed.

Examples
--------
>>> from agent_wait import InMemoryAnnounce, approval
>>> approval(ttl=3600).ttl
3600
>>> InMemoryAnnounce().envelopes
[]
"""

import importlib
from typing import TYPE_CHECKING, Any

from agent_wait.announce import BaseAnnounce, CompositeAnnounce, InMemoryAnnounce
from agent_wait.envelope import (
    Envelope,
    Question,
    ReplyWith,
    async_question_id,
    build_envelope,
    canonical_json,
    dedupe_key_for,
    digest_of,
    isoformat_z,
)
from agent_wait.errors import AgentWaitError
from agent_wait.hosting import ASYNC_ANSWER_KEY, AsyncHost, hosting_async_waits
from agent_wait.policy import (
    OnExpiry,
    Policy,
    approval,
    check_args_against_schema,
    decision,
    edit,
    free_text,
)

if TYPE_CHECKING:
    from agent_wait.framework import Framework
    from agent_wait.publish import make_publish_interrupts, unpack_interrupt
    from agent_wait.receipts import Receipt, collect_receipts, emit_receipt
    from agent_wait.wait import args_schema_of, make_wait, operation_id_for

# Imported at their first use: what a framework binding needs (``@wait``, publishing, receipts)
# stays out of a process that only reads envelopes and policies (the api's cold start).
_LAZY = {
    "Framework": "agent_wait.framework",
    "make_publish_interrupts": "agent_wait.publish",
    "unpack_interrupt": "agent_wait.publish",
    "Receipt": "agent_wait.receipts",
    "collect_receipts": "agent_wait.receipts",
    "emit_receipt": "agent_wait.receipts",
    "args_schema_of": "agent_wait.wait",
    "make_wait": "agent_wait.wait",
    "operation_id_for": "agent_wait.wait",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_wait' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__version__ = "0.1.0"

__all__ = [
    "ASYNC_ANSWER_KEY",
    "AgentWaitError",
    "AsyncHost",
    "BaseAnnounce",
    "CompositeAnnounce",
    "Envelope",
    "Framework",
    "InMemoryAnnounce",
    "OnExpiry",
    "Policy",
    "Question",
    "Receipt",
    "ReplyWith",
    "__version__",
    "approval",
    "args_schema_of",
    "async_question_id",
    "build_envelope",
    "canonical_json",
    "check_args_against_schema",
    "collect_receipts",
    "decision",
    "dedupe_key_for",
    "digest_of",
    "edit",
    "emit_receipt",
    "free_text",
    "hosting_async_waits",
    "isoformat_z",
    "make_publish_interrupts",
    "make_wait",
    "operation_id_for",
    "unpack_interrupt",
]
