"""The audit record of a question: what was proposed, what was authorized, by whom, and what ran.

Seed 003 asks "what exactly did you approve, and did exactly that run, once?". The ledger holds
every piece: the question (the proposal), the answer and who gave it with the ``If-Match`` they
sent (the authorization), and the receipt the resumed ``@wait`` call left (what ran). This module
only assembles them; the diff from proposed to authorized arguments is an RFC 6902 JSON Patch made
by ``jsonpatch``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agent_wait import exact_json
from wait_service.ledger.statuses import DECIDED

if TYPE_CHECKING:
    from wait_service.ledger import QuestionRecord


def proposed_call(question: Any) -> dict[str, Any] | None:
    """``{"function", "args"}`` of a ``@wait`` question; ``None`` for any other question."""
    if not isinstance(question, Mapping) or "function" not in question:
        return None
    args = question.get("args")
    return {"function": str(question["function"]), "args": dict(args) if isinstance(args, Mapping) else {}}


def authorized_call(proposed: dict[str, Any] | None, answer: Any) -> dict[str, Any] | None:
    """The call an answer authorizes: the proposal with the answer's edits, or ``None`` for anything
    but an approval.

    Examples
    --------
    >>> proposed = {"function": "issue_refund", "args": {"customer": "c-17", "amount": 40}}
    >>> authorized_call(proposed, {"action": "approve", "args": {"amount": 25}})
    {'function': 'issue_refund', 'args': {'customer': 'c-17', 'amount': 25}}
    >>> authorized_call(proposed, {"action": "reject", "reason": "no"}) is None
    True
    """
    if proposed is None or not isinstance(answer, Mapping) or answer.get("action") != "approve":
        return None
    edits = answer.get("args")
    return {
        "function": proposed["function"],
        "args": proposed["args"] | (dict(edits) if isinstance(edits, Mapping) else {}),
    }


def audit_of(record: QuestionRecord) -> dict[str, Any]:
    """The audit record of ``record``, as ``GET /questions/{id}`` shows it.

    ``authorized`` and ``diff`` describe the decision once there is one; ``receipt`` is what the
    resumed call reported (``None`` until the thread resumed, or when no ``@wait`` call answered).

    Examples
    --------
    >>> from wait_service.ledger import QuestionRecord
    >>> record = QuestionRecord(
    ...     question_id="q", thread_id="t", status="answered", digest="d",
    ...     question={"function": "issue_refund", "args": {"amount": 40}}, policy={}, source=None,
    ...     created_at=None, expires_at=None, updated_at=None, lifecycle=[],
    ...     answer={"action": "approve", "args": {"amount": 25}}, answered_by="ann", if_match='"d"',
    ... )
    >>> audit_of(record)["diff"]
    [{'op': 'replace', 'path': '/amount', 'value': 25}]
    """
    proposed = proposed_call(record.question)
    decided = record.status in DECIDED
    authorized = authorized_call(proposed, record.answer) if decided else None
    diff: list[dict[str, Any]] = []
    if proposed is not None and authorized is not None:
        import jsonpatch  # only a question whose arguments were edited needs it

        # Compared as exact JSON: an edit of 0.1 to Decimal("0.10000000000000000001") is a change.
        patch = jsonpatch.JsonPatch.from_diff(proposed["args"], authorized["args"], dumps=exact_json.dumps)
        diff = list(patch.patch)
    audit: dict[str, Any] = {
        "proposed": proposed,
        "authorized": authorized,
        "diff": diff,
        "answered_by": record.answered_by if decided else None,
        "if_match": record.if_match if decided else None,
        "answered_at": record.answered_at if decided else None,
        "receipt": record.receipt,
        # Who handed the question on, and who gave it more time (empty lists when nobody did), as
        # GET shows them, so the archive holds what the api shows.
        "delegations": [dict(entry) for entry in record.delegations],
        "extensions": [dict(entry) for entry in record.extensions],
    }
    # Who started the run that asked: only when it was recorded.
    if record.requested_by is not None:
        audit["requested_by"] = record.requested_by
    return audit
