"""Find a part of the documentation wherever it lives: README.md or a page of docs/.

Tests that read the docs (an example they run, a table they compare with the code) ask for it by a
marker, a heading or a table's header row, never by file: a section can move between the README and
docs/ without a test noticing anything but a lost or duplicated marker.

Examples
--------
>>> page, block = fenced_after("<!-- webhook-receiver -->")  # doctest: +SKIP
>>> page.name, block.splitlines()[0]  # doctest: +SKIP
('integrations.md', 'import os')
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
_FENCE = re.compile(r"^\s*```")
_HEADING = re.compile(r"^(#{1,6}) (.*)$")


def doc_pages() -> list[Path]:
    """README.md, then every Markdown page under docs/ (sorted)."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def page_with(marker: str) -> tuple[Path, str]:
    """The one page holding ``marker``, and its text from the marker on.

    Fails when no page holds it (a lost section) or several do (which one would a test read?).
    """
    hits = [(page, text) for page in doc_pages() if marker in (text := page.read_text())]
    found = ", ".join(str(page.relative_to(ROOT)) for page, _ in hits)
    assert len(hits) == 1, f"{marker!r} is in {len(hits)} doc pages ({found or 'none'}); expected one"
    page, text = hits[0]
    return page, text[text.index(marker) :]


def fenced_after(marker: str, language: str = "python") -> tuple[Path, str]:
    """The first ```language block after ``marker``: the page and the block's code."""
    page, text = page_with(marker)
    match = re.search(rf"```{re.escape(language)}\n(.*?)```", text, re.S)
    assert match, f"no ```{language} block after {marker!r} in {page.relative_to(ROOT)}"
    return page, match.group(1)


def section(title: str) -> tuple[Path, str]:
    """The body of the one section whose heading is ``title`` (any level), up to the next heading of
    the same or a higher level; headings inside code blocks (a shell comment) do not count."""
    hits: list[tuple[Path, str]] = []
    for page in doc_pages():
        lines, level, body, fenced = page.read_text().splitlines(), 0, [], False
        for line in lines:
            if _FENCE.match(line):
                fenced = not fenced
            heading = None if fenced else _HEADING.match(line)
            if level and heading and len(heading.group(1)) <= level:
                hits.append((page, "\n".join(body)))
                level, body = 0, []
            if level:
                body.append(line)
            elif heading and heading.group(2).strip() == title:
                level = len(heading.group(1))
        if level:
            hits.append((page, "\n".join(body)))
    found = ", ".join(str(page.relative_to(ROOT)) for page, _ in hits)
    assert len(hits) == 1, f"section {title!r} is in {len(hits)} places ({found or 'none'}); expected one"
    return hits[0]


def table_rows(header: str) -> tuple[Path, list[str]]:
    """The rows (after the separator) of the one table whose header row is ``header``."""
    page, text = page_with(header)
    rows: list[str] = []
    for line in text.splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    assert rows, f"the table {header!r} in {page.relative_to(ROOT)} has no rows"
    return page, rows
