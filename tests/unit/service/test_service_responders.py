"""IAM responders: a policy names roles and users; a role session is admitted by its role only.

``tests/events/reply_assumed_role.json`` is a reply signed with SigV4 by a role session, as API
Gateway's IAM authorization hands it to the api (REST proxy integration). Its
``requestContext.identity`` carries what API Gateway documents for IAM callers ("$context.identity.*"
in the API Gateway developer guide): ``userArn`` (the session's ARN,
``arn:aws:sts::<account>:assumed-role/<role>/<session>``), ``caller`` and ``user`` (``<role id>:<session>``),
``accountId``, ``accessKey`` (a temporary ``ASIA`` key), ``principalOrgId``, ``sourceIp``,
``userAgent`` and the ``cognito*`` fields (null). There is no source identity in it: API Gateway
does not pass ``sts:SourceIdentity`` to the integration (it is not among the ``$context.identity``
variables, nor among the condition keys its resource policies evaluate). A deployment that wants
the person recorded pins the session name to the source identity in the role's trust policy (the
example in docs/security.md), and the answer records the session ARN, session name included.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from service_events import api_event, body_of, load_event

from agent_wait import approval
from wait_service.answers.responders import admits, iam_identity

if TYPE_CHECKING:
    from collections.abc import Callable

    from service_events import Aws

    Call = Callable[[dict[str, Any]], dict[str, Any]]

SAMPLE = "reply_assumed_role.json"
SESSION = "arn:aws:sts::123456789012:assumed-role/Approver/alice"
APPROVER_ROLE = "arn:aws:iam::123456789012:role/approvals/Approver"


def signed_by_session(
    question_id: str, if_match: str, identity: dict[str, Any] | None = None
) -> dict[str, Any]:
    return api_event(
        SAMPLE,
        path=f"/questions/{question_id}/reply",
        resource="/questions/{question_id}/reply",
        path_parameters={"question_id": question_id},
        body=json.dumps({"answer": {"action": "approve"}}),
        headers={"If-Match": if_match},
        identity=identity,
    )


def test_the_sample_event_carries_what_api_gateway_sends_for_a_role_session() -> None:
    identity = load_event(SAMPLE)["requestContext"]["identity"]
    assert set(identity) == {
        "accessKey",
        "accountId",
        "caller",
        "cognitoAuthenticationProvider",
        "cognitoAuthenticationType",
        "cognitoIdentityId",
        "cognitoIdentityPoolId",
        "principalOrgId",
        "sourceIp",
        "user",
        "userAgent",
        "userArn",
    }
    assert identity["userArn"] == SESSION
    # `caller` and `user` are the role's unique id and the session name, not an ARN to match on.
    assert identity["caller"] == identity["user"] == "AROAEXAMPLEROLEID1234:alice"
    assert identity["accessKey"].startswith("ASIA")  # temporary credentials
    # No source identity: nothing in the event but the session name says who assumed the role.
    assert not any("identity" in key.lower() and key.startswith("source") for key in identity)


def test_a_role_arn_admits_the_role_s_sessions_and_the_session_is_recorded(aws: Aws, call: Call) -> None:
    # Given a question only the Approver role may answer (the role named with its path)
    envelope = aws.raise_question(policy=approval(responders=[APPROVER_ROLE]))

    # When a session of that role approves it
    response = call(signed_by_session("q-1", f'"{envelope.digest}"'))

    # Then it is accepted, and the answer names the session (who assumed the role, as named)
    assert response["statusCode"] == 202
    question = body_of(call(api_event_get("q-1")))
    assert question["answered_by"] == SESSION
    assert question["audit"]["answered_by"] == SESSION


@pytest.mark.parametrize(
    "responders",
    [
        # The session's own ARN: its session name is the caller's choice, so it admits nobody.
        [SESSION],
        # A user named like the session: a session named "alice" is not the user alice.
        ["arn:aws:iam::123456789012:user/alice"],
        # A role of the same name in another account.
        ["arn:aws:iam::210987654321:role/Approver"],
        # Another role.
        ["arn:aws:iam::123456789012:role/Auditor"],
    ],
)
def test_a_session_is_never_admitted_by_its_session_name(aws: Aws, call: Call, responders: list[str]) -> None:
    envelope = aws.raise_question(policy=approval(responders=responders))

    response = call(signed_by_session("q-1", f'"{envelope.digest}"'))

    assert response["statusCode"] == 403
    assert body_of(response)["principal"] == SESSION
    assert aws.inbox_messages() == []


def test_an_iam_user_entry_admits_the_user_whatever_the_path(aws: Aws, call: Call) -> None:
    envelope = aws.raise_question(policy=approval(responders=["arn:aws:iam::123456789012:user/ann"]))
    identity = load_event("reply.json")["requestContext"]["identity"] | {
        "userArn": "arn:aws:iam::123456789012:user/finance/ann"
    }

    assert call(signed_by_session("q-1", f'"{envelope.digest}"', identity))["statusCode"] == 202


def api_event_get(question_id: str) -> dict[str, Any]:
    return api_event(
        "get_question.json",
        path=f"/questions/{question_id}",
        resource="/questions/{question_id}",
        path_parameters={"question_id": question_id},
    )


@pytest.mark.parametrize(
    ("responders", "principal", "admitted"),
    [
        ([], SESSION, True),
        ([APPROVER_ROLE], SESSION, True),
        (["arn:aws:iam::123456789012:role/Approver"], SESSION, True),
        ([APPROVER_ROLE], "arn:aws:sts::123456789012:assumed-role/Approver/anyone-else", True),
        ([SESSION], SESSION, False),
        (
            ["arn:aws:sts::123456789012:federated-user/alice"],
            "arn:aws:sts::123456789012:federated-user/alice",
            False,
        ),
        (["arn:aws:iam::123456789012:role/Approver"], "arn:aws:iam::123456789012:user/Approver", False),
        (["arn:aws:iam::123456789012:user/ann"], "arn:aws:iam::123456789012:user/ann", True),
        (["arn:aws:iam::123456789012:user/ann"], "arn:aws-us-gov:iam::123456789012:user/ann", False),
        (
            ["arn:aws:iam::123456789012:role/Approver"],
            "arn:aws:sts::123456789012:assumed-role/Approver",
            False,
        ),
        (["slack:T1:U9"], "slack:T1:U9", True),
        (["hmac:ops"], "hmac:other", False),
        (["alice"], "arn:aws:sts::123456789012:assumed-role/Approver/alice", False),
    ],
)
def test_admits(responders: list[str], principal: str, admitted: bool) -> None:
    assert admits(responders, principal) is admitted


def test_iam_identity_reads_roles_users_and_sessions() -> None:
    assert iam_identity(APPROVER_ROLE) == iam_identity("arn:aws:iam::123456789012:role/Approver")
    session = iam_identity(SESSION)
    assert session is not None and (session.kind, session.name, session.session) == (
        "role",
        "Approver",
        "alice",
    )
    assert iam_identity("arn:aws:iam::123456789012:group/admins") is None
    assert iam_identity("arn:aws:iam::123456789012:user/") is None
