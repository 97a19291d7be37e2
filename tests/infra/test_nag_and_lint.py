"""cdk-nag (AwsSolutions + Serverless) and cfn-lint on every synthesized variant, every option on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sqs as sqs
from cdk_nag import AwsSolutionsChecks, NagPack, ServerlessChecks

if TYPE_CHECKING:
    from tests.infra.conftest import Synth

pytestmark = pytest.mark.infra

PACKS: list[type[NagPack]] = [AwsSolutionsChecks, ServerlessChecks]


def _errors(pack: NagPack, scope: cdk.Stack) -> list[str]:
    report = pack.validate_scope(scope)
    return [
        f"{violation.rule_name}: {[r.construct_path for r in violation.violating_resources]}"
        for violation in report.violations
        if violation.severity == "error"
    ]


@pytest.mark.parametrize("pack", PACKS, ids=lambda p: p.__name__)
def test_no_unacknowledged_nag_error(every_synth: Synth, pack: type[NagPack]) -> None:
    assert _errors(pack(), every_synth.stack) == []


@pytest.mark.parametrize("pack", PACKS, ids=lambda p: p.__name__)
def test_the_packs_do_report_errors_on_a_bare_queue(pack: type[NagPack]) -> None:
    # Given a queue with no DLQ, no encryption and no TLS policy: proves the check above can fail.
    app = cdk.App()
    stack = cdk.Stack(app, "Bare")
    sqs.Queue(stack, "Queue", encryption=sqs.QueueEncryption.UNENCRYPTED)
    assert _errors(pack(), stack) != []


def test_every_acknowledgement_carries_a_reason(every_synth: Synth) -> None:
    acknowledged: dict[str, str] = {}
    for construct in every_synth.stack.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                for rule, reason in entry.data.items():
                    acknowledged[f"{construct.node.path} {rule}"] = reason
    assert acknowledged, "expected the documented acknowledgements (X-Ray '*', DLQ redrive, runtime pin ...)"
    assert all(len(reason) > 40 for reason in acknowledged.values()), acknowledged


def test_iam_wildcards_are_only_the_xray_resource(every_synth: Synth) -> None:
    for _, policy in every_synth.resources("AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            assert not any("*" in action for action in actions), statement
            if statement["Resource"] == "*":
                assert sorted(actions) == ["xray:PutTelemetryRecords", "xray:PutTraceSegments"]


def test_cfn_lint_reports_no_error(every_synth: Synth) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("cfn-lint")), "--format", "json", str(every_synth.template_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    findings = json.loads(done.stdout or "[]")
    errors = [f for f in findings if f["Level"] == "Error"]
    assert errors == [], errors
    assert done.returncode in (0, 4, 8), done.stderr  # 2 = error; 4 = warnings, 8 = informational
