"""An HTTP server of the local stack on 127.0.0.1, served from a background thread.

The api's gateway, the Lambda endpoint and moto all bind a port first (0 picks a free one, whose
number is known at once) and serve on a daemon thread until stopped; this is that part, once.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import socketserver


class BackgroundServer:
    """Bind on :meth:`bind`, serve on :meth:`start`, and stop; subclasses build the server.

    Examples
    --------
    >>> class Hello(BackgroundServer):
    ...     def _make_server(self):
    ...         from http.server import HTTPServer, BaseHTTPRequestHandler
    ...         return HTTPServer((self._host, self._port), BaseHTTPRequestHandler)
    >>> server = Hello("127.0.0.1", 0, thread_name="hello")
    >>> server.start(); server.url.startswith("http://127.0.0.1:"); server.stop()
    True
    """

    def __init__(self, host: str, port: int, *, thread_name: str) -> None:
        self._host = host
        self._port = port
        self._thread_name = thread_name
        self._server: socketserver.BaseServer | None = None
        self._thread: threading.Thread | None = None

    def _make_server(self) -> socketserver.BaseServer:
        raise NotImplementedError

    def bind(self) -> int:
        """Bind the port (so its number is known) without serving yet; returns the port."""
        if self._server is None:
            self._server = self._make_server()
        return self.port

    def start(self) -> None:
        """Bind if needed and serve on a background thread."""
        self.bind()
        server = self._server
        if server is None:  # bind() just set it; this keeps mypy and python -O honest
            raise RuntimeError(f"{self._thread_name} failed to bind")
        self._thread = threading.Thread(target=server.serve_forever, name=self._thread_name, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"start() {self._thread_name} first")
        address = self._server.server_address
        assert isinstance(address, tuple)
        return int(address[1])

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    def stop(self) -> None:
        if self._server is not None:
            if self._thread is not None:
                self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None
