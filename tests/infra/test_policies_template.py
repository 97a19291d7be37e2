"""The policy store in the template: its table, the runner's read-only grant, the operators' write."""

from __future__ import annotations

import argparse
import io
import json
from typing import TYPE_CHECKING, Any

import pytest
from test_template import arn_of, logical_id, role_actions

from infra.policies import POLICY_OPERATOR_ACTIONS, POLICY_READ_ACTIONS, STACK_READ_ACTIONS

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import Synth

pytestmark = pytest.mark.infra


def test_the_table_is_retained_and_never_expires(default_synth: Synth) -> None:
    table = default_synth.resources("AWS::DynamoDB::Table")[
        logical_id(default_synth, default_synth.stack.policies.table)
    ]
    assert (table["DeletionPolicy"], table["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert "TimeToLiveSpecification" not in table["Properties"]
    assert default_synth.template_json["Outputs"]["PolicyTableName"]["Value"] == {
        "Ref": logical_id(default_synth, default_synth.stack.policies.table)
    }


def test_only_the_runner_reads_it_and_no_function_writes_it(default_synth: Synth) -> None:
    stack = default_synth.stack
    table = arn_of(default_synth, stack.policies.table)
    runner = stack.runner
    variables = default_synth.resources("AWS::Lambda::Function")[logical_id(default_synth, runner.function)][
        "Properties"
    ]["Environment"]["Variables"]
    assert variables["AGENT_WAIT_POLICY_TABLE"] == {"Ref": logical_id(default_synth, stack.policies.table)}
    for role in (runner.role, stack.api_function.role, stack.dispatcher.role, stack.timers.lifecycle.role):
        on_table = {
            action
            for actions, resource in role_actions(default_synth, role)
            if resource == table
            for action in actions
        }
        assert on_table == (set(POLICY_READ_ACTIONS) if role is runner.role else set())


def test_the_operator_policy_grants_what_agent_wait_policies_calls(
    default_synth: Synth, tmp_path: Path
) -> None:
    import boto3
    from moto import mock_aws

    from agent_wait_cli.policies_command import run_policies
    from wait_service.answers.policy_store import PolicyStore
    from wait_service.resources import POLICIES, create_table

    called: set[str] = set()

    def record(model: Any, **_: Any) -> None:
        called.add(f"{model.service_model.endpoint_prefix}:{model.name}")

    override = tmp_path / "p.json"
    override.write_text(json.dumps({"ttl": 600}), encoding="utf-8")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, POLICIES, "agent-wait-policies")
        client.meta.events.register("before-call.*.*", record)
        store = PolicyStore("agent-wait-policies", client)
        for argv in (
            ["set", "issue_refund"],
            ["list"],
            ["show", "issue_refund"],
            ["diff", "issue_refund"],
        ):
            args = argparse.Namespace(
                action=argv[0], name=argv[-1], file=str(override), json=False, if_version=None
            )
            run_policies(args, io.StringIO(), store=store)

    stack = default_synth.stack
    [policy] = default_synth.resources("AWS::IAM::ManagedPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    [on_table] = [s for s in statements if s["Resource"] == arn_of(default_synth, stack.policies.table)]
    assert set(on_table["Action"]) == set(POLICY_OPERATOR_ACTIONS) == called
    # The CLI finds the table from this stack's outputs
    [describe] = [s for s in statements if s["Action"] == list(STACK_READ_ACTIONS)[0]]
    assert describe["Resource"] == {"Ref": "AWS::StackId"}
