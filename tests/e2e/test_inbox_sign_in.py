"""The inbox page's sign-in (``auth=jwt``) in headless Chromium, against a hosted UI stand-in.

The stand-in plays the user pool's hosted UI on 127.0.0.1: ``/oauth2/authorize`` sends the browser
back with a code, ``/oauth2/token`` gives tokens only for the verifier whose S256 challenge came with
that code (PKCE). The page is served exactly as the api serves it (same HTML, same CSP); the api's
``/questions`` records the ``Authorization`` header it gets.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import pytest
from browser_support import launch, require_chromium, text_of, until
from selenium.webdriver.common.by import By

from wait_service.http.inbox_page import HTML, InboxSignIn, page_config, page_headers, page_html

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

pytestmark = pytest.mark.e2e

CLIENT_ID = "inbox-client-1"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def fake_jwt(claims: dict[str, Any]) -> str:
    header = b64url(json.dumps({"alg": "none"}).encode())
    return f"{header}.{b64url(json.dumps(claims).encode())}.sig"


class Server:
    """A ThreadingHTTPServer on a free 127.0.0.1 port answering with ``handle``."""

    def __init__(
        self, handle: Callable[[BaseHTTPRequestHandler, str, bytes], tuple[int, dict[str, str], bytes]]
    ):
        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                status, headers, body = handle(self, self.command, self.rfile.read(length) if length else b"")
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _serve  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def servers() -> Iterator[tuple[Server, Server, dict[str, Any]]]:
    require_chromium()
    seen: dict[str, Any] = {"authorization": [], "challenges": {}}
    id_token = fake_jwt({"sub": "u-1", "email": "ann@example.com", "exp": int(time.time()) + 3600})

    def hosted_ui(
        request: BaseHTTPRequestHandler, method: str, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        url = urllib.parse.urlsplit(request.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/oauth2/authorize":
            assert (query["response_type"], query["client_id"]) == ("code", CLIENT_ID)
            assert query["code_challenge_method"] == "S256"
            seen["challenges"]["code-1"] = (query["code_challenge"], query["redirect_uri"])
            back = (
                query["redirect_uri"]
                + "?"
                + urllib.parse.urlencode({"code": "code-1", "state": query["state"]})
            )
            return 302, {"Location": back}, b""
        if url.path == "/oauth2/token" and method == "POST":
            form = dict(urllib.parse.parse_qsl(body.decode()))
            challenge, redirect_uri = seen["challenges"].pop(form.get("code"), (None, None))
            verifier = form.get("code_verifier", "")
            ok = (
                challenge == b64url(hashlib.sha256(verifier.encode()).digest())
                and form.get("grant_type") == "authorization_code"
                and form.get("client_id") == CLIENT_ID
                and form.get("redirect_uri") == redirect_uri
            )
            tokens = {"id_token": id_token, "access_token": fake_jwt({"sub": "u-1"}), "token_type": "Bearer"}
            cors = {"Access-Control-Allow-Origin": "*", "Content-Type": "application/json"}
            return (
                (200, cors, json.dumps(tokens).encode()) if ok else (400, cors, b'{"error":"invalid_grant"}')
            )
        return 404, {}, b""

    idp = Server(hosted_ui)
    sign_in = InboxSignIn(CLIENT_ID, idp.origin)

    def api(request: BaseHTTPRequestHandler, method: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        path = urllib.parse.urlsplit(request.path).path
        if path == "/inbox":
            return 200, {"Content-Type": HTML, **page_headers(sign_in)}, page_html().encode()
        if path == "/inbox/config":
            return (
                200,
                {"Content-Type": "application/json"},
                json.dumps(page_config(sign_in, local=False)).encode(),
            )
        if path == "/questions":
            seen["authorization"].append(request.headers.get("Authorization"))
            return 200, {"Content-Type": "application/json"}, b'{"items": [], "next": null}'
        return 404, {}, b""

    site = Server(api)
    seen["id_token"] = id_token
    try:
        yield site, idp, seen
    finally:
        site.stop()
        idp.stop()


def test_signing_in_with_pkce_then_calling_the_api_with_the_token(
    servers: tuple[Server, Server, dict[str, Any]], tmp_path: Any
) -> None:
    site, _, seen = servers
    driver = launch(tmp_path / "profile")
    try:
        driver.get(f"{site.origin}/inbox?refresh=0")
        until(driver, lambda d: "Sign in to see" in text_of(d, "list-state"), "the sign-in prompt")
        assert seen["authorization"] == []  # nothing is asked of the api before signing in
        [button] = driver.find_elements(By.CSS_SELECTOR, "#who button")
        assert button.text == "Sign in"
        button.click()
        signed_in = until(driver, lambda d: text_of(d, "signed-in"), "who is signed in")
        assert signed_in == "Signed in as ann@example.com"
        until(driver, lambda d: seen["authorization"], "a call to the api")
        assert seen["authorization"][0] == seen["id_token"]
        # The code and state left the address bar; the code was spent.
        assert driver.current_url == f"{site.origin}/inbox"
        assert seen["challenges"] == {}
    finally:
        driver.quit()
