"""SnapStart's hooks: every restored copy gets fresh connections and randomness of its own.

Copies of one snapshot start from the same memory: a forked child (for python-ulid's state) or a
saved ``random`` state set again stands in for each restored copy.
"""

from __future__ import annotations

import gc
import json
import os
import random
import sys
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from ulid import ULID

from wait_service.init_phase import loading
from wait_service.runs.snapstart import after_restore, before_snapshot, register_hooks

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


def _in_a_copy(work: Callable[[], Any]) -> Any:
    """Run ``work`` in a forked copy of this process and return its JSON result."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.close(read)
        try:
            os.write(write, json.dumps(work()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(data)


@pytest.fixture
def snapshot() -> Iterator[object]:
    """The ``random`` state an init leaves in the snapshot (a fork would not do: ``random`` reseeds
    in a forked child, and a restore runs no such handler)."""
    random.seed(7)
    yield random.getstate()
    random.seed()


def test_each_restored_copy_draws_its_own_random_numbers(snapshot: Any) -> None:
    def restored(*, hook: bool) -> float:
        random.setstate(snapshot)
        if hook:
            after_restore()
        return random.random()

    without_hook = [restored(hook=False) for _ in range(2)]
    with_hook = [restored(hook=True) for _ in range(2)]

    # Without the hook every copy repeats the snapshot's sequence; with it each has its own.
    assert without_hook[0] == without_hook[1]
    assert with_hook[0] != with_hook[1]


def test_ulids_of_two_copies_differ_even_at_the_same_millisecond() -> None:
    timestamp = 1_800_000_000.123
    ULID.from_timestamp(timestamp - 60)  # the init made one: its state is in the snapshot

    ids = [_in_a_copy(lambda: str(ULID.from_timestamp(timestamp))) for _ in range(2)]

    # The same time part; the random part comes from the kernel, not from the snapshot.
    assert ids[0][:10] == ids[1][:10]
    assert ids[0] != ids[1]


class _Connections:
    """A local HTTP/1.1 endpoint answering every request with ``{}``; counts the connections opened."""

    def __init__(self) -> None:
        self.opened = 0
        counter = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                counter.opened += 1

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "application/x-amz-json-1.0")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def endpoint() -> Iterator[_Connections]:
    connections = _Connections()
    yield connections
    connections.stop()


def _client(endpoint: _Connections) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint.url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )


def test_every_client_opens_a_new_connection_after_the_snapshot(endpoint: _Connections) -> None:
    client = _client(endpoint)
    client.list_tables()
    client.list_tables()
    assert endpoint.opened == 1  # kept alive and reused: the pool holds it

    closed = before_snapshot()  # every botocore client in the process, this one among them
    client.list_tables()

    assert closed >= 1
    assert endpoint.opened == 2
    client.close()


def test_a_client_the_init_built_and_froze_is_found_too(endpoint: _Connections) -> None:
    # The handlers' init runs in ``loading()``, which freezes what it built: the collector lists
    # no frozen object, and the search must still find the init's clients.
    gc.unfreeze()  # as in a new process: its first init freezes
    with loading():
        client = _client(endpoint)
    try:
        client.list_tables()
        assert not any(found is client for found in gc.get_objects())  # frozen

        before_snapshot()
        client.list_tables()

        assert endpoint.opened == 2
        # Still frozen afterwards: the requests' collections do not walk it.
        assert not any(found is client for found in gc.get_objects())
    finally:
        client.close()
        gc.unfreeze()


def test_hooks_are_registered_through_the_runtime_only_for_a_snapstart_init(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registered: list[tuple[str, Any]] = []
    runtime = types.ModuleType("snapshot_restore_py")
    runtime.register_before_snapshot = lambda hook: registered.append(("before", hook))  # type: ignore[attr-defined]
    runtime.register_after_restore = lambda hook: registered.append(("after", hook))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", runtime)

    assert register_hooks({}) is False
    assert register_hooks({"AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand"}) is False
    assert registered == []

    assert register_hooks({"AWS_LAMBDA_INITIALIZATION_TYPE": "snap-start"}) is True
    assert registered == [("before", before_snapshot), ("after", after_restore)]


def test_without_the_runtime_library_nothing_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)

    assert register_hooks({"AWS_LAMBDA_INITIALIZATION_TYPE": "snap-start"}) is False
