"""Text for people: tables and key/value blocks (``--json`` bypasses all of this)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from agent_wait_cli.local.events import compact, describe_question


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, max_width: int = 60) -> str:
    """A plain aligned table.

    Examples
    --------
    >>> print(table(["ID", "STATUS"], [["q1", "raised"], ["question-2", "answered"]]))
    ID          STATUS
    q1          raised
    question-2  answered
    """
    cells = [[_cell(value, max_width) for value in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, value in enumerate(row):
            widths[i] = max(widths[i], len(value))
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def _cell(value: Any, max_width: int) -> str:
    text = "-" if value is None or value == "" else value if isinstance(value, str) else compact(value)
    return text if len(text) <= max_width else text[: max_width - 1] + "…"


def fields(pairs: Sequence[tuple[str, Any]]) -> str:
    """``key: value`` lines with the values aligned.

    Examples
    --------
    >>> print(fields([("status", "raised"), ("thread", "t-1")]))
    status  raised
    thread  t-1
    """
    width = max((len(key) for key, _ in pairs), default=0)
    return "\n".join(f"{key.ljust(width)}  {_value(value)}" for key, value in pairs)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _value(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def question_rows(items: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        [
            item.get("question_id"),
            item.get("thread_id"),
            item.get("status"),
            _mapping(item.get("policy")).get("kind"),
            describe_question(item.get("question")),
            item.get("created_at"),
        ]
        for item in items
    ]
    return table(["QUESTION", "THREAD", "STATUS", "KIND", "ASKS", "CREATED"], rows)


def question_detail(question: Mapping[str, Any]) -> str:
    policy = _mapping(question.get("policy"))
    pairs: list[tuple[str, Any]] = [
        ("question", question.get("question_id")),
        ("thread", question.get("thread_id")),
        ("status", question.get("status")),
        ("kind", policy.get("kind")),
        ("prompt", policy.get("prompt")),
        ("asks", describe_question(question.get("question"))),
        ("digest", question.get("digest")),
        ("created", question.get("created_at")),
        ("expires", question.get("expires_at")),
        ("escalation", question.get("escalation") or None),
        ("answer", question.get("answer")),
        ("answered by", question.get("answered_by")),
        ("error", question.get("error")),
    ]
    if policy.get("options"):
        pairs.insert(5, ("options", ", ".join(map(str, policy["options"]))))
    allowed = _mapping(question.get("question")).get("allowed_decisions")
    if isinstance(allowed, list):
        # A LangChain middleware request: the decisions it allows.
        pairs.insert(
            pairs.index(("digest", question.get("digest"))), ("allowed", ", ".join(map(str, allowed)))
        )
    problems = _mapping(question.get("question")).get("invalid_args")
    if isinstance(problems, list) and problems:
        # The proposal breaks its own argument schema: approving it as is is refused.
        listed = "; ".join(f"{_mapping(p).get('field')}: {_mapping(p).get('message')}" for p in problems)
        pairs.insert(pairs.index(("digest", question.get("digest"))), ("invalid args", listed))
    pairs += _authority(question)
    text = fields(pairs)
    lifecycle = question.get("lifecycle") or []
    if lifecycle:
        text += "\n\n" + timeline(lifecycle)
    return text


def _authority(question: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Who started the run, who it was handed to, and a quorum's count: lines only when there are any.

    Examples
    --------
    >>> quorum = {"summary": "2 of 3 approvals", "votes": [{"principal": "ann", "vote": "approve"},
    ...                                                    {"principal": "bob", "vote": "approve"}]}
    >>> _authority({"requested_by": "cy", "quorum": quorum})
    [('requested by', 'cy'), ('quorum', '2 of 3 approvals (ann approve, bob approve)')]
    >>> _authority({"escalation": 1, "route": "leads", "responders": ["ann", "lee"]})
    [('rung', '1 leads: ann, lee')]
    """
    pairs: list[tuple[str, Any]] = []
    if question.get("requested_by"):
        pairs.append(("requested by", question["requested_by"]))
    if question.get("route"):
        # Escalated: who may answer now follows the rung.
        responders = ", ".join(map(str, question.get("responders") or [])) or "anyone"
        pairs.append(("rung", f"{question.get('escalation')} {question['route']}: {responders}"))
    if question.get("delegates"):
        pairs.append(("delegates", ", ".join(map(str, question["delegates"]))))
    quorum = _mapping(question.get("quorum"))
    if quorum:
        votes = ", ".join(
            f"{_mapping(v).get('principal')} {_mapping(v).get('vote')}" for v in quorum.get("votes") or []
        )
        pairs.append(("quorum", f"{quorum.get('summary')}" + (f" ({votes})" if votes else "")))
    return pairs


def timeline(lifecycle: Sequence[Mapping[str, Any]]) -> str:
    """The lifecycle as a timeline: when, how long after it was raised, what, who, and a detail.

    Examples
    --------
    >>> raised = {"stage": "raised", "at": "2026-11-30T10:00:00.000Z", "actor": "agent"}
    >>> up = {"stage": "escalated", "at": "2026-11-30T10:01:00.500Z", "actor": "system", "detail": "managers"}
    >>> print(timeline([raised, up]))
    AT                        AFTER   STAGE      BY      DETAIL
    2026-11-30T10:00:00.000Z  +0s     raised     agent   -
    2026-11-30T10:01:00.500Z  +1m00s  escalated  system  managers
    """
    start = _moment(lifecycle[0].get("at")) if lifecycle else None
    rows = []
    for stage in lifecycle:
        moment = _moment(stage.get("at"))
        after = "" if start is None or moment is None else _elapsed((moment - start).total_seconds())
        detail = stage.get("detail")
        rows.append(
            [stage.get("at"), after, stage.get("stage"), stage.get("actor"), "" if detail is None else detail]
        )
    return table(["AT", "AFTER", "STAGE", "BY", "DETAIL"], rows)


def _moment(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _elapsed(seconds: float) -> str:
    """``+42s``, ``+2m05s``, ``+1h02m``."""
    if seconds < 60:
        return f"+{seconds:.1f}s".replace(".0s", "s")
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"+{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"+{hours}h{minutes:02d}m"


def thread_detail(thread: Mapping[str, Any]) -> str:
    pending = thread.get("pending") or []
    return fields(
        [
            ("thread", thread.get("thread_id")),
            ("status", thread.get("status")),
            ("pending", ", ".join(map(str, pending)) if pending else None),
            ("output", thread.get("output")),
            ("error", thread.get("error")),
            ("updated", thread.get("updated_at")),
        ]
    )


# The field that says what a resolution event reports, by type.
_RESOLUTION_DETAIL = {
    "wait.answered": "answer",
    "wait.expired": "answer",
    "wait.revoked": "reason",
    "wait.resumed": "receipt",
    "wait.resume_failed": "error",
    "thread.done": "summary",
    "thread.failed": "error",
}


def envelope_line(envelope: Mapping[str, Any]) -> str:
    """One line per event: a question as it was raised, or what a resolution event reports.

    Examples
    --------
    >>> print(envelope_line({"type": "wait.revoked", "occurred_at": "2026-11-30T10:00:00Z",
    ...     "thread_id": "t-1", "question_id": "q-1", "reason": "duplicate"}))
    2026-11-30T10:00:00Z  wait.revoked  thread=t-1  question=q-1  reason="duplicate"
    """
    detail = _RESOLUTION_DETAIL.get(str(envelope.get("type")))
    if detail is not None:
        subject = (
            f"question={envelope.get('question_id')}"
            if "question_id" in envelope
            else f"run={envelope.get('run_id')}"
        )
        return "  ".join(
            [
                str(envelope.get("occurred_at", "-")),
                str(envelope.get("type")),
                f"thread={envelope.get('thread_id')}",
                subject,
                f"{detail}={json.dumps(envelope.get(detail), ensure_ascii=False)[:160]}",
            ]
        )
    policy = _mapping(envelope.get("policy"))
    return "  ".join(
        [
            str(envelope.get("created_at", "-")),
            f"thread={envelope.get('thread_id')}",
            f"question={envelope.get('question_id')}",
            f"kind={policy.get('kind', '-')}",
            describe_question(envelope.get("question")),
        ]
    )
