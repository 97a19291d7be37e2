"""docs/events.md's SNS signature check runs as written: it accepts SNS's signature and nothing else."""

from __future__ import annotations

import base64
import io
import re
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import padding, rsa  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "events.md"
CERT_URL = "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-abc.pem"


def snippet() -> dict[str, Any]:
    text = DOC.read_text()
    section = text[text.index("### An HTTPS endpoint") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "docs/events.md lost its signature check"
    namespace: dict[str, Any] = {}
    exec(compile(match.group(1), str(DOC), "exec"), namespace)
    return namespace


def certificate() -> tuple[rsa.RSAPrivateKey, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return key, cert.public_bytes(serialization.Encoding.PEM)


def signed_notification(key: rsa.RSAPrivateKey) -> dict[str, str]:
    body = {
        "Type": "Notification",
        "MessageId": "m-1",
        "TopicArn": "arn:aws:sns:eu-west-1:123456789012:agent-wait-wait-created",
        "Message": '{"type":"wait.answered","question_id":"q-1"}',
        "Timestamp": "2026-11-30T10:00:00.000Z",
        "SignatureVersion": "2",
        "SigningCertURL": CERT_URL,
    }
    # SNS's string to sign: "<name>\n<value>\n" for each present field, in this order.
    fields = ["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"]
    text = "".join(f"{k}\n{body[k]}\n" for k in fields if k in body)
    body["Signature"] = base64.b64encode(
        key.sign(text.encode(), padding.PKCS1v15(), hashes.SHA256())
    ).decode()
    return body


def test_the_documented_check_accepts_a_signed_notification_and_refuses_tampering(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key, pem = certificate()
    fetched: list[str] = []

    def urlopen(url: str) -> io.BytesIO:
        fetched.append(url)
        return io.BytesIO(pem)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    verify_sns = snippet()["verify_sns"]
    body = signed_notification(key)

    assert verify_sns(body) is True
    assert fetched == [CERT_URL]
    assert verify_sns(body | {"Message": '{"type":"wait.answered","question_id":"q-2"}'}) is False
    # A certificate from anywhere but SNS is never fetched
    assert verify_sns(body | {"SigningCertURL": "https://evil.example.com/sns.pem"}) is False
    assert verify_sns(body | {"SigningCertURL": "http://sns.eu-west-1.amazonaws.com/x.pem"}) is False
    assert fetched == [CERT_URL, CERT_URL]
