"""The README's example runs as written."""

from __future__ import annotations

import subprocess
import sys

from tests.doc_sections import ROOT, fenced_after


def readme_example() -> str:
    page, code = fenced_after("<!-- readme-example:")
    # The front door's example: a newcomer meets it in the README, not in a reference page.
    assert page == ROOT / "README.md", f"the library example moved to {page}"
    return code


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
