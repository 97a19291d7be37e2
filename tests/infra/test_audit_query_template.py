"""Athena over the audit archive: the Glue table is the archive record, the saved queries are the
report module's, and the operator policy grants what ``agent-wait audit query --api`` calls."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from test_template import logical_id

from infra.audit_query import (
    ARCHIVE_READ_ACTIONS,
    CATALOG_ACTIONS,
    KEY_ACTIONS,
    QUERY_ACTIONS,
    RESULTS_ACTIONS,
    RESULTS_PREFIX,
    SAVED_QUERY_ACTIONS,
)
from tests.infra.conftest import KMS_KEY_ARN
from wait_service.stream.archive import PARTITION_KEY, archive_record, to_line
from wait_service.stream.archive_reports import REPORTS, TABLE

if TYPE_CHECKING:
    from tests.infra.conftest import Synth

pytestmark = pytest.mark.infra


def _one(synth: Synth, kind: str) -> dict[str, Any]:
    [resource] = synth.resources(kind).values()
    return resource


def _operator_statements(synth: Synth) -> list[dict[str, Any]]:
    [policy] = synth.resources("AWS::IAM::ManagedPolicy").values()
    return list(policy["Properties"]["PolicyDocument"]["Statement"])


def _actions(statement: dict[str, Any]) -> set[str]:
    action = statement["Action"]
    return set(action if isinstance(action, list) else [action])


def test_the_glue_table_columns_are_the_fields_the_archive_writes(default_synth: Synth) -> None:
    # Given a record the archive's own code writes, for a question with every field set
    from wait_service.ledger import QuestionRecord

    question = QuestionRecord(
        question_id="q",
        thread_id="t",
        status="resumed",
        digest="d",
        question={"function": "issue_refund", "args": {"amount": 40}},
        policy={"kind": "approval"},
        source=None,
        created_at="2026-12-01T09:00:00.000Z",
        expires_at="2026-12-01T10:00:00.000Z",
        updated_at="2026-12-01T09:05:00.000Z",
        lifecycle=[{"stage": "answered"}],
        answer={"action": "approve"},
        answered_by="ann",
        answered_at="2026-12-01T09:04:00.000Z",
        reason="fine",
        resumed_at="2026-12-01T09:05:00.000Z",
        error="none",
    )
    record = archive_record(question, sequence_number="7", archived_at="2026-12-01T09:05:01.000Z")
    line = json.loads(to_line(record))
    # Then the table's columns are the line's fields, in order, each a string; the day is the partition
    described = _one(default_synth, "AWS::Glue::Table")["Properties"]["TableInput"]
    assert described["Name"] == TABLE
    columns = described["StorageDescriptor"]["Columns"]
    assert [c["Name"] for c in columns] == list(line)
    assert all(isinstance(value, str) for value in line.values())
    assert {c["Type"] for c in columns} == {"string"}
    assert (
        [k["Name"] for k in described["PartitionKeys"]]
        == [PARTITION_KEY]
        == [k for k in record if k not in line]
    )


def test_every_report_is_saved_as_a_named_query_in_the_workgroup(default_synth: Synth) -> None:
    queries = default_synth.resources("AWS::Athena::NamedQuery")
    workgroup_id = default_synth.stack.get_logical_id(default_synth.stack.audit_queries.workgroup)
    saved = {q["Properties"]["Name"]: q["Properties"] for q in queries.values()}
    # The very text the CLI runs: one place for each report's SQL
    assert {name: p["QueryString"] for name, p in saved.items()} == {n: r.sql for n, r in REPORTS.items()}
    for props in saved.values():
        assert props["Database"] == "agent_wait"
        assert props["WorkGroup"] == {"Ref": workgroup_id}
        assert props["Description"] == REPORTS[props["Name"]].description


def test_the_workgroup_enforces_encrypted_results_in_its_own_bucket(default_synth: Synth) -> None:
    stack = default_synth.stack
    props = _one(default_synth, "AWS::Athena::WorkGroup")["Properties"]
    assert props["Name"] == "agent-wait-audit"
    config = props["WorkGroupConfiguration"]
    assert config["EnforceWorkGroupConfiguration"] is True
    assert config["BytesScannedCutoffPerQuery"] > 0
    results = config["ResultConfiguration"]
    assert results["EncryptionConfiguration"] == {"EncryptionOption": "SSE_S3"}
    bucket_id = logical_id(default_synth, stack.audit_queries.results)
    assert results["OutputLocation"] == {
        "Fn::Join": ["", ["s3://", {"Ref": bucket_id}, f"/{RESULTS_PREFIX}/"]]
    }
    bucket = default_synth.resources("AWS::S3::Bucket")[bucket_id]
    assert bucket["Properties"]["PublicAccessBlockConfiguration"]["RestrictPublicBuckets"] is True
    assert bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    [rule] = bucket["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == 30
    tls = [
        s
        for p in default_synth.resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in tls
    )
    # The stack tells the CLI's users its name
    outputs = default_synth.template_json["Outputs"]
    assert outputs["AuditWorkGroup"]["Value"] == {"Ref": stack.get_logical_id(stack.audit_queries.workgroup)}


def test_with_a_customer_managed_key_results_use_it_and_operators_may_too(options_synth: Synth) -> None:
    props = _one(options_synth, "AWS::Athena::WorkGroup")["Properties"]
    encryption = props["WorkGroupConfiguration"]["ResultConfiguration"]["EncryptionConfiguration"]
    assert encryption == {"EncryptionOption": "SSE_KMS", "KmsKey": KMS_KEY_ARN}
    keys = [s for s in _operator_statements(options_synth) if _actions(s) & set(KEY_ACTIONS)]
    assert [(_actions(s), s["Resource"]) for s in keys] == [(set(KEY_ACTIONS), KMS_KEY_ARN)]


def test_operators_may_query_the_archive_in_the_workgroup_and_nothing_wider(default_synth: Synth) -> None:
    stack = default_synth.stack
    statements = _operator_statements(default_synth)
    by_actions = {frozenset(_actions(s)): s["Resource"] for s in statements}
    rendered = json.dumps(by_actions[frozenset(QUERY_ACTIONS + SAVED_QUERY_ACTIONS)])
    assert ":athena:" in rendered and "workgroup/agent-wait-audit" in rendered
    catalog = json.dumps(by_actions[frozenset(CATALOG_ACTIONS)])
    for part in (":catalog", ":database/agent_wait", ":table/agent_wait/audit"):
        assert part in catalog
    archive_id = logical_id(default_synth, stack.archive.bucket)
    assert by_actions[frozenset(ARCHIVE_READ_ACTIONS)] == [
        {"Fn::GetAtt": [archive_id, "Arn"]},
        {"Fn::Join": ["", [{"Fn::GetAtt": [archive_id, "Arn"]}, "/audit/*"]]},
    ]
    results_id = logical_id(default_synth, stack.audit_queries.results)
    assert by_actions[frozenset(RESULTS_ACTIONS)] == [
        {"Fn::GetAtt": [results_id, "Arn"]},
        {"Fn::Join": ["", [{"Fn::GetAtt": [results_id, "Arn"]}, f"/{RESULTS_PREFIX}/*"]]},
    ]
    # No key without kms_key_arn, and no write to the archive
    assert not any(_actions(s) & set(KEY_ACTIONS) for s in statements)
    assert not any(
        "s3:PutObject" in _actions(s) and s["Resource"] == by_actions[frozenset(ARCHIVE_READ_ACTIONS)]
        for s in statements
    )


def test_the_policy_grants_every_athena_call_the_cli_makes(default_synth: Synth) -> None:
    """Recorded from ``agent-wait audit query --api`` against moto, a timed-out query (stop) included."""
    import boto3
    from moto import mock_aws
    from moto.moto_api import state_manager

    from agent_wait_cli.audit_query import AthenaArchive

    called: set[str] = set()

    def record(event_name: str, **_: Any) -> None:
        _, service, operation = event_name.split(".")
        called.add(f"{service}:{operation}")

    granted = set().union(*(_actions(s) for s in _operator_statements(default_synth)))
    with mock_aws():
        client = boto3.client("athena", region_name="us-east-1")
        client.create_work_group(
            Name="agent-wait-audit",
            Configuration={"ResultConfiguration": {"OutputLocation": "s3://r/results/"}},
        )
        client.meta.events.register("before-call.athena.*", record)
        AthenaArchive(client, workgroup="agent-wait-audit", database="agent_wait").query("SELECT 1")
        state_manager.set_transition("athena::execution", {"progression": "manual", "times": 1000})
        try:
            ticks = iter(range(1000))
            slow = AthenaArchive(
                client,
                workgroup="agent-wait-audit",
                database="agent_wait",
                max_wait=1,
                sleep=lambda _: None,
                clock=lambda: float(next(ticks)),
            )
            with pytest.raises(Exception, match="stopped"):
                slow.query("SELECT 2")
        finally:
            state_manager.unset_transition("athena::execution")
    assert called == {
        "athena:StartQueryExecution",
        "athena:GetQueryExecution",
        "athena:GetQueryResults",
        "athena:StopQueryExecution",
    }
    assert called <= granted


def test_duckdb_is_a_cli_dependency_only() -> None:
    """The local engine never reaches a Lambda: no layer installs it and no deployed module imports it."""
    import tomllib

    from infra.constants import REPO_ROOT
    from infra.requirements import layer_requirements

    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [extra for extra, pins in extras.items() if any(p.startswith("duckdb==") for p in pins)] == [
        "local"
    ]
    for layer, checkpointer in (("core", "aws"), ("graph", "aws"), ("graph", "dynamodb")):
        assert not [r for r in layer_requirements(layer, checkpointer=checkpointer) if r.startswith("duckdb")]
    for folder in ("functions", "layers"):
        for module in (REPO_ROOT / folder).rglob("*.py"):
            assert "import duckdb" not in module.read_text(), module
