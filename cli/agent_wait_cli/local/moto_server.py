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

That deep copy held each table's whole stream too, so every transaction cost more than the one
before (570 ms on a ledger of 1,000 items and 4,000 stream records, 34 ms without them):
:func:`back_up_transactions_without_their_stream` leaves the stream out of it.
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


def back_up_transactions_without_their_stream() -> None:
    """Make moto's ``TransactWriteItems`` back up its tables without their streams (once per process).

    moto backs up each table a transaction names (a deep copy) to put it back if the transaction is
    cancelled. The copy holds the table's stream too, every record since the table was made, so
    each transaction cost more than the one before: a local stack slowed as it aged (7.7 s for its
    first 20 threads parked and resumed, 35 s for its fourth 20), and a long test spent most of
    its time there. Here the backup leaves the stream out and a cancelled transaction cuts the
    stream back to where it was: the same table and the same stream afterwards as with moto's own
    backup. The local stack's server applies it when it starts; the tests, for ``mock_aws`` too.
    """
    import copy
    from types import SimpleNamespace

    import moto.dynamodb.models as models
    from moto.dynamodb.models.table import Table

    transact = models.DynamoDBBackend.transact_write_items
    if getattr(transact, "backs_up_without_the_stream", False):
        return

    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        if isinstance(value, Table) and value.stream_shard is not None:
            memo = {**(memo or {}), id(value.stream_shard): value.stream_shard}
        return copy.deepcopy(value, memo)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        names = {next(iter(item.values())).get("TableName") for item in transact_items}
        streams = {
            name: (table, table.stream_shard, len(table.stream_shard.items))
            for name, table in self.tables.items()
            if name in names and table.stream_shard is not None
        }
        try:
            transact(self, transact_items)
        except Exception:
            for name, (table, shard, length) in streams.items():
                backup = self.tables.get(name)
                if backup is not table:  # moto put its backup back: the stream goes back too
                    del shard.items[length:]
                    shard.table = backup
            raise

    transact_write_items.backs_up_without_the_stream = True  # type: ignore[attr-defined]
    models.copy = SimpleNamespace(deepcopy=deepcopy)  # type: ignore[assignment]
    models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


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
        back_up_transactions_without_their_stream()
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
