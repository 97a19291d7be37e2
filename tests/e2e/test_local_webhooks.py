"""``agent-wait local --webhook URL=SECRET``: the local stack delivers the topic's events, signed.

A real receiver on 127.0.0.1 (free port); the event is published to the local topic as the runner
publishes it, and the stack's own delivery queue, poller and webhooks handler (loaded from
``functions/webhooks/handler.py``) bring it to the receiver, which verifies it with
:func:`agent_wait.signing.verify`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agent_wait import signing
from agent_wait.aws import SnsAnnounce
from agent_wait.testing import sample_envelope
from agent_wait.webhook import WebhookAnnounce
from agent_wait_cli.commands import build_parser
from agent_wait_cli.local.stack import LocalStack, StackConfig
from tests.doc_sections import fenced_after

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def test_the_local_stack_posts_each_event_signed_to_every_webhook() -> None:
    received: list[dict[str, Any]] = []
    got = threading.Event()

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            received.append({"path": self.path, "headers": dict(self.headers), "body": body})
            self.send_response(204)
            self.end_headers()
            got.set()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    args = build_parser().parse_args(["local", "--webhook", f"{url}=s3cret=="])
    try:
        prefix = f"h{uuid.uuid4().hex[:6]}-"
        config = StackConfig(project=ROOT, port=0, prefix=prefix, webhooks=list(args.webhook))

        def idle(event: dict[str, Any], context: Any) -> dict[str, Any]:
            return {"statusCode": 200, "body": "{}"}

        with LocalStack(config, api_handler=idle, runner_handler=idle) as stack:
            envelope = sample_envelope("q-local-hook", "t-local-hook")
            SnsAnnounce(stack.resources.topic_arn, client=stack.client("sns")).announce(envelope)
            assert got.wait(timeout=60), "the webhook never received the event"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)

    [request] = received
    headers = request["headers"]
    assert json.loads(request["body"])["dedupe_key"] == "wait.created:q-local-hook"
    assert headers[signing.KEY_ID_HEADER] == "webhook-1"
    assert signing.verify(
        "s3cret==",
        headers[signing.TIMESTAMP_HEADER],
        headers[signing.SIGNATURE_HEADER],
        "POST",
        "/hooks",
        request["body"],
    )


@pytest.mark.parametrize("value", ["no-secret", "https://x/h=", "ftp://x/h=s", "https://x/h?a=b=s"])
def test_a_malformed_webhook_flag_is_refused(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["local", "--webhook", value])
    assert "expected URL=SECRET" in capsys.readouterr().err


def readme_receiver() -> str:
    """The webhook receiver the docs show (docs/integrations.md), as written."""
    return fenced_after("<!-- webhook-receiver -->")[1]


def test_the_readme_receiver_accepts_a_delivery_and_refuses_a_forgery(tmp_path: Path) -> None:
    code = readme_receiver()
    assert len([line for line in code.splitlines() if line.strip()]) <= 12
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "WEBHOOK_SECRET": "s3cret", "PORT": str(port)}
    process = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        deadline = time.monotonic() + 60
        while True:  # until the receiver listens (bounded)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and process.poll() is None, "the receiver never listened"
                threading.Event().wait(0.05)
        url = f"http://127.0.0.1:{port}/hooks/agent-wait?team=a"
        body = sample_envelope("q-readme", "t-readme").to_json().encode()
        assert WebhookAnnounce(url, "s3cret", key_id="k").post(body, "wait.created:q-readme") == 204
        assert WebhookAnnounce(url, "forged", key_id="k").post(body, "wait.created:q-readme") == 401
    finally:
        process.terminate()
        process.wait(timeout=30)
