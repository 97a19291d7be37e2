"""The one request-signing scheme: a fixed vector, every tampered part refused, malformed input False."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from agent_wait.signing import sign, signed_headers, string_to_sign, verify

SECRET = "wait-secret-2026"
NOW = 1_800_000_000
METHOD, PATH, BODY, IF_MATCH = "POST", "/questions/q-1/reply", b'{"answer":{"action":"approve"}}', '"d1"'
# Fixed once from the definition; a change to the scheme breaks every client, so it breaks this test.
VECTOR = "v0=f7e5b65214f2fe8d93bab7a9a53624e9a16f4a5cc914bae131ce44423b07ec19"


def _sig(**overrides: object) -> str:
    parts: dict[str, object] = {"timestamp": NOW, "method": METHOD, "path": PATH, "body": BODY}
    parts.update(overrides)
    if_match = parts.pop("if_match", IF_MATCH)
    return sign(SECRET, **parts, if_match=if_match)  # type: ignore[arg-type]


def test_our_v0_vector() -> None:
    message = b'v0:1800000000:POST:/questions/q-1/reply:"d1":{"answer":{"action":"approve"}}'
    assert string_to_sign(NOW, METHOD, PATH, BODY, IF_MATCH) == message
    assert _sig() == "v0=" + hmac.new(SECRET.encode(), message, hashlib.sha256).hexdigest()
    assert _sig() == VECTOR


def test_the_untampered_request_verifies() -> None:
    assert verify(SECRET, str(NOW), VECTOR, METHOD, PATH, BODY, if_match=IF_MATCH, now=NOW)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("body", b'{"answer":{"action":"reject"}}'),
        ("method", "PUT"),
        ("path", "/questions/q-2/reply"),
        ("if_match", '"d2"'),
        ("if_match", None),
        ("timestamp", str(NOW + 1)),
        ("secret", "another-secret"),
    ],
)
def test_each_tampered_part_is_refused(field: str, value: object) -> None:
    request: dict[str, object] = {
        "secret": SECRET,
        "timestamp": str(NOW),
        "method": METHOD,
        "path": PATH,
        "body": BODY,
        "if_match": IF_MATCH,
    }
    request[field] = value
    assert verify(signature=VECTOR, now=NOW, **request) is False  # type: ignore[arg-type]


def test_a_tampered_signature_is_refused() -> None:
    flipped = VECTOR[:-1] + ("0" if VECTOR[-1] != "0" else "1")
    assert not verify(SECRET, str(NOW), flipped, METHOD, PATH, BODY, if_match=IF_MATCH, now=NOW)


@pytest.mark.parametrize(
    ("skew", "ok"), [(-301, False), (301, False), (-299, True), (299, True), (300, True)]
)
def test_the_window_is_300_seconds_either_way(skew: int, ok: bool) -> None:
    assert verify(SECRET, str(NOW), VECTOR, METHOD, PATH, BODY, if_match=IF_MATCH, now=NOW + skew) is ok


@pytest.mark.parametrize(
    "signature",
    [
        None,
        "",
        "v0=",
        "v0=ü" * 10,
        "v0=" + "é" * 64,
        VECTOR.upper(),
        "v1=" + VECTOR[3:],
        VECTOR + "0",
        42,
        b"v0=00",
    ],
)
def test_malformed_signatures_are_false_never_an_exception(signature: object) -> None:
    assert verify(SECRET, str(NOW), signature, METHOD, PATH, BODY, if_match=IF_MATCH, now=NOW) is False


@pytest.mark.parametrize(
    "timestamp", [None, "", " 1800000000", "+1800000000", "-1", "1.8e9", "١٨٠٠٠٠٠٠٠٠", True, 1.5]
)
def test_malformed_timestamps_are_false(timestamp: object) -> None:
    assert verify(SECRET, timestamp, VECTOR, METHOD, PATH, BODY, if_match=IF_MATCH, now=NOW) is False


@pytest.mark.parametrize(
    ("method", "path", "body", "if_match"),
    [
        (None, PATH, BODY, IF_MATCH),
        (METHOD, None, BODY, IF_MATCH),
        (METHOD, PATH, "not bytes", IF_MATCH),
        (METHOD, PATH, BODY, 7),
        (METHOD, "/questions/\ud800/reply", BODY, IF_MATCH),
        (METHOD, PATH, BODY, '"\udfff"'),
    ],
)
def test_malformed_request_parts_are_false(
    method: object, path: object, body: object, if_match: object
) -> None:
    assert verify(SECRET, str(NOW), VECTOR, method, path, body, if_match=if_match, now=NOW) is False


@pytest.mark.parametrize("secret", ["", b"", None, 12])
def test_an_empty_or_odd_secret_never_verifies(secret: object) -> None:
    assert verify(secret, str(NOW), VECTOR, METHOD, PATH, BODY, if_match=IF_MATCH, now=NOW) is False  # type: ignore[arg-type]


def test_signed_headers_carry_key_id_timestamp_and_signature() -> None:
    headers = signed_headers("k1", SECRET, METHOD, PATH, BODY, if_match=IF_MATCH, now=NOW + 0.9)
    assert headers == {
        "X-Wait-Key-Id": "k1",
        "X-Wait-Request-Timestamp": str(NOW),
        "X-Wait-Signature": VECTOR,
    }
