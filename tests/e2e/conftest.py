"""The local stack as a user runs it: ``agent-wait local`` in a subprocess on free ports."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from e2e_support import LocalProcess, start_local

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(scope="module")
def local_stack() -> Iterator[LocalProcess]:
    local = start_local()
    try:
        yield local
    finally:
        code = local.stop()
        assert code == 0, "\n".join(local.lines)


@pytest.fixture(autouse=True)
def _show_stack_output_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """Print what the local stack printed and logged: pytest shows it when the test fails."""
    yield
    if "local_stack" not in request.fixturenames:
        return
    local: LocalProcess = request.getfixturevalue("local_stack")
    print("\n".join(["--- agent-wait local printed ---", *local.lines]))
    logs = [line.removeprefix("log: ").split(" (", 1)[0] for line in local.lines if line.startswith("log: ")]
    log = logs[0] if logs else None
    if log is not None and Path(log).is_file():
        tail = Path(log).read_text(errors="replace").splitlines()[-400:]
        print("\n".join([f"--- last lines of {log} ---", *tail]))
