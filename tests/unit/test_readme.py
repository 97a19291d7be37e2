"""The README's example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> str:
    text = README.read_text()
    marker = text.index("<!-- readme-example:")
    match = re.search(r"```python\n(.*?)```", text[marker:], re.S)
    assert match, "the README lost its example block"
    return match.group(1)


def test_readme_example_runs_as_written() -> None:
    # Given the example block exactly as the README shows it
    code = readme_example()
    # The README promises "a 20-line example": blank lines are layout, not example.
    assert len([line for line in code.splitlines() if line.strip()]) <= 20

    # When a fresh interpreter runs it
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)

    # Then it parks on the refund, publishes the question and resumes with the edited amount
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "{'customer': 'c-17', 'amount': 40}"
    assert lines[1].startswith("{'refunded': 25")
