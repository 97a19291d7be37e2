"""WebhookAnnounce signing and retry schedule, with a fake clock, sleep and opener (no network)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

import pytest

from agent_wait import Envelope
from agent_wait.errors import WebhookDeliveryError
from agent_wait.testing import AnnounceConformance, sample_envelope
from agent_wait.webhook import WebhookAnnounce, sign, verify

if TYPE_CHECKING:
    from agent_wait import BaseAnnounce

SECRET = "s3cret"


class FakeOpener:
    """Answers each request with the next scripted outcome: a status code or an exception."""

    def __init__(self, *outcomes: int | Exception) -> None:
        self.outcomes = list(outcomes)
        self.requests: list[urllib.request.Request] = []

    def __call__(self, request: urllib.request.Request, timeout: float) -> int:
        self.requests.append(request)
        outcome = self.outcomes.pop(0) if self.outcomes else 204
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


class FakeClock:
    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _hook(opener: FakeOpener, clock: FakeClock, **kwargs: object) -> WebhookAnnounce:
    return WebhookAnnounce(
        "https://receiver.example/hook",
        SECRET,
        opener=opener,
        sleep=clock.sleep,
        clock=clock.time,
        **kwargs,  # type: ignore[arg-type]
    )


def _header(request: urllib.request.Request, name: str) -> str | None:
    return {k.lower(): v for k, v in request.header_items()}.get(name.lower())


def test_webhook_signs_post_and_its_url_path_with_an_empty_if_match() -> None:
    """The announcer signs ``v0:{timestamp}:POST:{path}::{raw_body}`` (agent_wait.signing)."""
    body = b'{"a":1}'
    base = b"v0:1700000000:POST:/hook::" + body
    expected = hmac.new(SECRET.encode(), base, hashlib.sha256).hexdigest()
    assert sign(SECRET, 1700000000, "POST", "/hook", body) == f"v0={expected}"
    assert sign(SECRET.encode(), "1700000000", "post", "/hook", body) == f"v0={expected}"
    assert WebhookAnnounce("https://receiver.example/hook", SECRET).signed_path == "/hook"


def test_request_is_signed_with_dedupe_key_and_key_id() -> None:
    opener, clock = FakeOpener(200), FakeClock()
    envelope = sample_envelope()
    assert _hook(opener, clock, key_id="k-2026").announce(envelope) is True

    [request] = opener.requests
    assert request.get_method() == "POST" and request.full_url == "https://receiver.example/hook"
    body = request.data
    assert isinstance(body, bytes) and Envelope.model_validate_json(body) == envelope
    assert _header(request, "X-Wait-Dedupe-Key") == "wait.created:q-1"
    assert _header(request, "X-Wait-Key-Id") == "k-2026"
    assert _header(request, "Content-Type") == "application/json"
    timestamp = _header(request, "X-Wait-Request-Timestamp")
    assert timestamp == "1700000000"
    signature = _header(request, "X-Wait-Signature")
    assert verify(SECRET, timestamp, signature, "POST", "/hook", body, now=clock.now)


def test_no_key_id_header_without_a_key_id() -> None:
    opener = FakeOpener(200)
    _hook(opener, FakeClock()).announce(sample_envelope())
    assert _header(opener.requests[0], "X-Wait-Key-Id") is None


def test_retries_non_2xx_and_network_errors_with_exponential_backoff() -> None:
    """ "retries with exponential backoff, at most 5 attempts"."""
    opener = FakeOpener(500, urllib.error.URLError("refused"), TimeoutError("slow"), 302, 201)
    clock = FakeClock()
    assert _hook(opener, clock).announce(sample_envelope()) is True
    assert len(opener.requests) == 5
    assert clock.sleeps == [1.0, 2.0, 4.0, 8.0]
    # Each attempt is signed afresh so a late retry still verifies within five minutes.
    stamps = [_header(r, "X-Wait-Request-Timestamp") for r in opener.requests]
    assert stamps == ["1700000000", "1700000001", "1700000003", "1700000007", "1700000015"]
    for request in opener.requests:
        body = request.data
        assert isinstance(body, bytes)
        stamp, signature = _header(request, "X-Wait-Request-Timestamp"), _header(request, "X-Wait-Signature")
        assert verify(SECRET, stamp, signature, "POST", "/hook", body, now=clock.now)


def test_gives_up_after_five_attempts_and_reports(caplog: pytest.LogCaptureFixture) -> None:
    opener, clock = FakeOpener(*[503] * 10), FakeClock()
    hook = _hook(opener, clock)
    with pytest.raises(WebhookDeliveryError) as err:
        hook.deliver(sample_envelope("q-down"))
    assert err.value.attempts == 5 and err.value.question_id == "q-down"
    assert "HTTP 503" in str(err.value)
    assert len(opener.requests) == 5 and clock.sleeps == [1.0, 2.0, 4.0, 8.0]

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agent_wait"):
        assert hook.announce(sample_envelope("q-down")) is False
    assert sum("webhook attempt" in r.getMessage() for r in caplog.records) == 5
    assert any(r.levelno == logging.ERROR and r.exc_info for r in caplog.records)


def test_delay_is_capped_at_thirty_minutes() -> None:
    opener, clock = FakeOpener(*[500] * 8), FakeClock()
    hook = _hook(opener, clock, base_delay=600.0, max_attempts=6)
    assert hook.announce(sample_envelope()) is False
    assert clock.sleeps == [600.0, 1200.0, 1800.0, 1800.0, 1800.0]


def test_max_attempts_must_be_positive() -> None:
    with pytest.raises(ValueError):
        WebhookAnnounce("u", SECRET, max_attempts=0)


class TestWebhookAnnounce(AnnounceConformance):
    def make_announce(self) -> WebhookAnnounce:
        self.opener, self.clock = FakeOpener(), FakeClock()
        return _hook(self.opener, self.clock)

    def delivered(self, announce: BaseAnnounce) -> list[Envelope]:
        return [Envelope.model_validate_json(r.data) for r in self.opener.requests]  # type: ignore[arg-type]

    def make_broken(self) -> BaseAnnounce:
        return _hook(FakeOpener(*[urllib.error.URLError("down")] * 5), FakeClock())


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 413, 422])
def test_a_permanent_4xx_is_not_retried(status: int) -> None:
    """A client error other than 408/429 would be refused again: one attempt, no backoff."""
    opener, clock = FakeOpener(status, 204), FakeClock()
    with pytest.raises(WebhookDeliveryError) as err:
        _hook(opener, clock).deliver(sample_envelope("q-gone"))
    assert len(opener.requests) == 1 and clock.sleeps == []
    assert err.value.attempts == 1 and f"HTTP {status}" in str(err.value)


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503])
def test_timeouts_throttling_and_5xx_are_retried_on_schedule(status: int) -> None:
    opener, clock = FakeOpener(status, status, 204), FakeClock()
    assert _hook(opener, clock).announce(sample_envelope()) is True
    assert len(opener.requests) == 3 and clock.sleeps == [1.0, 2.0]


def test_a_permanent_4xx_after_retries_stops_there() -> None:
    opener, clock = FakeOpener(503, 429, 404, 204), FakeClock()
    with pytest.raises(WebhookDeliveryError) as err:
        _hook(opener, clock).deliver(sample_envelope())
    assert len(opener.requests) == 3 and clock.sleeps == [1.0, 2.0]
    assert err.value.attempts == 3 and "HTTP 404" in str(err.value)
