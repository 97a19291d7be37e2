"""How a synth or deploy ends when something is wrong: one line on stderr, exit status 1.

A setting the stack cannot be built from raises :class:`ConfigError`, which carries the context key
and, where one is known, the fix. :func:`run` is the app's entry: it catches that error once and
prints ``agent-wait: <what is wrong>`` on one line; any other exception gets one line naming what
failed and how to see more. ``AGENT_WAIT_DEBUG=1`` adds the traceback (and any output the failed
step captured, e.g. pip's).

Examples
--------
>>> error = ConfigError("context runner_memory='lots': expected a whole number of MB from 128 to 10240")
>>> error.key
'runner_memory'
>>> one_line(ConfigError("context graph_source: folder /x not found", fix="set it to your agent's folder"))
"agent-wait: context graph_source: folder /x not found; fix: set it to your agent's folder"
"""

from __future__ import annotations

import json
import os
import re
import sys
import traceback
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

DEBUG_VARIABLE = "AGENT_WAIT_DEBUG"
# Every message of ours starts "context <key>" (or "context <key>=<value>", "context <key>[...]").
_KEY = re.compile(r"^context ([a-z][a-z0-9_]*)")

# The construct of the statements a user's runner_policy file adds (infra.functions).
_USER_POLICY = "/Runner/GraphPolicy/"

__all__ = ["DEBUG_VARIABLE", "ConfigError", "SynthRefused", "debug", "one_line", "refusal", "run"]


class ConfigError(ValueError):
    """A context value the stack cannot be built from; the message names the key.

    Parameters
    ----------
    message
        What is wrong, starting ``context <key>``; it usually says what is expected, which is the fix.
    key
        The context key; by default the one the message starts with.
    fix
        What to change, when the message does not already say it.
    detail
        Output of the failed step (e.g. pip's), shown only with ``AGENT_WAIT_DEBUG=1``.
    """

    def __init__(
        self, message: str, *, key: str | None = None, fix: str | None = None, detail: str = ""
    ) -> None:
        super().__init__(message)
        match = _KEY.match(message)
        self.key: str | None = key or (match.group(1) if match else None)
        self.fix = fix
        self.detail = detail

    @property
    def line(self) -> str:
        """The message and the fix, on one line."""
        text = str(self.args[0]) if self.args else ""
        if self.fix:
            text = f"{text}; fix: {self.fix}"
        return " ".join(text.split())


class SynthRefused(RuntimeError):
    """cdk-nag refused the synthesized stack: a finding nobody acknowledged, named on one line."""


def refusal(outdir: Path) -> ConfigError | SynthRefused | None:
    """What the policy validation report of a failed synth in ``outdir`` refused, as one error.

    A finding on the statements of ``runner_policy`` is that key's; any other names the rule and
    the construct. ``None`` when the synth failed for another reason (no report there).
    """
    report = outdir / "validation-report.json"
    if not report.is_file():
        return None
    findings = [
        (violation.get("ruleName", "?"), construct.get("constructPath", "?"))
        for plugin in json.loads(report.read_text()).get("pluginReports", [])
        for violation in plugin.get("violations", [])
        for construct in violation.get("violatingConstructs", [])
    ]
    if not findings:
        return None
    rule, path = findings[0]
    more = f" (and {len(findings) - 1} more, listed above)" if len(findings) > 1 else ""
    if _USER_POLICY in path:
        return ConfigError(
            f"context runner_policy: cdk-nag refuses {rule} on the statements of the file{more}",
            fix='narrow the statement, or add {"id": "<rule>", "reason": "..."} to the file\'s "acknowledge"',
        )
    return SynthRefused(f"cdk-nag refuses {rule} on {path}{more}; the report: {report}")


def debug() -> bool:
    """Whether ``AGENT_WAIT_DEBUG`` asks for tracebacks (any value but empty, ``0`` or ``false``)."""
    return os.environ.get(DEBUG_VARIABLE, "").strip().lower() not in ("", "0", "false", "no", "off")


def one_line(exc: BaseException, doing: str = "synth") -> str:
    """The line printed for ``exc``: a :class:`ConfigError`'s message, or what failed and how to see more."""
    if isinstance(exc, ConfigError):
        return f"agent-wait: {exc.line}"
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    what = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    if len(what) > 300:
        what = what[:297] + "..."
    return f"agent-wait: {doing} failed: {what} (set {DEBUG_VARIABLE}=1 for the traceback)"


def run(main: Callable[[], object], *, doing: str = "synth", err: TextIO | None = None) -> int:
    """Call ``main``; on an exception print one line (and, with ``AGENT_WAIT_DEBUG=1``, the traceback).

    Returns the exit status: 0, or 1 after an error.
    """
    stream = err if err is not None else sys.stderr
    try:
        main()
    except Exception as exc:
        if debug():
            stream.write("".join(traceback.format_exception(exc)))
            detail = getattr(exc, "detail", "")
            if detail:
                stream.write(detail.rstrip() + "\n")
        stream.write(one_line(exc, doing) + "\n")
        stream.flush()
        return 1
    return 0
