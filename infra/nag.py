"""Acknowledging cdk-nag findings (cdk-nag 3: CDK's native ``Validations.of(x).acknowledge``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk

if TYPE_CHECKING:
    from constructs import IConstruct


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge ``rule_id`` (optionally ``Rule[Finding]``) on ``scope`` and its children, with a reason.

    Examples
    --------
    >>> acknowledge(role, "AwsSolutions-IAM5[Resource::*]", "X-Ray has no resource-level permissions")
    ... # doctest: +SKIP
    """
    if not reason.strip():
        raise ValueError(f"acknowledging {rule_id} needs a reason")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))
