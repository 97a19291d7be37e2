"""How large an answer may be and still resume its thread: larger ones are refused with 413.

A reply that gets 202 must be applicable, so the api refuses, before anything is recorded, an
answer that some store on its way could not hold. An accepted answer is stored three times:

1. in the question's ledger item, with the question, its policy and lifecycle (DynamoDB holds
   400 KB per item: :data:`DYNAMODB_ITEM_BYTES`);
2. in the inbox's resume message, with the thread and question ids (SQS holds 1 MiB per
   message, :data:`SQS_MESSAGE_BYTES`: any body the api accepts fits);
3. in the thread's checkpoint, first as the resume write and then in the graph's state.
   ``DynamoDBSaver`` offloads any payload over 350 KB to the checkpoint bucket, so with the
   bucket (the default) the checkpoint takes any answer the first two take. Without it a
   checkpoint item holds the graph's whole state in 400 KB, and the api is configured with the
   smaller :data:`MAX_ANSWER_BYTES_WITHOUT_OFFLOAD`.

An answer's size is the length of its compact JSON (what the resume message carries).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from agent_wait import exact_json
from agent_wait.aws.dynamodb import to_attribute
from agent_wait.errors import PayloadTooLargeError
from wait_service.limits import MAX_BODY_BYTES

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic import JsonValue

    from wait_service.ledger import QuestionRecord

DYNAMODB_ITEM_BYTES: Final = 400 * 1024
SQS_MESSAGE_BYTES: Final = 1024 * 1024
# The api refuses a larger request body before parsing it.
# What a resume message adds around its answer: the message kind and the thread id (at most 100
# characters) and question id (a 64-character hash or a LangGraph interrupt id), with JSON syntax.
RESUME_ENVELOPE_BYTES: Final = 1024
# With the checkpoint bucket, the body limit is the tightest bound every answer meets (the question's
# ledger item is checked per question, :func:`check_reply_fits`).
MAX_ANSWER_BYTES: Final = min(MAX_BODY_BYTES, SQS_MESSAGE_BYTES - RESUME_ENVELOPE_BYTES)
# Without it the answer goes into a 400 KB checkpoint item twice (the resume write, then the state
# that keeps it) beside the rest of the state: a quarter of the item leaves room for both and for
# a state as large again.
MAX_ANSWER_BYTES_WITHOUT_OFFLOAD: Final = DYNAMODB_ITEM_BYTES // 4
# What recording an answer adds to the question item besides the answer and reason: the status,
# `answered_by` / `answered_at`, a lifecycle stage and their attribute names, with room to spare.
REPLY_OVERHEAD_BYTES: Final = 2048
# What the item keeps of the envelope besides its fields (event_id, reply_url, the raised expiry).
# An item written before items were slimmed keeps the whole envelope as JSON: the question, policy
# and source again, with these around them.
ENVELOPE_FIELDS_BYTES: Final = 2048


# What ``json.dumps(value, separators=(",", ":"), ensure_ascii=False)`` gives, built once: ``dumps``
# with any option builds a new encoder on every call.
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def answer_bytes(answer: JsonValue) -> int:
    """The size of ``answer`` as compact JSON, in UTF-8 bytes.

    Examples
    --------
    >>> answer_bytes({"action": "approve"})
    20
    >>> answer_bytes("é"), answer_bytes({"n": Decimal("10000.00000000000000001")})
    (4, 29)
    """
    try:
        return len(_COMPACT.encode(answer).encode())
    except TypeError:
        # A Decimal (an exact number, as the api reads them): written with all its digits.
        return len(exact_json.dumps(answer, separators=(",", ":"), ensure_ascii=False).encode())


def attribute_bytes(value: Mapping[str, Any]) -> int:
    """DynamoDB's size of one attribute value (``{"S": ...}``, ``{"M": {...}}``, ...).

    Strings and binaries count their bytes, numbers at most 21 bytes, maps and lists 3 bytes
    plus 1 per element (and, for maps, the element names), as DynamoDB's item size rules say.

    Examples
    --------
    >>> attribute_bytes({"S": "abc"}), attribute_bytes({"M": {"a": {"BOOL": True}}})
    (3, 6)
    """
    ((kind, content),) = value.items()
    if kind == "S":
        return len(str(content).encode())
    if kind == "B":
        return len(content)
    if kind == "N":
        return min(21, len(str(Decimal(str(content))).lstrip("-").replace(".", "")) // 2 + 1)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + attribute_bytes(item) for item in content)
    if kind == "M":
        return 3 + sum(1 + len(name.encode()) + attribute_bytes(item) for name, item in content.items())
    if kind in ("SS", "NS", "BS"):
        return sum(attribute_bytes({kind[0]: item}) for item in content)
    raise ValueError(f"not a DynamoDB attribute value: {kind!r}")


def item_bytes(values: Mapping[str, Any]) -> int:
    """The DynamoDB size of an item whose attributes hold ``values`` (plain JSON-like values).

    Examples
    --------
    >>> item_bytes({"dedupe_key": "wait.created:q-1", "n": 1})
    28
    """
    return sum(len(name.encode()) + attribute_bytes(to_attribute(value)) for name, value in values.items())


def check_answer_size(answer: JsonValue, max_bytes: int = MAX_ANSWER_BYTES) -> int:
    """Refuse an answer larger than ``max_bytes`` (see the module docstring); returns its size.

    Raises
    ------
    PayloadTooLargeError
        The api's 413.

    Examples
    --------
    >>> check_answer_size("x" * 10, max_bytes=8)
    Traceback (most recent call last):
    ...
    agent_wait.errors.PayloadTooLargeError: the answer is 12 bytes as JSON; at most 8 can be stored
    """
    size = answer_bytes(answer)
    if size > max_bytes:
        raise PayloadTooLargeError(f"the answer is {size} bytes as JSON; at most {max_bytes} can be stored")
    return size


def check_reply_fits(question: QuestionRecord, answer: JsonValue, *, reason: str | None = None) -> None:
    """Refuse an answer that, with its question, would not fit in the question's ledger item.

    Called with the question as read before the answer is recorded.

    Raises
    ------
    PayloadTooLargeError
        The question item with this answer would pass DynamoDB's 400 KB item limit.
    """
    stored = {
        name: getattr(question, name)
        for name in (
            "question_id",
            "thread_id",
            "status",
            "digest",
            "question",
            "policy",
            "source",
            "created_at",
            "expires_at",
            "updated_at",
            "lifecycle",
        )
        if getattr(question, name) is not None
    }
    envelope = ENVELOPE_FIELDS_BYTES
    if question.envelope is not None:
        envelope += len("envelope") + answer_bytes([question.question, question.policy, question.source])
    size = (
        item_bytes(stored | {"dedupe_key": question.question_id, "answer": answer, "reason": reason or ""})
        + envelope
        + REPLY_OVERHEAD_BYTES
    )
    if size > DYNAMODB_ITEM_BYTES:
        raise PayloadTooLargeError(
            f"question {question.question_id} and this answer would be {size} bytes in the ledger; "
            f"at most {DYNAMODB_ITEM_BYTES} fit in one item",
            question_id=question.question_id,
        )
