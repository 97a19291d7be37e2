"""Unit tests stay in this process: no subprocess, no network socket (``make unit`` is the fast loop).

AWS here is moto in process (``mock_aws``), which opens no socket. A test that needs a process, a
server or the synthesized app belongs in ``tests/integration`` (or ``tests/infra``, ``tests/e2e``);
the guard below fails a unit test that starts one, naming what it started.
"""

from __future__ import annotations

import socket
import subprocess
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

NETWORK = (socket.AF_INET, socket.AF_INET6)


class UnitIOError(AssertionError):
    """A unit test started a process or opened a network socket."""


@pytest.fixture(autouse=True)
def _in_process_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(what: str) -> UnitIOError:
        return UnitIOError(f"a unit test may not {what}: move the test to tests/integration")

    def execute_child(self: subprocess.Popen[Any], args: Any, *rest: Any) -> None:
        raise refuse(f"start a process ({args!r:.80})")

    def network(name: str) -> Any:
        original = getattr(socket.socket, name)

        def guarded(self: socket.socket, address: Any, *rest: Any) -> Any:
            if self.family in NETWORK:
                raise refuse(f"{name} a network socket ({address!r})")
            return original(self, address, *rest)

        return guarded

    monkeypatch.setattr(subprocess.Popen, "_execute_child", execute_child)
    for name in ("bind", "connect", "connect_ex"):
        monkeypatch.setattr(socket.socket, name, network(name))
    yield
