"""A small HTTP client for the agent-wait api: urllib, with the auth a deployment needs.

Auth, in order:

- ``jwt``: ``Authorization: Bearer <token>`` (a Cognito or OIDC authorizer in front of the api);
- ``hmac_key``: signed requests (``agent_wait.signing``), which the local gateway started with
  ``--hmac-key`` and the deployed api's ``/signed/...`` routes verify;
- otherwise, for an api that is not on loopback: SigV4 for service ``execute-api`` with botocore's
  standard credential chain (environment, profile, SSO, instance role, ...);
- ``principal``: ``X-Wait-Principal``, honoured by the local gateway only.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_wait.signing import signed_headers
from agent_wait_cli.local.gateway import header_value

# The deployed api's HMAC-verified write routes (no SigV4 or Cognito at the gateway) live under it.
SIGNED_PREFIX = "/signed"
LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}
EXECUTE_API_HOST = re.compile(r"\.execute-api\.(?P<region>[a-z0-9-]+)\.amazonaws\.com$")


class CliError(Exception):
    """An error the CLI reports and exits with ``exit_code``."""

    exit_code = 1


class ApiError(CliError):
    """The api answered 4xx or 5xx."""

    exit_code = 1

    def __init__(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = dict(headers or {})
        if isinstance(body, Mapping):
            self.code = str(body.get("error") or body.get("code") or "error")
            message = str(body.get("message") or body.get("Message") or body)
        else:
            self.code = "error"
            message = str(body or "")
        super().__init__(f"{status} {self.code}: {message}")


class ApiConnectionError(CliError):
    """The api could not be reached."""

    exit_code = 3


class UsageError(CliError):
    """The command line or configuration cannot work."""

    exit_code = 2


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: Any

    def header(self, name: str) -> str | None:
        return header_value(self.headers.items(), name)


def is_loopback(url: str) -> bool:
    """Whether ``url`` points at this machine.

    Examples
    --------
    >>> is_loopback("http://127.0.0.1:8787"), is_loopback("https://abc.execute-api.eu-west-1.amazonaws.com/prod")
    (True, False)
    """
    host = urllib.parse.urlsplit(url).hostname or ""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def aws_errors(service: str) -> Iterator[None]:
    """Turn what boto3 raises into one line for the person at the terminal.

    Missing credentials are a :class:`UsageError`; an endpoint that does not answer an
    :class:`ApiConnectionError` naming it (``service`` when botocore does not say); any other AWS
    refusal or client failure a :class:`CliError` with its code and message.
    """
    from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError, NoCredentialsError

    try:
        yield
    except NoCredentialsError:
        raise UsageError("no AWS credentials found; configure them (profile, SSO, environment)") from None
    except EndpointConnectionError as exc:
        raise ApiConnectionError(f"cannot reach {exc.kwargs.get('endpoint_url', service)}") from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise CliError(f"{error.get('Code', 'Error')}: {error.get('Message', exc)}") from None
    except BotoCoreError as exc:
        raise CliError(str(exc).splitlines()[0]) from None


def local_stack_clients(endpoint: str, region: str | None, *, flag: str = "--endpoint-url") -> dict[str, Any]:
    """boto3 client arguments for the local stack's moto at ``endpoint`` (its fake credentials).

    Raises :class:`UsageError` naming ``flag`` when ``endpoint`` is not on this machine: a real
    AWS endpoint must be reached with real credentials, never these.

    Examples
    --------
    >>> local_stack_clients("http://127.0.0.1:5000", None)["region_name"]
    'us-east-1'
    """
    if not is_loopback(endpoint):
        raise UsageError(f"{flag} {endpoint!r} is not on this machine: it is for the local stack")
    return {
        "endpoint_url": endpoint,
        "region_name": region or "us-east-1",
        "aws_access_key_id": "local",
        "aws_secret_access_key": "local",
    }


def region_from_url(url: str) -> str | None:
    """The region in an ``execute-api`` host name, if any.

    Examples
    --------
    >>> region_from_url("https://abc.execute-api.eu-west-1.amazonaws.com/prod")
    'eu-west-1'
    """
    match = EXECUTE_API_HOST.search(urllib.parse.urlsplit(url).hostname or "")
    return match.group("region") if match else None


def hmac_headers(
    key_id: str,
    secret: str,
    method: str,
    target: str,
    body: bytes,
    now: float,
    if_match: str | None = None,
) -> dict[str, str]:
    """Headers that sign a request (the scheme of ``agent_wait.signing``).

    Examples
    --------
    >>> sorted(hmac_headers("k1", "s", "GET", "/questions", b"", 1700000000))
    ['X-Wait-Key-Id', 'X-Wait-Request-Timestamp', 'X-Wait-Signature']
    """
    return signed_headers(key_id, secret, method, target, body, if_match=if_match, now=now)


Opener = Callable[[urllib.request.Request, float], Any]


def _default_opener(request: urllib.request.Request, timeout: float) -> Any:
    return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - the user's own api URL


def check_api_url(url: str) -> str:
    """``url`` if it is an http(s) URL; a :class:`UsageError` saying what to type otherwise.

    Examples
    --------
    >>> check_api_url("h:80")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agent_wait_cli.client.UsageError: --api 'h:80' has no scheme: use --api http://h:80 (or https://...
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        bare = url.split("://", 1)[-1]
        raise UsageError(
            f"--api {url!r} has no scheme: use --api http://{bare} (or https://... for a deployed api)"
            if "://" not in url
            else f"--api {url!r} is not an http(s) URL: use --api http://{bare} or https://{bare}"
        )
    return url


@dataclass
class ApiClient:
    """Call the agent-wait api.

    Examples
    --------
    >>> client = ApiClient("http://127.0.0.1:8787", principal="alice")
    >>> client.request("GET", "/questions", query={"status": "raised"}).body  # doctest: +SKIP
    {'items': [...], 'next': None}
    """

    base_url: str
    jwt: str | None = None
    principal: str | None = None
    hmac_key: tuple[str, str] | None = None
    region: str | None = None
    timeout: float = 30.0
    sigv4: bool | None = None  # None: sign when the api is not on loopback and no JWT is given
    opener: Opener = field(default=_default_opener)
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep

    def route_for(self, method: str, path: str) -> str:
        """The path to call: a deployed api takes HMAC-signed writes only under ``/signed``.

        Examples
        --------
        >>> ApiClient("https://abc.execute-api.eu-west-1.amazonaws.com/prod", hmac_key=("k", "s")).route_for(
        ...     "POST", "/questions/q1/reply")
        '/signed/questions/q1/reply'
        >>> ApiClient("http://127.0.0.1:8787", hmac_key=("k", "s")).route_for("POST", "/questions/q1/reply")
        '/questions/q1/reply'
        """
        if self.hmac_key is not None and method.upper() == "POST" and not is_loopback(self.base_url):
            return SIGNED_PREFIX + "/" + path.lstrip("/")
        return path

    def __post_init__(self) -> None:
        check_api_url(self.base_url)

    def url_for(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        base = self.base_url.rstrip("/")
        url = base + "/" + path.lstrip("/")
        params = {k: str(v) for k, v in (query or {}).items() if v is not None}
        if params:
            url += "?" + urllib.parse.urlencode(params)
        return url

    def headers_for(self, method: str, url: str, body: bytes, extra: Mapping[str, str]) -> dict[str, str]:
        """Every header the request carries, auth included (pure but for SigV4's credential lookup)."""
        headers = {"Accept": "application/json", "User-Agent": "agent-wait-cli"}
        if body:
            headers["Content-Type"] = "application/json"
        headers.update(extra)
        if self.principal:
            headers["X-Wait-Principal"] = self.principal
        if self.jwt:
            headers["Authorization"] = f"Bearer {self.jwt}"
        elif self.hmac_key is not None:
            parts = urllib.parse.urlsplit(url)
            base_path = urllib.parse.urlsplit(self.base_url).path.rstrip("/")
            path = (
                parts.path[len(base_path) :] if base_path and parts.path.startswith(base_path) else parts.path
            )
            target = path + (f"?{parts.query}" if parts.query else "")
            if_match = header_value(headers.items(), "If-Match")
            headers.update(hmac_headers(*self.hmac_key, method, target, body, self.clock(), if_match))
        elif self.sigv4 if self.sigv4 is not None else not is_loopback(self.base_url):
            headers = self._sigv4_headers(method, url, body, headers)
        return headers

    def _sigv4_headers(self, method: str, url: str, body: bytes, headers: dict[str, str]) -> dict[str, str]:
        try:
            import botocore.session
            from botocore.auth import SigV4Auth
            from botocore.awsrequest import AWSRequest
        except ImportError:
            raise UsageError(
                "signing requests for a deployed api needs botocore: "
                "pip install 'agent-wait[aws]', or pass --jwt"
            ) from None
        session = botocore.session.Session()
        credentials = session.get_credentials()
        if credentials is None:
            raise UsageError(
                "no AWS credentials found to sign the request (SigV4); configure them or pass --jwt"
            )
        region = self.region or region_from_url(self.base_url) or session.get_config_variable("region")
        if not region:
            raise UsageError("cannot tell the api's region; pass --region")
        request = AWSRequest(method=method, url=url, data=body, headers=headers)
        SigV4Auth(credentials.get_frozen_credentials(), "execute-api", region).add_auth(request)
        return {key: str(value) for key, value in request.headers.items()}

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """Send one request.

        Raises :class:`ApiError` on 4xx/5xx and :class:`ApiConnectionError` when unreachable.
        """
        url = self.url_for(self.route_for(method, path), query)
        data = b"" if body is None else json.dumps(body).encode()
        try:
            return self._send(method, url, data, headers or {})
        except ApiError as exc:
            if not (self.hmac_key is not None and exc.status == 401 and _error_code(exc.body) == "replayed"):
                raise
        # A signature covers a whole-second timestamp: the same request sent twice within one second
        # (by two commands, say) is signed identically, and the api refuses the second as a replay.
        # This is a new request, so it is signed anew in the next second, once.
        now = self.clock()
        self.sleep(math.floor(now) + 1 - now)
        return self._send(method, url, data, headers or {})

    def _send(self, method: str, url: str, data: bytes, headers: Mapping[str, str]) -> Response:
        all_headers = self.headers_for(method, url, data, headers)
        request = urllib.request.Request(url, data=data or None, method=method, headers=all_headers)
        try:
            with self.opener(request, self.timeout) as raw:
                return Response(raw.status, dict(raw.headers.items()), _decode(raw.read()))
        except urllib.error.HTTPError as exc:
            raise ApiError(exc.code, _decode(exc.read()), dict(exc.headers.items())) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiConnectionError(
                f"cannot reach {self.base_url}: {reason}{unreachable_hint(self.base_url)}"
            ) from None


def unreachable_hint(base_url: str) -> str:
    """What to do about an api that does not answer: on this machine, start the local stack.

    Examples
    --------
    >>> "agent-wait local" in unreachable_hint("http://127.0.0.1:8787")
    True
    >>> unreachable_hint("https://abc.execute-api.eu-west-1.amazonaws.com/prod")
    ''
    """
    if not is_loopback(base_url):
        return ""
    return (
        " (is the local stack running? start it with `agent-wait local` (`make local` in a clone),"
        " or give --api your deployed api's URL)"
    )


def _error_code(body: Any) -> str | None:
    return str(body.get("error")) if isinstance(body, dict) and body.get("error") is not None else None


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")
