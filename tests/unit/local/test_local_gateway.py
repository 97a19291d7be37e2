"""The local gateway's translation between HTTP and API Gateway REST proxy events (no sockets)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import pytest

from agent_wait.signing import signed_headers
from agent_wait_cli.local.gateway import (
    DEFAULT_PRINCIPAL,
    Exchange,
    Gateway,
    HttpRequest,
    HttpResponse,
    SignatureError,
    content_length,
    from_proxy_response,
    header_value,
    to_proxy_event,
    verify_signature,
)

NOW = 1_800_000_000.0


def test_event_carries_path_method_query_and_headers() -> None:
    request = HttpRequest(
        "get",
        "/questions?status=raised&thread_id=t-1&thread_id=t-2",
        [("Host", "127.0.0.1:8787"), ("X-Tag", "a"), ("X-Tag", "b")],
        source_ip="127.0.0.1",
    )

    event = to_proxy_event(request, principal="alice", request_id="req-1", now=NOW)

    assert event["resource"] == "/{proxy+}"
    assert event["path"] == "/questions"
    assert event["httpMethod"] == "GET"
    assert event["pathParameters"] == {"proxy": "questions"}
    assert event["queryStringParameters"] == {"status": "raised", "thread_id": "t-2"}
    assert event["multiValueQueryStringParameters"] == {"status": ["raised"], "thread_id": ["t-1", "t-2"]}
    assert event["headers"]["X-Tag"] == "b"
    assert event["multiValueHeaders"]["X-Tag"] == ["a", "b"]
    assert event["body"] is None
    assert event["isBase64Encoded"] is False
    context = event["requestContext"]
    assert context["stage"] == "local"
    assert context["requestId"] == "req-1"
    assert context["path"] == "/local/questions"
    assert context["requestTimeEpoch"] == int(NOW * 1000)
    assert context["identity"]["userArn"] == "alice"
    assert context["identity"]["sourceIp"] == "127.0.0.1"
    assert context["authorizer"] is None


def test_event_without_query_or_headers_has_nulls_like_api_gateway() -> None:
    event = to_proxy_event(HttpRequest("GET", "/", []))

    assert event["queryStringParameters"] is None
    assert event["multiValueQueryStringParameters"] is None
    assert event["headers"] is None
    assert event["pathParameters"] is None


def test_utf8_body_passes_as_text_and_binary_as_base64() -> None:
    text = to_proxy_event(HttpRequest("POST", "/x", [], body='{"a": "é"}'.encode()))
    binary = to_proxy_event(HttpRequest("POST", "/x", [], body=b"\xff\xfe\x00"))

    assert (text["body"], text["isBase64Encoded"]) == ('{"a": "é"}', False)
    assert binary["isBase64Encoded"] is True
    assert base64.b64decode(binary["body"]) == b"\xff\xfe\x00"


def test_authorizer_principal_goes_where_a_lambda_authorizer_puts_it() -> None:
    event = to_proxy_event(HttpRequest("GET", "/q", []), principal=None, authorizer_principal="key-1")

    assert event["requestContext"]["authorizer"] == {"principalId": "key-1"}
    assert event["requestContext"]["identity"]["userArn"] is None


def test_response_headers_body_and_base64_are_translated_back() -> None:
    response = from_proxy_response(
        {
            "statusCode": 202,
            "headers": {"Content-Type": "application/json", "ETag": '"d"'},
            "multiValueHeaders": {"Set-Cookie": ["a=1", "b=2"], "ETag": ['"d"']},
            "body": base64.b64encode(b"\x00\x01").decode(),
            "isBase64Encoded": True,
        }
    )

    assert response.status == 202
    assert response.body == b"\x00\x01"
    assert response.headers.count(("Set-Cookie", "a=1")) == 1
    assert [v for k, v in response.headers if k == "ETag"] == ['"d"']
    assert response.header("content-type") == "application/json"


def test_malformed_lambda_response_is_502() -> None:
    assert from_proxy_response({"body": "no status"}).status == 502


def _capture_handler(seen: list[dict[str, Any]], status: int = 200) -> Any:
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.append(event)
        return {"statusCode": status, "headers": {"Content-Type": "application/json"}, "body": "{}"}

    return handler


def test_principal_header_or_default_reaches_the_handler() -> None:
    seen: list[dict[str, Any]] = []
    gateway = Gateway(_capture_handler(seen))

    gateway.handle(HttpRequest("GET", "/q", [("X-Wait-Principal", "bob")]))
    gateway.handle(HttpRequest("GET", "/q", []))

    assert [e["requestContext"]["identity"]["userArn"] for e in seen] == ["bob", DEFAULT_PRINCIPAL]


def test_crashing_handler_gives_502_and_exchange_is_reported() -> None:
    exchanges: list[Exchange] = []

    def boom(event: dict[str, Any], context: Any) -> dict[str, Any]:
        raise RuntimeError("boom")

    gateway = Gateway(boom, on_exchange=exchanges.append)
    response = gateway.handle(HttpRequest("POST", "/q", [], body=b"{}"))

    assert response.status == 502
    assert json.loads(response.body)["error"] == "internal_error"
    assert len(exchanges) == 1 and exchanges[0].response.status == 502


def _signed(
    method: str,
    target: str,
    body: bytes,
    key: str = "k1",
    secret: str = "s3cret",
    at: float = NOW,
    if_match: str | None = None,
) -> HttpRequest:
    headers = list(signed_headers(key, secret, method, target, body, if_match=if_match, now=at).items())
    if if_match is not None:
        headers.append(("If-Match", if_match))
    return HttpRequest(method, target, headers, body=body)


def test_signed_request_verifies_to_its_key_id() -> None:
    assert verify_signature(_signed("POST", "/q/1/reply", b'{"a":1}'), {"k1": "s3cret"}, NOW) == "k1"


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (HttpRequest("GET", "/q", []), "requires signed requests"),
        (_signed("GET", "/q", b"", key="nobody"), "unknown key id"),
        (_signed("GET", "/q", b"", secret="wrong"), "does not match"),
        (_signed("GET", "/q", b"", at=NOW - 301), "5 minutes"),
        (_signed("GET", "/q", b"", secret="wrong", at=NOW - 301), "does not match"),
        (
            HttpRequest("GET", "/q", [*_signed("GET", "/q", b"").headers[:2], ("X-Wait-Signature", "v0=00")]),
            "does not match",
        ),
    ],
)
def test_bad_signatures_are_refused(request_: HttpRequest, message: str) -> None:
    with pytest.raises(SignatureError, match=message):
        verify_signature(request_, {"k1": "s3cret"}, NOW)


def test_signature_is_the_documented_wire_format() -> None:
    # HMAC-SHA256(SECRET, "v0:{timestamp}:{METHOD}:{path?query}:{If-Match or ''}:{raw body}").
    body = b'{"answer": {"action": "approve"}}'
    expected = hmac.new(
        b"s3cret", b'v0:1800000000:POST:/questions/q-1/reply?x=1:"d1":' + body, hashlib.sha256
    ).hexdigest()
    request = HttpRequest(
        "POST",
        "/questions/q-1/reply?x=1",
        [
            ("X-Wait-Key-Id", "k1"),
            ("X-Wait-Request-Timestamp", "1800000000"),
            ("X-Wait-Signature", f"v0={expected}"),
            ("If-Match", '"d1"'),
        ],
        body=body,
    )

    assert verify_signature(request, {"k1": "s3cret"}, 1_800_000_000) == "k1"


def test_signature_binds_if_match() -> None:
    signed = _signed("POST", "/questions/q-1/reply", b"{}", if_match='"d1"')
    swapped = HttpRequest("POST", "/questions/q-1/reply", [*signed.headers[:3], ("If-Match", '"d2"')], b"{}")

    with pytest.raises(SignatureError):
        verify_signature(swapped, {"k1": "s3cret"}, NOW)


def test_slack_interactions_pass_unsigned_for_the_api_to_verify_slack_signature() -> None:
    seen: list[dict[str, Any]] = []
    gateway = Gateway(_capture_handler(seen), hmac_keys={"k1": "s3cret"}, clock=lambda: NOW)

    response = gateway.handle(HttpRequest("POST", "/slack/interactions", [], body=b"payload=%7B%7D"))

    assert response.status == 200
    assert seen[0]["requestContext"]["authorizer"] is None
    assert gateway.handle(HttpRequest("POST", "/slack/other", [], body=b"")).status == 401


def test_header_lookup_ignores_case_and_takes_the_first() -> None:
    headers = [("x-wait-key-id", "k1"), ("X-Wait-Key-Id", "k2")]

    assert header_value(headers, "X-WAIT-KEY-ID") == "k1"
    assert header_value(headers, "X-Wait-Signature") is None
    assert HttpResponse(200, [("etag", '"d"')]).header("ETag") == '"d"'


def test_signature_binds_method_and_path() -> None:
    signed = _signed("GET", "/questions/a", b"")
    moved = HttpRequest("GET", "/questions/b", signed.headers)

    with pytest.raises(SignatureError):
        verify_signature(moved, {"k1": "s3cret"}, NOW)


def test_gateway_with_keys_refuses_unsigned_and_ignores_principal_header() -> None:
    seen: list[dict[str, Any]] = []
    gateway = Gateway(_capture_handler(seen), hmac_keys={"k1": "s3cret"}, clock=lambda: NOW)

    refused = gateway.handle(HttpRequest("GET", "/q", [("X-Wait-Principal", "mallory")]))
    signed = _signed("GET", "/q", b"")
    accepted = gateway.handle(HttpRequest("GET", "/q", [*signed.headers, ("X-Wait-Principal", "mallory")]))

    assert refused.status == 401
    assert accepted.status == 200
    assert len(seen) == 1
    assert seen[0]["requestContext"]["authorizer"] == {"principalId": "hmac:k1"}
    assert seen[0]["requestContext"]["identity"]["userArn"] is None


@pytest.mark.parametrize(
    ("target", "path"),
    [
        ("/threads/a%20b/runs", "/threads/a b/runs"),
        ("/threads/t%3A1", "/threads/t:1"),
        ("/threads/%C3%A9", "/threads/\u00e9"),
        ("/threads/a%2Fb", "/threads/a/b"),
        ("/threads/%FF", "/threads/\ufffd"),
    ],
)
def test_path_and_path_parameters_are_percent_decoded_like_api_gateway(target: str, path: str) -> None:
    event = to_proxy_event(HttpRequest("POST", target, []))

    assert event["path"] == path
    assert event["pathParameters"] == {"proxy": path.lstrip("/")}


# -- replays: the deployed api's replay store, behind --hmac-key ------------------------------


@pytest.fixture
def ledger_replays() -> Any:
    import boto3
    from moto import mock_aws

    from wait_service.channels.signing import LedgerReplayGuard
    from wait_service.resources import create_resources

    with mock_aws():
        clients = {name: boto3.client(name, region_name="us-east-1") for name in ("dynamodb", "sqs", "sns")}
        resources = create_resources(clients["dynamodb"], clients["sqs"], clients["sns"], prefix="g-")
        yield LedgerReplayGuard(resources.ledger_table, clients["dynamodb"])


@pytest.mark.parametrize(
    ("method", "target", "body"),
    [
        ("POST", "/threads/t-1/runs", b'{"input": {"amount": 5}}'),
        ("POST", "/questions/q-1/reply", b'{"answer": {"action": "approve"}}'),
        ("GET", "/questions/q-1", b""),
        ("GET", "/questions?status=pending", b""),
    ],
)
def test_a_replayed_signature_is_401_replayed_on_every_route(
    ledger_replays: Any, method: str, target: str, body: bytes
) -> None:
    seen: list[dict[str, Any]] = []
    gateway = Gateway(
        _capture_handler(seen), hmac_keys={"k1": "s3cret"}, clock=lambda: NOW, replays=ledger_replays
    )
    request = _signed(method, target, body)

    first = gateway.handle(request)
    again = gateway.handle(request)

    assert first.status == 200
    assert again.status == 401
    assert json.loads(again.body)["error"] == "replayed"
    assert len(seen) == 1
    # A new signature (a new timestamp) for the same request is a new request.
    assert gateway.handle(_signed(method, target, body, at=NOW + 1)).status == 200


def test_a_replay_store_that_fails_refuses_the_request(ledger_replays: Any) -> None:
    class Failing:
        def first_use(self, key_id: str, signature: str, until: int) -> bool:
            raise RuntimeError("ledger down")

    seen: list[dict[str, Any]] = []
    gateway = Gateway(
        _capture_handler(seen), hmac_keys={"k1": "s3cret"}, clock=lambda: NOW, replays=Failing()
    )

    refused = gateway.handle(_signed("GET", "/questions/q-1", b""))

    assert (refused.status, json.loads(refused.body)["error"], seen) == (401, "replayed", [])


def test_signed_routes_are_left_to_the_api_which_records_them_itself(ledger_replays: Any) -> None:
    seen: list[dict[str, Any]] = []
    gateway = Gateway(
        _capture_handler(seen), hmac_keys={"k1": "s3cret"}, clock=lambda: NOW, replays=ledger_replays
    )
    request = _signed("GET", "/signed/questions/q-1", b"")

    assert [gateway.handle(request).status for _ in range(2)] == [200, 200]


@pytest.mark.parametrize(
    ("values", "expected"),
    [([], 0), (["0"], 0), (["17"], 17), ([" 17 "], 17), (["17", "17"], 17)],
)
def test_content_length_reads_digits(values: list[str], expected: int) -> None:
    assert content_length(values) == expected


@pytest.mark.parametrize("values", [["abc"], ["-1"], ["1e3"], ["\u0661"], ["+5"], ["1", "2"], [""]])
def test_a_malformed_content_length_is_refused(values: list[str]) -> None:
    with pytest.raises(ValueError, match="Content-Length"):
        content_length(values)
