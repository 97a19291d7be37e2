"""GET /inbox and GET /inbox/config: one self-contained page, and how it signs people in."""

from __future__ import annotations

import base64
import hashlib
import re
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any

from service_events import body_of, get_event, header

from wait_service.http.inbox_page import InboxSignIn, content_security_policy, page_html

if TYPE_CHECKING:
    from collections.abc import Callable

    from service_events import LambdaContext

    from wait_service.http.api import WaitApi

    Call = Callable[[dict[str, Any]], dict[str, Any]]

LOCAL = {"sourceIp": "127.0.0.1"}
DEPLOYED = {"sourceIp": "203.0.113.7", "userArn": "arn:aws:iam::123456789012:user/ann"}


class Resources(HTMLParser):
    """Every URL the page would load by itself (src, href of a stylesheet, ...)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.ids: list[str] = []
        self.labels_for: set[str] = set()
        self.inputs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for name in ("src", "srcset", "data"):
            if found.get(name):
                self.urls.append(str(found[name]))
        if tag == "link" and found.get("href"):
            self.urls.append(str(found["href"]))
        if found.get("id"):
            self.ids.append(str(found["id"]))
        if tag == "label" and found.get("for"):
            self.labels_for.add(str(found["for"]))
        if tag in {"input", "select", "textarea"}:
            self.inputs.append(str(found.get("id")))


def test_the_page_is_html_with_its_own_script_and_style_only(call: Call) -> None:
    response = call(get_event("/inbox", "/inbox", identity=LOCAL))
    assert response["statusCode"] == 200
    assert header(response, "Content-Type") == "text/html; charset=utf-8"
    html = response["body"]
    assert html == page_html()
    parser = Resources()
    parser.feed(html)
    # Nothing loaded from anywhere: no src, no stylesheet link, no URL in the CSS.
    assert parser.urls == []
    [style] = re.findall(r"<style>(.*?)</style>", html, re.S)
    assert "url(" not in style and "@import" not in style
    # The only other host the script may talk to is the user pool's hosted UI (auth=jwt).
    assert re.findall(r"https?://[^\s\"']*", html) == ["https://"]
    # Every static control is labelled.
    assert set(parser.inputs) <= parser.labels_for
    policy = header(response, "Content-Security-Policy") or ""
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert header(response, "Cache-Control") == "no-store"


def test_the_policy_allows_exactly_the_inline_script_by_its_hash() -> None:
    html = page_html()
    [script] = re.findall(r"<script>(.*?)</script>", html, re.S)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in content_security_policy()
    # A changed script is not the one allowed.
    assert f"'sha256-{digest}'" not in content_security_policy(html="<script>evil()</script>")


def test_config_is_local_from_this_machine_and_iam_from_elsewhere(call: Call) -> None:
    local = call(get_event("/inbox/config", "/inbox/config", identity=LOCAL))
    assert body_of(local) == {"auth": "local"}
    deployed = call(get_event("/inbox/config", "/inbox/config", identity=DEPLOYED))
    assert body_of(deployed) == {"auth": "iam"}


def test_config_with_a_user_pool_client_signs_in_with_pkce(api: WaitApi, context: LambdaContext) -> None:
    api.inbox_sign_in = InboxSignIn("client-1", "https://agent-wait.auth.eu-west-1.amazoncognito.com/")
    config = body_of(api.resolve(get_event("/inbox/config", "/inbox/config", identity=DEPLOYED), context))
    assert config == {
        "auth": "jwt",
        "client_id": "client-1",
        "domain": "agent-wait.auth.eu-west-1.amazoncognito.com",
        "origin": "https://agent-wait.auth.eu-west-1.amazoncognito.com",
        "scope": "openid",
        "token": "id",
    }
    page = api.resolve(get_event("/inbox", "/inbox", identity=DEPLOYED), context)
    # The page may call the hosted UI's token endpoint, and nothing else outside this api.
    assert "connect-src 'self' https://agent-wait.auth.eu-west-1.amazoncognito.com;" in (
        header(page, "Content-Security-Policy") or ""
    )
    api.inbox_sign_in = InboxSignIn("client-1", "auth.example.com", audience="agent-wait/answer")
    config = body_of(api.resolve(get_event("/inbox/config", "/inbox/config", identity=DEPLOYED), context))
    assert (config["scope"], config["token"]) == ("openid agent-wait/answer", "access")


def test_the_page_is_not_in_the_openapi_document(call: Call) -> None:
    document = body_of(call(get_event("/openapi.json", "/openapi.json")))
    assert not [path for path in document["paths"] if path.startswith("/inbox")]


def test_other_methods_on_the_page_are_405(call: Call) -> None:
    event = get_event("/inbox", "/inbox", identity=LOCAL, method="POST")
    event["body"] = "{}"
    response = call(event)
    assert response["statusCode"] == 405
    assert header(response, "Allow") == "GET"
