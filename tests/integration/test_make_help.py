"""``make help`` lists every documented target, in plain text when its output is not a terminal."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_help_lists_every_target_without_colour_codes_when_piped() -> None:
    documented = re.findall(r"^([a-zA-Z0-9_-]+):.*?## ", (ROOT / "Makefile").read_text(), flags=re.M)

    shown = subprocess.run(
        ["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout

    assert "\x1b" not in shown
    assert [line.split()[0] for line in shown.splitlines()] == documented
    assert {"e2e", "test", "demo", "local", "help"} <= set(documented)
