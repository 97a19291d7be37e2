"""Helpers for the e2e tests: ``agent-wait local`` in a subprocess on free ports, HTTP, the CLI."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_wait_cli.local.stack import LocalStack

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
START_TIMEOUT = 120.0
STEP_TIMEOUT = 60.0
# One JSON Schema per event type: every event a local stack publishes is checked against its own.
SCHEMAS = ROOT / "docs" / "events"


def cli_path() -> str:
    path = BIN / "agent-wait"
    if not path.exists():
        pytest.fail(f"{path} is missing: pip install -e '.[dev]'")
    return str(path)


@dataclass
class LocalProcess:
    """A running ``agent-wait local`` and the lines it printed."""

    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    info: dict[str, str] = field(default_factory=dict)
    # The events read from the subscriber queue when the stack stopped (see invalid_events).
    events: list[dict[str, Any]] = field(default_factory=list)
    _queue: queue.Queue[str | None] = field(default_factory=queue.Queue)

    @property
    def api(self) -> str:
        return self.info["API"]

    def start_reader(self) -> None:
        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self.lines.append(line.rstrip("\n"))
                self._queue.put(line.rstrip("\n"))
            self._queue.put(None)

        threading.Thread(target=read, daemon=True).start()

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                raise AssertionError("agent-wait local exited early:\n" + "\n".join(self.lines))
            key, sep, value = line.partition(": ")
            if sep and key in {"moto", "outbox queue", "subscriber queue", "graph", "API"}:
                self.info[key] = value
            if sep and key == "audit archive":
                self.info[key] = value.partition(" (")[0]
            if line.startswith("API: "):
                return
        raise AssertionError("agent-wait local printed no API line:\n" + "\n".join(self.lines))

    def stop(self, timeout: float = 30.0) -> int:
        invalid: list[str] = []
        if self.process.poll() is None:
            invalid = self.invalid_events()
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise
        assert not invalid, "events that do not match their schema (docs/events/):\n" + "\n".join(invalid)
        return code

    def invalid_events(self) -> list[str]:
        """Every event the stack published to its topic, each checked against its type's schema.

        The subscriber queue takes every publish (raw delivery): draining it before the stack stops
        checks each event the test made the stack emit, whatever the test read itself.
        """
        import boto3
        import jsonschema

        if "subscriber queue" not in self.info or "moto" not in self.info:
            return []
        sqs = boto3.client(
            "sqs",
            endpoint_url=self.info["moto"],
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )
        url = self.info["subscriber queue"]
        invalid: list[str] = []
        while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            for message in got:
                event = json.loads(message["Body"])
                self.events.append(event)
                schema = SCHEMAS / f"{event.get('type')}.schema.json"
                if not schema.exists():
                    invalid.append(f"no schema for {event.get('type')!r}: {message['Body'][:300]}")
                    continue
                try:
                    jsonschema.validate(event, json.loads(schema.read_text()))
                except jsonschema.ValidationError as exc:
                    invalid.append(f"{event.get('type')}: {exc.message}: {message['Body'][:300]}")
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        return invalid


def start_local(*extra: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> LocalProcess:
    env = (env if env is not None else dict(os.environ)) | {"PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [cli_path(), "local", "--port", "0", "--moto-port", "0", *extra],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    local = LocalProcess(process)
    local.start_reader()
    try:
        local.wait_ready()
    except BaseException:
        local.stop()
        raise
    return local


def http(
    method: str, url: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers.items()), json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers.items()), json.loads(exc.read() or b"null")


def eventually(check: Callable[[], Any], timeout: float = STEP_TIMEOUT, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy: the stack works on its own threads."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def run_cli(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([cli_path(), *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(
            f"agent-wait {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )
    return result


def dlq_cli(stack: LocalStack, *args: str, clock: float | None = None) -> tuple[int, str, str]:
    """``agent-wait dlq ARGS`` (the console script's ``main``, in process) on an in-process stack's moto."""
    import io

    from agent_wait_cli.commands import main

    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["dlq", *args, "--endpoint-url", stack.moto.endpoint, "--stack", stack.config.prefix.rstrip("-")],
        out=out,
        err=err,
        environ={},
        clock=None if clock is None else (lambda: clock),
    )
    return code, out.getvalue(), err.getvalue()
