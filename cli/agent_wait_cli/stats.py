"""``agent-wait stats``: the approval analytics of a window of days (``GET /stats``) as tables.

One line of totals, then one table per grouping: by responder (who decides, how fast, how often
they approve unchanged: a high approve rate with a short median is a rubber stamp), by function,
by escalation rung and by day, and the fields most often edited. ``--json`` prints the api's body.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_wait_cli.render import table

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

COLUMNS = (
    "RAISED",
    "ANSWERED",
    "APPROVE",
    "EDIT",
    "REJECT",
    "RESPOND",
    "EXPIRED",
    "REVOKED",
    "P50",
    "P90",
    "MAX",
)


def duration(ms: Any) -> str:
    """A time in ms, for people.

    Examples
    --------
    >>> [duration(v) for v in (None, 870, 90_000, 5_400_000, 200_000_000)]
    ['-', '0.9s', '1.5m', '1.5h', '2.3d']
    """
    if not isinstance(ms, int | float):
        return "-"
    seconds = ms / 1000
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.1f}s"


def percent(rate: Any) -> str:
    return "-" if not isinstance(rate, int | float) else f"{rate * 100:.0f}%"


def _row(label: Any, figures: Mapping[str, Any]) -> list[Any]:
    tta = figures.get("time_to_answer") or {}
    return [
        label,
        figures.get("raised"),
        figures.get("answered"),
        figures.get("approve"),
        figures.get("edit"),
        figures.get("reject"),
        figures.get("respond"),
        figures.get("expired"),
        figures.get("revoked"),
        duration(tta.get("p50_ms")),
        duration(tta.get("p90_ms")),
        duration(tta.get("max_ms")),
    ]


def _section(title: str, key: str, rows: Sequence[Mapping[str, Any]], *, skip_empty: bool = False) -> str:
    shown = [
        r
        for r in rows
        if not skip_empty or any(r.get(n) for n in ("raised", "answered", "expired", "revoked"))
    ]
    if not shown:
        return ""
    body = table(
        [title, *COLUMNS, "APPROVE%", "EDIT%"],
        [[*_row(r.get(key), r), percent(r.get("approve_rate")), percent(r.get("edit_rate"))] for r in shown],
    )
    return body + "\n"


def render_stats(body: Mapping[str, Any]) -> str:
    """The tables of a ``GET /stats`` body."""
    totals = body.get("totals") or {}
    tta = totals.get("time_to_answer") or {}
    scope = " ".join(
        part
        for part in (
            f"function={body['function']}" if body.get("function") else "",
            f"responder={body['responder']}" if body.get("responder") else "",
        )
        if part
    )
    lines = [
        f"{body.get('since')} .. {body.get('until')}" + (f"  ({scope})" if scope else ""),
        f"raised {totals.get('raised', 0)}  answered {totals.get('answered', 0)}  "
        f"expired {totals.get('expired', 0)} (default applied {totals.get('expired_default', 0)})  "
        f"revoked {totals.get('revoked', 0)}  resume_failed {totals.get('resume_failed', 0)}  "
        f"escalated {totals.get('escalated', 0)}",
        f"approve {percent(totals.get('approve_rate'))}  edit {percent(totals.get('edit_rate'))}  "
        f"time to answer p50 {duration(tta.get('p50_ms'))}  p90 {duration(tta.get('p90_ms'))}  "
        f"max {duration(tta.get('max_ms'))}",
        "",
    ]
    sections = [
        _section("RESPONDER", "responder", body.get("by_responder") or []),
        _section("FUNCTION", "function", body.get("by_function") or []),
        _section("RUNG", "rung", body.get("by_rung") or []),
        _section("DAY", "day", body.get("by_day") or [], skip_empty=True),
    ]
    lines += [s for s in sections if s]
    edited = totals.get("edited_fields") or []
    if edited:
        lines.append(table(["EDITED FIELD", "TIMES"], [[e.get("field"), e.get("count")] for e in edited]))
    return "\n".join(lines).rstrip()
