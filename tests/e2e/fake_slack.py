"""A small stand-in for Slack's Web API on 127.0.0.1: records calls, serves response URLs.

``POST /api/<method>`` (``chat.postMessage``, ``views.open``, ...) is recorded with its bearer token
and answered the way Slack answers (``{"ok": true, "channel", "ts"}``); ``POST /response/<id>``
plays an interaction's ``response_url`` and is recorded too.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Recorded:
    path: str
    token: str | None
    body: dict[str, Any]


@dataclass
class FakeSlack:
    calls: list[Recorded] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                auth = self.headers.get("Authorization") or ""
                token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
                with fake._lock:
                    fake.calls.append(Recorded(self.path, token, body))
                    ts = f"1800000000.{len(fake.calls):06d}"
                answer: dict[str, Any] = {"ok": True}
                if self.path == "/api/chat.postMessage":
                    answer |= {"channel": body.get("channel"), "ts": ts}
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-slack", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def recorded(self, path: str) -> list[Recorded]:
        with self._lock:
            return [call for call in self.calls if call.path == path]

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
