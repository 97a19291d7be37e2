"""The local stack as a user runs it: ``agent-wait local`` in a subprocess on free ports."""

from __future__ import annotations

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
