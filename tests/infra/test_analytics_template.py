"""The approval analytics in the template: the stats table, who may write and read it, the dashboard row."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from test_template import arn_of, logical_id, role_actions, table_properties, table_view

from wait_service import metric_names
from wait_service.resources import STATS

if TYPE_CHECKING:
    from conftest import Synth

pytestmark = pytest.mark.infra


def test_the_stats_table_matches_its_spec(default_synth: Synth) -> None:
    table = default_synth.resources("AWS::DynamoDB::Table")[
        logical_id(default_synth, default_synth.stack.ledger.stats)
    ]
    assert table_view(table["Properties"]) == table_properties(STATS)


def test_the_dispatcher_writes_the_counters_and_the_api_only_reads_them(default_synth: Synth) -> None:
    stack = default_synth.stack
    stats = arn_of(default_synth, stack.ledger.stats)
    dispatcher = [
        actions
        for actions, resource in role_actions(default_synth, stack.dispatcher.role)
        if resource == stats
    ]
    api = [
        actions
        for actions, resource in role_actions(default_synth, stack.api_function.role)
        if resource == stats
    ]
    assert dispatcher == [("dynamodb:PutItem", "dynamodb:UpdateItem")]
    assert api == [("dynamodb:Query",)]
    functions = default_synth.resources("AWS::Lambda::Function")
    for fn in (stack.dispatcher.function, stack.api_function.function):
        env = functions[logical_id(default_synth, fn)]["Properties"]["Environment"]["Variables"]
        assert env["AGENT_WAIT_STATS_TABLE"] == {"Ref": logical_id(default_synth, stack.ledger.stats)}


def test_the_dashboard_shows_the_decisions_by_outcome(default_synth: Synth) -> None:
    [dashboard] = default_synth.resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in (
        metric_names.DECISIONS_APPROVED,
        metric_names.DECISIONS_EDITED,
        metric_names.DECISIONS_REJECTED,
        metric_names.DECISIONS_RESPONDED,
        metric_names.EXPIRED_WITH_DEFAULT,
        metric_names.EXPIRED_WITHOUT_DEFAULT,
        metric_names.TIME_TO_DECISION,
    ):
        assert metric in body, metric
    assert "Decisions by outcome" in body
