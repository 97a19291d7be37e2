"""``agent-wait inbox``: the api's inbox page on 127.0.0.1, its calls signed with your credentials.

A browser cannot sign SigV4, so against a deployed ``auth=iam`` api this small server stands in
front of it: it fetches the page from the api (``GET /inbox``), answers ``GET /inbox/config``
itself (who is answering), and forwards every api call the page makes to the api, signed the way
the CLI signs (``agent_wait_cli.client.ApiClient``: SigV4 with your AWS credentials, ``--jwt``,
or ``--hmac-key``). Only this machine can reach it, and only the page itself may call it: a request
carrying another site's ``Origin``, or addressed to another host name, is refused (no other web
page can make it answer questions with your credentials).
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from agent_wait_cli.client import ApiError, UsageError, is_loopback

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import TextIO

    from agent_wait_cli.client import ApiClient

# The api routes the page calls; anything else is not forwarded.
FORWARDED = ("/questions", "/threads/", "/inbox")
# Request headers passed on to the api, and response headers passed back to the page.
REQUEST_HEADERS = ("If-Match", "Content-Type", "Accept")
RESPONSE_HEADERS = ("Content-Type", "ETag", "Allow", "Cache-Control", "Content-Security-Policy")
MAX_BODY = 1024 * 1024


def caller_identity(client: ApiClient) -> str | None:
    """Who the forwarded calls answer as: the principal given, or the AWS caller's ARN."""
    if client.principal:
        return client.principal
    if client.jwt or client.hmac_key or is_loopback(client.base_url):
        return None
    try:
        import botocore.session

        session = botocore.session.Session()
        region = client.region or session.get_config_variable("region") or "us-east-1"
        sts: Any = session.create_client("sts", region_name=region)
        return str(sts.get_caller_identity()["Arn"])
    except Exception:  # noqa: BLE001 - only a display name; the api records the real responder
        return None


class InboxProxy:
    """The server: ``start()``, then ``url``; ``stop()`` when done.

    Examples
    --------
    >>> api = "https://abc.execute-api.eu-west-1.amazonaws.com/prod"
    >>> proxy = InboxProxy(ApiClient(api), port=8788)  # doctest: +SKIP
    >>> proxy.start(); print(proxy.url)  # doctest: +SKIP
    http://127.0.0.1:8788/inbox
    """

    def __init__(self, client: ApiClient, *, port: int = 0, principal: str | None = None) -> None:
        self.client = client
        self.principal = principal
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.origin}/inbox"

    def start(self) -> None:
        self._thread = threading.Thread(target=self.server.serve_forever, name="inbox-proxy", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def allowed(self, host: str | None, origin: str | None) -> bool:
        """Only requests addressed to this server, from its own page (or with no ``Origin``)."""
        return host in {f"127.0.0.1:{self.port}", f"localhost:{self.port}"} and origin in {
            None,
            self.origin,
            f"http://localhost:{self.port}",
        }

    def forward(
        self, method: str, target: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        """Send one call of the page to the api, signed; the api's status, headers and body."""
        path, _, query = target.partition("?")
        if path == "/inbox/config" and method == "GET":
            config = {"auth": "proxy", "principal": self.principal} if self.principal else {"auth": "proxy"}
            return (
                200,
                {"Content-Type": "application/json", "Cache-Control": "no-store"},
                json.dumps(config).encode(),
            )
        if not path.startswith(FORWARDED):
            return _error(404, "not_found", f"{path} is not an api route the inbox calls")
        url = self.client.url_for(self.client.route_for(method, path))
        if query:
            url += "?" + query
        signed = self.client.headers_for(method, url, body, headers)
        request = urllib.request.Request(url, data=body or None, method=method, headers=signed)
        try:
            with self.client.opener(request, self.client.timeout) as raw:
                return raw.status, _pick(raw.headers.items()), raw.read()
        except urllib.error.HTTPError as exc:
            return exc.code, _pick(exc.headers.items()), exc.read()
        except (urllib.error.URLError, OSError) as exc:
            return _error(502, "api_unreachable", f"cannot reach {self.client.base_url}: {exc}")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                if not proxy.allowed(self.headers.get("Host"), self.headers.get("Origin")):
                    self._send(*_error(403, "forbidden", "only the inbox page on this machine may call it"))
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    self._send(*_error(413, "payload_too_large", "the body is too large"))
                    return
                body = self.rfile.read(length) if length else b""
                headers = {k: v for k in REQUEST_HEADERS if (v := self.headers.get(k)) is not None}
                try:
                    self._send(*proxy.forward(self.command, self.path, body, headers))
                except UsageError as exc:
                    self._send(*_error(401, "no_credentials", str(exc)))

            def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _serve  # noqa: N815 - http.server's naming

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
                return

        return Handler


def _pick(items: Any) -> dict[str, str]:
    wanted = {name.lower(): name for name in RESPONSE_HEADERS}
    return {wanted[k.lower()]: v for k, v in items if k.lower() in wanted}


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, str], bytes]:
    body = json.dumps({"error": code, "message": message}).encode()
    return status, {"Content-Type": "application/json"}, body


def run_inbox(
    args: argparse.Namespace, client: ApiClient, out: TextIO, wait: Callable[[], None] | None = None
) -> int:
    """Serve the inbox until interrupted; print ``inbox: <url>`` once it serves."""
    try:
        # Fails early (exit 2 or 3) on missing credentials or an api that cannot be reached.
        client.request("GET", "/inbox/config")
    except ApiError:
        pass  # the api answers: the page shows any refusal itself
    proxy = InboxProxy(client, port=args.port, principal=caller_identity(client))
    proxy.start()
    out.write(f"inbox: {proxy.url}\n")
    out.write(f"forwarding to: {client.base_url}\n")
    out.flush()
    try:
        if wait is not None:
            wait()
        else:
            threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
    return 0
