"""The deployed api's ``/signed`` routes: verified in the Lambda, 401 with a reason for every failure."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from service_events import api_event, body_of

from agent_wait import Policy
from agent_wait.signing import signed_headers
from wait_service.channels.signing import build_signed_requests, signed_target

if TYPE_CHECKING:
    from collections.abc import Callable

    from service_events import Aws

    from wait_service.http.api import WaitApi

    Call = Callable[[dict[str, Any]], dict[str, Any]]

NOW = 1_800_000_000
SECRET = "ops-shared-secret"


@pytest.fixture
def secretsmanager(aws: Aws) -> Any:
    # Inside the aws fixture's mock_aws context.
    return boto3.client("secretsmanager", region_name="us-east-1")


@pytest.fixture
def key_arn(secretsmanager: Any) -> str:
    return str(secretsmanager.create_secret(Name="agent-wait/ops", SecretString=SECRET)["ARN"])


@pytest.fixture
def signed_api(api: WaitApi, aws: Aws, secretsmanager: Any, key_arn: str) -> WaitApi:
    # max_age=0: every request reads Secrets Manager, so a rotation shows at once.
    api.signed = build_signed_requests(
        {"ops": key_arn},
        aws.resources.ledger_table,
        secretsmanager=secretsmanager,
        dynamodb=aws.dynamodb,
        clock=lambda: NOW,
        max_age=0,
    )
    return api


def signed_event(
    path: str,
    body: dict[str, Any],
    *,
    key_id: str = "ops",
    secret: str = SECRET,
    at: float = NOW,
    if_match: str | None = None,
    sign_method: str = "POST",
    sign_path: str | None = None,
    sign_if_match: str | None = None,
    sent_body: bytes | None = None,
    headers: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    """A POST under /signed as API Gateway passes it (no authorizer, so no principal)."""
    raw = json.dumps(body).encode()
    signature = signed_headers(
        key_id,
        secret,
        sign_method,
        sign_path or path,
        raw,
        if_match=sign_if_match if sign_if_match is not None else if_match,
        now=at,
    )
    all_headers: dict[str, str | None] = {**signature, "If-Match": if_match}
    all_headers.update(headers or {})
    return api_event(
        "reply.json",
        path=path,
        resource="/signed/{proxy+}",
        method="POST",
        body=(sent_body if sent_body is not None else raw).decode(),
        headers=all_headers,
        identity={"sourceIp": "198.51.100.7", "userArn": None, "user": None, "caller": None},
    )


def reply_path(question_id: str = "q-1") -> str:
    return f"/signed/questions/{question_id}/reply"


APPROVE = {"answer": {"action": "approve"}}


def error_of(response: dict[str, Any]) -> tuple[int, str]:
    return response["statusCode"], body_of(response)["error"]


def test_a_signed_reply_is_recorded_with_the_hmac_principal(
    signed_api: WaitApi, aws: Aws, call: Call
) -> None:
    envelope = aws.raise_question("t-1", "q-1")

    response = call(signed_event(reply_path(), APPROVE, if_match=f'"{envelope.digest}"'))

    assert response["statusCode"] == 202, response["body"]
    question = signed_api.ledger.get_question("q-1")
    assert question.answered_by == "hmac:ops" and question.status == "answered"


def test_hmac_principal_is_usable_in_responders(signed_api: WaitApi, aws: Aws, call: Call) -> None:
    envelope = aws.raise_question("t-1", "q-1", policy=Policy(kind="approval", responders=["hmac:other"]))

    response = call(signed_event(reply_path(), APPROVE, if_match=f'"{envelope.digest}"'))

    assert response["statusCode"] == 403 and body_of(response)["principal"] == "hmac:ops"


def test_a_signed_run_is_queued(signed_api: WaitApi, call: Call) -> None:
    response = call(signed_event("/signed/threads/t-9/runs", {"input": {"customer": "c-1"}}))

    assert response["statusCode"] == 202 and body_of(response)["thread_id"] == "t-9"


def test_a_replayed_signature_is_refused(signed_api: WaitApi, aws: Aws, call: Call) -> None:
    envelope = aws.raise_question("t-1", "q-1")
    event = signed_event(reply_path(), APPROVE, if_match=f'"{envelope.digest}"')

    assert call(event)["statusCode"] == 202
    assert error_of(call(event)) == (401, "replayed")


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"headers": {"X-Wait-Signature": None}}, "signature_missing"),
        ({"headers": {"X-Wait-Request-Timestamp": None}}, "signature_missing"),
        ({"headers": {"X-Wait-Key-Id": None}}, "signature_missing"),
        ({"key_id": "nobody"}, "unknown_key"),
        ({"secret": "guessed"}, "signature_invalid"),
        ({"sent_body": b'{"answer": {"action": "reject"}}'}, "signature_invalid"),
        ({"sign_method": "PUT"}, "signature_invalid"),
        ({"sign_path": "/signed/questions/q-2/reply"}, "signature_invalid"),
        ({"sign_path": "/questions/q-1/reply"}, "signature_invalid"),
        ({"sign_if_match": '"another-digest"'}, "signature_invalid"),
        ({"headers": {"X-Wait-Signature": "v0=" + "é" * 64}}, "signature_invalid"),
        ({"headers": {"X-Wait-Request-Timestamp": "soon"}}, "signature_invalid"),
        ({"at": NOW - 301}, "timestamp_out_of_window"),
        ({"at": NOW + 301}, "timestamp_out_of_window"),
    ],
)
def test_every_failure_is_a_401_naming_its_reason(
    signed_api: WaitApi, aws: Aws, call: Call, change: dict[str, Any], code: str
) -> None:
    envelope = aws.raise_question("t-1", "q-1")

    response = call(signed_event(reply_path(), APPROVE, if_match=f'"{envelope.digest}"', **change))

    assert error_of(response) == (401, code)
    assert signed_api.ledger.get_question("q-1").status == "raised"


@pytest.mark.parametrize("skew", [-299, 299])
def test_a_skew_within_the_window_is_accepted(signed_api: WaitApi, aws: Aws, call: Call, skew: int) -> None:
    envelope = aws.raise_question("t-1", "q-1")

    response = call(signed_event(reply_path(), APPROVE, if_match=f'"{envelope.digest}"', at=NOW + skew))

    assert response["statusCode"] == 202


def test_rotation_accepts_old_and_new_then_only_the_new(
    signed_api: WaitApi, aws: Aws, call: Call, secretsmanager: Any, key_arn: str
) -> None:
    # Given a rotation under way: the new secret is AWSCURRENT, the old one AWSPREVIOUS
    secretsmanager.put_secret_value(SecretId=key_arn, SecretString="ops-new-secret")
    for question_id in ("q-old", "q-new", "q-after"):
        aws.raise_question("t-" + question_id, question_id)

    def reply(question_id: str, secret: str) -> int:
        digest = signed_api.ledger.get_question(question_id).digest
        event = signed_event(reply_path(question_id), APPROVE, if_match=f'"{digest}"', secret=secret)
        return int(call(event)["statusCode"])

    # Then both sign
    assert reply("q-old", SECRET) == 202
    assert reply("q-new", "ops-new-secret") == 202

    # When the rotation ends (the old version loses AWSPREVIOUS), only the new one signs
    old = next(
        v["VersionId"]
        for v in secretsmanager.list_secret_version_ids(SecretId=key_arn)["Versions"]
        if "AWSPREVIOUS" in v.get("VersionStages", [])
    )
    secretsmanager.update_secret_version_stage(
        SecretId=key_arn, VersionStage="AWSPREVIOUS", RemoveFromVersionId=old
    )
    assert reply("q-after", SECRET) == 401
    assert reply("q-after", "ops-new-secret") == 202


def test_a_secret_that_cannot_be_read_is_a_401_not_a_5xx(
    signed_api: WaitApi, aws: Aws, call: Call, secretsmanager: Any
) -> None:
    missing = "arn:aws:secretsmanager:us-east-1:123456789012:secret:agent-wait/gone-AbCdEf"
    signed_api.signed = build_signed_requests(
        {"ops": missing}, aws.resources.ledger_table, secretsmanager=secretsmanager, clock=lambda: NOW
    )

    assert error_of(call(signed_event("/signed/threads/t-1/runs", {"input": {}}))) == (401, "unknown_key")


def test_a_verified_request_reaches_only_the_signed_route_set(
    signed_api: WaitApi, aws: Aws, call: Call
) -> None:
    aws.raise_question("t-1", "q-1")

    response = call(signed_event("/signed/questions", {}))

    assert response["statusCode"] == 404


def test_no_signing_keys_means_unknown_key(api: WaitApi, call: Call) -> None:
    assert error_of(call(signed_event("/signed/threads/t-1/runs", {"input": {}}))) == (401, "unknown_key")


def test_signed_target_keeps_the_query_string() -> None:
    event = {"path": "/signed/threads/t/runs", "multiValueQueryStringParameters": {"mode": ["fast"]}}
    assert signed_target(event) == "/signed/threads/t/runs?mode=fast"
