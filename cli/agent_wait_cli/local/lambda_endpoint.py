"""Lambda's ``Invoke`` API on 127.0.0.1 for the functions the local stack runs in its own process.

Deployed, an operator tool reaches a function with ``lambda:InvokeFunction``: ``agent-wait dlq
redrive`` hands a failed ledger-stream batch back to the dispatcher that way, synchronously, and
keeps the DLQ message when the function fails again. The local stack's functions are Python
callables inside ``agent-wait local``, which moto cannot run without Docker, so this endpoint serves
the same REST call (``POST /2015-03-31/functions/{FunctionName}/invocations``, as boto3's ``lambda``
client sends it) and calls the function in process. Another process then uses the deployed code
path unchanged: a boto3 ``lambda`` client whose ``endpoint_url`` is this endpoint.

What it answers, as Lambda does:

- ``RequestResponse`` (the default): 200 with the function's JSON result; a function that raises
  gives 200 with ``X-Amz-Function-Error: Unhandled`` and ``{"errorType", "errorMessage"}``;
- an unknown function: 404 ``ResourceNotFoundException``; a body that is not JSON: 400
  ``InvalidRequestContentException``;
- ``Event`` and ``DryRun`` invocations are not served (400 ``InvalidParameterValueException``):
  nothing here needs them, and Lambda's own retries and destinations for ``Event`` are not played.

Like the gateway, it binds 127.0.0.1 only and checks no credentials: the local stack is not a
security boundary.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from agent_wait_cli.local.serving import BackgroundServer

logger = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any], Any], Any]
# boto3's path for Invoke; the name may also be given as an ARN or a partial ARN.
_INVOKE_PATH = re.compile(r"^/2015-03-31/functions/(?P<name>[^/]+)/invocations$")
# A body larger than Lambda's synchronous payload quota is refused before it is read.
MAX_PAYLOAD_BYTES = 6 * 1024 * 1024


def function_name(reference: str) -> str:
    """The function's name in a name, an ARN or a partial ARN (a ``:qualifier`` dropped).

    Examples
    --------
    >>> function_name("agent-wait-dispatcher")
    'agent-wait-dispatcher'
    >>> function_name("arn:aws:lambda:us-east-1:123456789012:function:agent-wait-dispatcher:$LATEST")
    'agent-wait-dispatcher'
    """
    if ":function:" in reference:
        reference = reference.split(":function:", 1)[1]
    return reference.split(":", 1)[0]


class LambdaEndpoint(BackgroundServer):
    """Serve Lambda's ``Invoke`` for ``functions`` (name → handler, context factory) on 127.0.0.1.

    Examples
    --------
    >>> endpoint = LambdaEndpoint({"echo": (lambda event, ctx: event, lambda: None)})
    >>> endpoint.invoke("echo", b'{"a": 1}', "RequestResponse")
    (200, {'X-Amz-Executed-Version': '$LATEST'}, b'{"a": 1}')
    """

    def __init__(
        self,
        functions: Mapping[str, tuple[Handler, Callable[[], Any]]],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(host, port, thread_name="local-lambda")
        self._functions = dict(functions)

    def invoke(self, reference: str, body: bytes, invocation_type: str) -> tuple[int, dict[str, str], bytes]:
        """One ``Invoke`` call: status, headers and body as Lambda answers them (no sockets)."""
        name = function_name(reference)
        if name not in self._functions:
            known = ", ".join(sorted(self._functions))
            message = f"Function not found: {name} (this stack runs {known})"
            return _error(404, "ResourceNotFoundException", message)
        if invocation_type != "RequestResponse":
            return _error(
                400,
                "InvalidParameterValueException",
                f"X-Amz-Invocation-Type {invocation_type!r}: the local stack serves RequestResponse only",
            )
        try:
            event = json.loads(body) if body.strip() else {}
        except ValueError as exc:
            message = f"Could not parse request body into json: {exc}"
            return _error(400, "InvalidRequestContentException", message)
        handler, context_factory = self._functions[name]
        headers = {"X-Amz-Executed-Version": "$LATEST"}
        try:
            result = handler(event, context_factory())
        except Exception as exc:
            logger.exception("%s raised on a direct invocation", name)
            payload = {"errorType": type(exc).__name__, "errorMessage": str(exc), "stackTrace": []}
            return 200, headers | {"X-Amz-Function-Error": "Unhandled"}, json.dumps(payload).encode()
        return 200, headers, json.dumps(result).encode()

    def _make_server(self) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer((self._host, self._port), self._request_handler())
        server.daemon_threads = True
        return server

    def _request_handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class _RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "agent-wait-local-lambda"

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                match = _INVOKE_PATH.match(urlsplit(self.path).path)
                length_header = self.headers.get("Content-Length") or "0"
                if not length_header.isdigit():
                    self.close_connection = True
                    self._send(*_error(400, "InvalidRequestContentException", "Content-Length: not a number"))
                    return
                length = int(length_header)
                if length > MAX_PAYLOAD_BYTES:
                    self.close_connection = True
                    self._send(*_error(413, "RequestTooLargeException", "Request must be smaller than 6 MB"))
                    return
                body = self.rfile.read(length) if length else b""
                if match is None:
                    self._send(*_error(404, "UnknownOperationException", f"no operation at {self.path}"))
                    return
                invocation_type = self.headers.get("X-Amz-Invocation-Type") or "RequestResponse"
                self._send(*endpoint.invoke(unquote(match["name"]), body, invocation_type))

            def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        return _RequestHandler


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, str], bytes]:
    """Lambda's service error: the type in ``X-Amzn-ErrorType`` and the body, as botocore reads it."""
    body = json.dumps({"Type": "User", "message": message}).encode()
    return status, {"X-Amzn-ErrorType": code}, body
