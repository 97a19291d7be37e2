"""The inbox page: one self-contained HTML file (its CSS and JS inline) that answers through the api.

``GET /inbox`` returns the page; ``GET /inbox/config`` tells it how people sign in:

- ``local``: the request came from this machine (the local stack); the page sends the name the
  person types as ``X-Wait-Principal``;
- ``jwt``: the deployment was given a user pool app client (``inbox_client_id``) and its hosted UI
  domain (``inbox_domain``); the page signs in with the authorization code flow and PKCE and sends
  the token as ``Authorization``;
- ``iam``: neither; a browser cannot sign SigV4, so people use ``agent-wait inbox --api <ApiUrl>``,
  which serves this page on 127.0.0.1 and signs its calls.

The page loads nothing from another host: its Content-Security-Policy allows only its own inline
script and style (by hash), calls to this api, and (``jwt``) the hosted UI's token endpoint.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

PAGE_FILE = Path(__file__).parent / "static" / "inbox.html"
HTML = "text/html; charset=utf-8"
_INLINE = {tag: re.compile(rf"<{tag}>(.*?)</{tag}>", re.DOTALL) for tag in ("script", "style")}


@dataclass(frozen=True)
class InboxSignIn:
    """The user pool app client the page signs people in with (``auth=jwt``).

    ``audience`` is the deployment's ``jwt_audience``: when the api's authorizer checks that scope,
    the page requests it and sends the access token; without it the authorizer takes ID tokens.

    Examples
    --------
    >>> InboxSignIn("abc", "https://auth.example.com/", audience="api/answer").scope
    'openid api/answer'
    >>> InboxSignIn("abc", "auth.example.com").token, InboxSignIn("abc", "auth.example.com").host
    ('id', 'auth.example.com')
    """

    client_id: str
    domain: str
    audience: str | None = None

    @property
    def host(self) -> str:
        return self.origin.split("://", 1)[1]

    @property
    def origin(self) -> str:
        """``https://<domain>``; a stand-in on this machine (``http://127.0.0.1:<port>``) keeps http.

        Examples
        --------
        >>> InboxSignIn("abc", "agent-wait.auth.eu-west-1.amazoncognito.com").origin
        'https://agent-wait.auth.eu-west-1.amazoncognito.com'
        >>> InboxSignIn("abc", "http://127.0.0.1:9000/").origin
        'http://127.0.0.1:9000'
        >>> InboxSignIn("abc", "http://auth.example.com").origin
        'https://auth.example.com'
        """
        domain = self.domain.strip().rstrip("/")
        if domain.startswith(("http://127.0.0.1:", "http://localhost:")):
            return domain
        return "https://" + domain.split("://", 1)[-1]

    @property
    def scope(self) -> str:
        return f"openid {self.audience}" if self.audience else "openid"

    @property
    def token(self) -> Literal["access", "id"]:
        return "access" if self.audience else "id"


@cache
def page_html() -> str:
    """The page, read once per process."""
    return PAGE_FILE.read_text(encoding="utf-8")


@cache
def _hashes(tag: str, html: str) -> str:
    return " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
        for body in _INLINE[tag].findall(html)
    )


def content_security_policy(sign_in: InboxSignIn | None = None, html: str | None = None) -> str:
    """The page's CSP: its own inline script and style by hash, this origin, and the hosted UI.

    Examples
    --------
    >>> policy = content_security_policy(html="<script>go()</script><style>p{}</style>")
    >>> "script-src 'sha256-" in policy and "connect-src 'self'" in policy
    True
    """
    html = page_html() if html is None else html
    connect = "'self'" + (f" {sign_in.origin}" if sign_in else "")
    return "; ".join(
        (
            "default-src 'none'",
            f"script-src {_hashes('script', html)}",
            f"style-src {_hashes('style', html)}",
            f"connect-src {connect}",
            "img-src 'self' data:",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        )
    )


def page_headers(sign_in: InboxSignIn | None) -> dict[str, str]:
    return {
        "Cache-Control": "no-store",
        "Content-Security-Policy": content_security_policy(sign_in),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }


def page_config(sign_in: InboxSignIn | None, *, local: bool) -> dict[str, str]:
    """What ``GET /inbox/config`` returns: how the page signs people in.

    Examples
    --------
    >>> page_config(None, local=True)
    {'auth': 'local'}
    >>> page_config(InboxSignIn("abc", "https://auth.example.com/"), local=False)["domain"]
    'auth.example.com'
    >>> page_config(None, local=False)
    {'auth': 'iam'}
    """
    if sign_in is not None:
        return {
            "auth": "jwt",
            "client_id": sign_in.client_id,
            "domain": sign_in.host,
            "origin": sign_in.origin,
            "scope": sign_in.scope,
            "token": sign_in.token,
        }
    return {"auth": "local" if local else "iam"}
