"""A signed request refused as a replay is signed anew in the next second, once.

A signature covers a whole-second timestamp, so two commands that send the same signed request
within one second send the same signature, and the api refuses the second with 401 ``replayed``.
"""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from agent_wait_cli.client import ApiClient, ApiError


class Api:
    """Answers like the api's replay guard: a signature seen before is 401 ``replayed``."""

    def __init__(self, refuse_always: bool = False) -> None:
        self.seen: list[str] = []
        self.refuse_always = refuse_always

    def __call__(self, request: urllib.request.Request, timeout: float) -> Any:
        signature = request.get_header("X-wait-signature")
        replayed = signature in self.seen or self.refuse_always
        self.seen.append(signature)
        if replayed:
            body = json.dumps({"error": "replayed", "message": "this signature was already used"})
            raise urllib.error.HTTPError(request.full_url, 401, "Unauthorized", {}, io.BytesIO(body.encode()))  # type: ignore[arg-type]
        return _Raw(200, b'{"items": []}')


class _Raw:
    def __init__(self, status: int, body: bytes) -> None:
        self.status, self.body, self.headers = status, body, {}

    def __enter__(self) -> _Raw:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def read(self) -> bytes:
        return self.body


def client(api: Api, clock: list[float], slept: list[float]) -> ApiClient:
    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    return ApiClient(
        "http://127.0.0.1:8787",
        hmac_key=("ops", "s3cret"),
        opener=api,
        clock=lambda: clock[0],
        sleep=sleep,
    )


def test_the_same_request_twice_in_one_second_is_resigned_in_the_next() -> None:
    api, clock, slept = Api(), [1_700_000_000.25], []
    cli = client(api, clock, slept)

    # Given a signed read already sent in this second (by another command, say)
    assert cli.request("GET", "/questions/q-1").status == 200

    # When the same read is sent again in the same second
    response = cli.request("GET", "/questions/q-1")

    # Then the refused signature is not sent again: the request waits for the next second and is
    # signed anew, once
    assert response.status == 200
    assert slept == [pytest.approx(0.75)]
    assert len(api.seen) == 3 and api.seen[1] == api.seen[0] != api.seen[2]


def test_a_second_refusal_is_the_callers_error() -> None:
    api, clock, slept = Api(refuse_always=True), [1_700_000_000.0], []

    with pytest.raises(ApiError) as refused:
        client(api, clock, slept).request(
            "POST", "/questions/q-1/reply", body={"answer": {"action": "approve"}}
        )

    assert refused.value.status == 401 and len(api.seen) == 2 and len(slept) == 1


def test_other_refusals_are_not_retried() -> None:
    class Forbidden(Api):
        def __call__(self, request: urllib.request.Request, timeout: float) -> Any:
            self.seen.append(request.get_header("X-wait-signature"))
            body = json.dumps({"error": "responder_not_allowed"}).encode()
            raise urllib.error.HTTPError(request.full_url, 403, "Forbidden", {}, io.BytesIO(body))  # type: ignore[arg-type]

    api, clock, slept = Forbidden(), [1_700_000_000.0], []
    with pytest.raises(ApiError):
        client(api, clock, slept).request("GET", "/questions/q-1")
    assert len(api.seen) == 1 and slept == []
