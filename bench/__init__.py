"""Benchmarks: each prints ratios measured side by side in one run, never a bare time as a gate."""

from __future__ import annotations

import argparse


def parse_no_options(prog: str, doc: str | None, argv: list[str] | None) -> None:
    """Parse the command line of a tool that takes no option: ``--help`` prints the first paragraph
    of ``doc``; anything else is refused with a usage error (exit 2) rather than ignored."""
    description = " ".join((doc or "").split("\n\n")[0].split())
    argparse.ArgumentParser(prog=prog, description=description).parse_args(argv)
