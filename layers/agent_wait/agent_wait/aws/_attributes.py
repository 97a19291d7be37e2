"""Message attributes shared by the SNS and SQS announcers, so subscribers can filter."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_wait.envelope import Envelope


def message_attributes(envelope: Envelope) -> dict[str, Any]:
    """``type``, ``dedupe_key``, ``thread_id`` (and ``route`` on an escalation) as String attributes."""
    return {
        key: {"DataType": "String", "StringValue": value}
        for key, value in (
            ("type", envelope.type),
            ("dedupe_key", envelope.dedupe_key),
            ("thread_id", envelope.thread_id),
            ("route", envelope.route),
        )
        if value is not None
    }
