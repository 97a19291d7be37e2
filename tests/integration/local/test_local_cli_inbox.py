"""``agent-wait inbox``: what it forwards, how it signs, what it refuses (a fake api, no network)."""

from __future__ import annotations

import io
import json
import urllib.error
from email.message import Message
from typing import Any

import pytest

from agent_wait_cli import main
from agent_wait_cli.client import ApiClient
from agent_wait_cli.commands import build_parser
from agent_wait_cli.inbox import InboxProxy

DEPLOYED = "https://abc.execute-api.eu-west-1.amazonaws.com/prod"


class Raw:
    def __init__(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.status = status
        self.headers = Message()
        for key, value in headers.items():
            self.headers[key] = value
        self._body = body

    def read(self) -> bytes:
        return self._body

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class Recorder:
    def __init__(self, status: int = 200, body: Any = None, headers: dict[str, str] | None = None) -> None:
        self.status, self.body, self.headers = status, body, headers or {"Content-Type": "application/json"}
        self.requests: list[Any] = []

    def __call__(self, request: Any, timeout: float) -> Raw:
        self.requests.append(request)
        data = json.dumps(self.body).encode()
        if self.status >= 400:
            raise urllib.error.HTTPError(request.full_url, self.status, "err", Message(), io.BytesIO(data))
        return Raw(self.status, data, self.headers)


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")


def proxy_for(opener: Recorder) -> InboxProxy:
    proxy = InboxProxy(ApiClient(DEPLOYED, opener=opener), principal="arn:aws:iam::1:user/ann")
    proxy.server.server_close()  # never served: forward() is called directly
    return proxy


def test_calls_are_forwarded_signed_with_sigv4_and_the_tag_kept(credentials: None) -> None:
    api = Recorder(202, {"question_id": "q-1", "status": "answered"}, {"ETag": '"x"', "Set-Cookie": "no"})
    body = json.dumps({"answer": {"action": "approve"}}).encode()
    headers = {"If-Match": '"abc"', "Content-Type": "application/json"}

    status, sent_back, raw = proxy_for(api).forward("POST", "/questions/q-1/reply?x=1", body, headers)

    assert (status, json.loads(raw)) == (202, {"question_id": "q-1", "status": "answered"})
    assert sent_back == {"ETag": '"x"'}  # only the headers the page needs
    [request] = api.requests
    assert request.full_url == DEPLOYED + "/questions/q-1/reply?x=1"
    assert request.get_header("If-match") == '"abc"'
    assert request.get_header("Authorization").startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")


def test_api_refusals_pass_through_as_they_are(credentials: None) -> None:
    api = Recorder(409, {"error": "answer_conflict", "standing_answer": {"action": "approve"}})
    status, _, raw = proxy_for(api).forward("POST", "/questions/q-1/reply", b"{}", {})
    assert (status, json.loads(raw)["standing_answer"]) == (409, {"action": "approve"})


def test_config_is_answered_here_and_other_paths_are_not_forwarded() -> None:
    api = Recorder()
    proxy = proxy_for(api)
    status, _, raw = proxy.forward("GET", "/inbox/config", b"", {})
    assert (status, json.loads(raw)) == (200, {"auth": "proxy", "principal": "arn:aws:iam::1:user/ann"})
    assert proxy.forward("GET", "/openapi.json", b"", {})[0] == 404
    assert proxy.forward("POST", "/signed/questions/q-1/reply", b"", {})[0] == 404
    assert api.requests == []


def test_only_its_own_page_on_this_machine_may_call_it() -> None:
    proxy = proxy_for(Recorder())
    own = f"127.0.0.1:{proxy.port}"
    assert proxy.allowed(own, None)
    assert proxy.allowed(own, proxy.origin)
    assert not proxy.allowed(own, "https://evil.example")
    assert not proxy.allowed(f"evil.example:{proxy.port}", None)  # DNS rebinding


def test_the_command_and_its_port() -> None:
    args = build_parser({}).parse_args(["inbox", "--api", DEPLOYED])
    assert (args.command, args.port, args.api) == ("inbox", 8788, DEPLOYED)


def test_an_unreachable_api_exits_3_before_serving() -> None:
    out, err = io.StringIO(), io.StringIO()

    def refused(request: Any, timeout: float) -> Any:
        raise urllib.error.URLError("connection refused")

    code = main(["inbox", "--api", "http://127.0.0.1:9", "--port", "0"], out=out, err=err, opener=refused)
    assert code == 3
    assert "cannot reach" in err.getvalue() and "inbox:" not in out.getvalue()
