"""Who a policy's ``responders`` admit: IAM roles and users by ARN, any other principal exactly.

An IAM caller reaches the api through API Gateway's IAM authorizer, which puts the caller's ARN in
``requestContext.identity.userArn`` (see ``api.principal_of``):

- an IAM user signs as ``arn:aws:iam::<account>:user[/<path>]/<name>``;
- a role session signs as ``arn:aws:sts::<account>:assumed-role/<role name>/<session name>``,
  where the session name is whatever the caller passed to ``sts:AssumeRole``.

So an entry naming a role (``arn:aws:iam::<account>:role[/<path>]/<name>``) admits every session
of that role, matched on partition, account and role name (the assumed-role ARN carries no path;
a role name is unique in its account whatever its path). An entry naming an IAM user admits that
user (same account and name, any path). An entry that is itself an STS ARN (``assumed-role``,
``federated-user``) admits nobody: its last part is chosen by the caller, so matching it would let
anyone who may assume the role answer as "alice" by naming their session ``alice``. Principals
that are not IAM ARNs (``slack:T:U``, ``hmac:<key id>``, a JWT ``sub``, a local name) match an
entry only when equal to it.

Examples
--------
>>> role = "arn:aws:iam::123456789012:role/approvers/Approver"
>>> admits([role], "arn:aws:sts::123456789012:assumed-role/Approver/alice")
True
>>> admits(["arn:aws:sts::123456789012:assumed-role/Approver/alice"],
...        "arn:aws:sts::123456789012:assumed-role/Approver/alice")
False
>>> admits(["slack:T1:U9"], "slack:T1:U9"), admits([], "anyone")
(True, True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["IamIdentity", "admits", "iam_identity"]

# arn:<partition>:<service>::<account>:<resource>; IAM and STS ARNs have no region.
_ARN = re.compile(
    r"arn:(?P<partition>aws[a-z-]*):(?P<service>iam|sts)::(?P<account>[0-9]{12}):(?P<resource>.+)"
)


@dataclass(frozen=True)
class IamIdentity:
    """An IAM user or role an ARN names, or the role an assumed-role session runs as.

    ``session`` is the caller-chosen session name of an assumed-role ARN (``None`` otherwise);
    it is recorded with the answer, never used to admit anyone.
    """

    kind: Literal["user", "role"]
    partition: str
    account: str
    name: str
    session: str | None = None


def iam_identity(arn: str) -> IamIdentity | None:
    """The user or role ``arn`` names (a session ARN: the role it runs as); ``None`` for anything else.

    Examples
    --------
    >>> iam_identity("arn:aws:iam::123456789012:user/ops/ann")
    IamIdentity(kind='user', partition='aws', account='123456789012', name='ann', session=None)
    >>> iam_identity("arn:aws:sts::123456789012:assumed-role/Approver/alice").session
    'alice'
    >>> iam_identity("slack:T1:U9") is None, iam_identity("arn:aws:iam::123456789012:root") is None
    (True, True)
    """
    match = _ARN.fullmatch(arn)
    if match is None:
        return None
    partition, service, account = match["partition"], match["service"], match["account"]
    kind, _, rest = match["resource"].partition("/")
    parts = rest.split("/")
    if not rest or any(not part for part in parts):
        return None
    if service == "iam" and kind in ("user", "role"):
        return IamIdentity("user" if kind == "user" else "role", partition, account, parts[-1])
    if service == "sts" and kind == "assumed-role" and len(parts) == 2:
        return IamIdentity("role", partition, account, parts[0], session=parts[1])
    return None


def _is_sts_arn(entry: str) -> bool:
    match = _ARN.fullmatch(entry)
    return match is not None and match["service"] == "sts"


def _admits(entry: str, principal: str, caller: IamIdentity | None) -> bool:
    if _is_sts_arn(entry):
        return False
    if caller is None:
        return entry == principal
    named = iam_identity(entry)
    if named is None or named.session is not None:
        return False
    return (named.kind, named.partition, named.account, named.name) == (
        caller.kind,
        caller.partition,
        caller.account,
        caller.name,
    )


def admits(responders: Iterable[str], principal: str) -> bool:
    """Whether ``principal`` may answer a question whose policy names ``responders``.

    An empty list admits any caller the api authenticated.
    """
    entries = list(responders)
    if not entries:
        return True
    caller = iam_identity(principal)
    if caller is None and _is_sts_arn(principal):
        # A federated-user (or other STS) caller: its name is its own choice; no entry admits it.
        return False
    return any(_admits(entry, principal, caller) for entry in entries)
