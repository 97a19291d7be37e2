"""A moto server that serves one AWS request at a time.

moto's backends are not safe under concurrent requests (its FAQ says so): a race of conditional
writes on one DynamoDB key can have several winners. AWS guarantees one, and the receive path
relies on it ("the first answer stands"), so every request runs under one lock, as it would if
AWS serialized writes per item.

moto also keeps a reference to every model object it ever creates, for its dashboard (which the
local stack does not use), deep copies included: each ``TransactWriteItems`` deep-copies every table
it writes, to roll back, so a long-lived server's memory grew with the square of its writes (past
2.5 GB after 80 threads parked and resumed). The server forgets them after each request, as moto's
own reset does; the objects still in use stay where they are used.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agent_wait_cli.local.serving import BackgroundServer

try:
    from moto.core.model_instances import reset_model_data
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("the local stack needs moto: pip install 'agent-wait[local]'") from exc

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


@dataclass(frozen=True)
class Fault:
    """An error response AWS could give instead of serving a request (throttling, a 5xx).

    With ``applied`` the request is served first and only its response is replaced: the write
    happened, yet the caller sees an error, as a caller does that dies (or times out) right after
    its write reached AWS.
    """

    status: int
    body: bytes
    content_type: str = "application/x-amz-json-1.0"
    applied: bool = False


# Decides, from the request's headers (``X-Amz-Target``, ...) and body, whether to fail it.
FaultRule = Callable[[dict[str, Any], bytes], "Fault | None"]


class SerializedApp:
    """Wrap a WSGI app so that one request, body included, runs at a time.

    :attr:`fault` (``None`` by default) lets a test or a stress run make AWS fail chosen requests,
    the way throttling or an outage would, without touching the code under test.
    """

    def __init__(self, app: WSGIApp) -> None:
        self._app = app
        self._lock = threading.Lock()
        self.fault: FaultRule | None = None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self._lock:
            try:
                return self._serve(environ, start_response)
            finally:
                # What moto recorded of this request's objects for its dashboard (see the module).
                reset_model_data()

    def _serve(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        rule = self.fault
        if rule is not None:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length) if length else b""
            environ["wsgi.input"] = io.BytesIO(body)
            fault = rule(environ, body)
            if fault is not None:
                if fault.applied:
                    # Served and drained: the response that would have said so is lost.
                    list(self._app(environ, lambda *_args, **_kwargs: None))
                start_response(
                    f"{fault.status} Injected",
                    [("Content-Type", fault.content_type), ("Content-Length", str(len(fault.body)))],
                )
                return [fault.body]
        # Drain the response inside the lock: moto builds some bodies lazily.
        return list(self._app(environ, start_response))


class _QuietRequestHandler(WSGIRequestHandler):
    """werkzeug's handler without the access log line per AWS request."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return


class SerializedMotoServer(BackgroundServer):
    """moto server on 127.0.0.1, one request at a time.

    Parameters
    ----------
    host:
        Address to bind; loopback by default and by design.
    port:
        Port to bind; 0 picks a free one.
    log_requests:
        Keep werkzeug's access log (one stderr line per AWS request); the local stack turns it
        off so its event lines stay readable.

    Examples
    --------
    >>> server = SerializedMotoServer()
    >>> server.start()  # doctest: +SKIP
    >>> boto3.client("sqs", endpoint_url=server.endpoint)  # doctest: +SKIP
    >>> server.stop()  # doctest: +SKIP
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, log_requests: bool = True) -> None:
        super().__init__(host, port, thread_name="moto-server")
        self._log_requests = log_requests
        self._app: SerializedApp | None = None

    def inject(self, rule: FaultRule | None) -> None:
        """Fail every request ``rule`` returns a :class:`Fault` for; ``None`` stops injecting."""
        if self._app is None:
            raise RuntimeError("start() the server first")
        self._app.fault = rule

    def _make_server(self) -> BaseWSGIServer:
        app = self._app = SerializedApp(DomainDispatcherApplication(create_backend_app))
        handler = None if self._log_requests else _QuietRequestHandler
        return make_server(self._host, self._port, app, threaded=True, request_handler=handler)

    @property
    def endpoint(self) -> str:
        return self.url

    def __enter__(self) -> SerializedMotoServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
