"""The runner defers LangSmith when its tracing is off, and LangSmith still traces when it is on.

Each case is a fresh interpreter importing the runner handler as Lambda does, then running the sample
graph to its question. LangSmith's endpoint is a local HTTP server recording what the SDK sends: a
trace is a ``POST`` under ``/runs``.

- tracing off: ``langsmith.types`` and ``langgraph_sdk`` are imported but never run, at init or
  during a run, and nothing is sent;
- tracing on (``LANGCHAIN_TRACING_V2=true``; ``LANGSMITH_TRACING=true`` is read alike): nothing is
  deferred, the SDK loads at init as it would without us, and the run is traced;
- tracing turned on after an init that deferred it (``langsmith.tracing_context``): the deferred
  modules run at their first use, and the run is traced.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from test_service_runner_cold import ENVIRONMENT

from wait_service.runs.deferred_imports import DeferredImports, executed, langsmith_tracing

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[3]

RUN = """
import json, sys
sys.path[:0] = [{runner!r}, {root!r}]
import handler
from wait_service.runs.deferred_imports import DeferredImports, executed
at_init = {{name: executed(name) for name in ("langsmith.types", "langgraph_sdk")}}
deferring = any(isinstance(finder, DeferredImports) for finder in sys.meta_path)
import langsmith
from langgraph.checkpoint.memory import InMemorySaver
from examples.refund_agent import build_graph
graph = build_graph(InMemorySaver())
config = {{"configurable": {{"thread_id": "traced"}}}}
if {later!r}:
    with langsmith.tracing_context(enabled=True):
        parked = graph.invoke({{"customer": "c-1", "amount": 10}}, config)
else:
    parked = graph.invoke({{"customer": "c-1", "amount": 10}}, config)
assert parked["__interrupt__"], parked
from langchain_core.tracers.langchain import wait_for_all_tracers
wait_for_all_tracers()
after = {{name: executed(name) for name in ("langsmith.types", "langgraph_sdk")}}
print(json.dumps({{"deferring": deferring, "at_init": at_init, "after": after}}))
"""


class LangSmithEndpoint:
    """A local stand-in for LangSmith's API: answers every request, records each path and body."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, bytes]] = []
        recorded = self.requests

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                recorded.append((self.command, self.path, self.rfile.read(length)))
                body = b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PATCH = _answer  # noqa: N815 - http.server's names

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def traces(self) -> list[bytes]:
        return [body for method, path, body in self.requests if method == "POST" and path.startswith("/runs")]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def endpoint() -> Iterator[LangSmithEndpoint]:
    server = LangSmithEndpoint()
    yield server
    server.close()


def run_runner(
    endpoint: LangSmithEndpoint, tracing: dict[str, str], *, later: bool = False
) -> dict[str, object]:
    code = RUN.format(runner=str(ROOT / "functions" / "runner"), root=str(ROOT), later=later)
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        **ENVIRONMENT,
        "LANGSMITH_ENDPOINT": endpoint.url,
        "LANGSMITH_API_KEY": "lsv2-test",
        **tracing,
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_tracing_off_langsmith_types_and_the_platform_sdk_never_run(endpoint: LangSmithEndpoint) -> None:
    found = run_runner(endpoint, {})
    assert found == {
        "deferring": True,
        "at_init": {"langsmith.types": False, "langgraph_sdk": False},
        "after": {"langsmith.types": False, "langgraph_sdk": False},
    }
    assert endpoint.traces() == []


def test_tracing_on_nothing_is_deferred_and_the_run_is_traced(endpoint: LangSmithEndpoint) -> None:
    found = run_runner(endpoint, {"LANGCHAIN_TRACING_V2": "true"})
    assert found["deferring"] is False
    assert found["at_init"] == {"langsmith.types": True, "langgraph_sdk": True}
    assert endpoint.traces(), endpoint.requests


def test_tracing_turned_on_after_a_deferred_init_runs_the_deferred_modules_and_traces(
    endpoint: LangSmithEndpoint,
) -> None:
    found = run_runner(endpoint, {}, later=True)
    assert found["deferring"] is True
    assert found["at_init"] == {"langsmith.types": False, "langgraph_sdk": False}
    assert endpoint.traces(), endpoint.requests


def test_the_tracing_switch_is_read_as_langsmith_reads_it() -> None:
    assert langsmith_tracing({"LANGSMITH_TRACING": "true"})
    assert langsmith_tracing({"LANGCHAIN_TRACING_V2": "true"})
    assert not langsmith_tracing({"LANGSMITH_TRACING": "false"})
    assert not langsmith_tracing({"LANGSMITH_TRACING": "  "})
    # The first variable set decides, in LangSmith's order (``TRACING_V2`` before ``TRACING``).
    assert not langsmith_tracing({"LANGSMITH_TRACING_V2": "false", "LANGSMITH_TRACING": "true"})
    assert langsmith_tracing({"LANGSMITH_TRACING": "  ", "LANGCHAIN_TRACING": "true"})


def test_a_deferred_module_runs_once_at_its_first_use_and_is_then_a_plain_module(tmp_path: Path) -> None:
    package = tmp_path / "deferred_probe"
    package.mkdir()
    (package / "__init__.py").write_text("RUNS = []\nRUNS.append('package')\n")
    (package / "leaf.py").write_text(
        "import threading\nSTARTED = threading.Event()\nfrom deferred_probe import RUNS\n"
        "RUNS.append('leaf')\nVALUE = 42\n"
    )
    finder = DeferredImports(["deferred_probe"]).install()
    # A handler imported twice (tests load it by path again) installs one finder, not two.
    assert DeferredImports(["deferred_probe"]).install() is finder
    sys.path.insert(0, str(tmp_path))
    try:
        import deferred_probe.leaf as leaf

        # Importing the submodule ran neither it nor its package.
        assert not executed("deferred_probe")
        assert not executed("deferred_probe.leaf")
        # Threads racing for the first attribute: the module runs once, every thread sees it whole.
        values: list[int] = []
        threads = [threading.Thread(target=lambda: values.append(leaf.VALUE)) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert values == [42] * 8
        import deferred_probe

        assert deferred_probe.RUNS == ["package", "leaf"]
        assert type(leaf) is type(sys) and executed("deferred_probe.leaf")
    finally:
        finder.uninstall()
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n.partition(".")[0] == "deferred_probe"]:
            del sys.modules[name]
